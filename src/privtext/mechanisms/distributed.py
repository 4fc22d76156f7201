"""Distributed vote counting on Ray: the private records are split into shards, every shard counts its own
nearest-neighbour votes on a Ray worker, and the driver sums the shards' counts. The noise is added afterwards,
once, centrally, by :func:`privtext.mechanisms.voting.dp_vote_histogram` (``counter=``).

Why the release is unchanged
----------------------------
A record's vote is the nearest candidate *of its own label* to that record; it depends on the record and the
(public) candidates only. Splitting the records into disjoint shards therefore splits the vote multiset, and
Σ_shards counts_s = counts — integer addition, exact, whatever the shard sizes or their order. The noisy release
h + N(0, (σΔ)²I) is drawn from the same generator after the sum, so with reproducible noise a distributed run
releases bit for bit what a single process releases (``tests/test_distributed_votes.py``), and the sensitivity
argument of ``voting.py`` (one record, one vote, Δ = 1) holds as it is. Noise is never added per shard: L shards
adding N(0, σ²/L) each would also sum to N(0, σ²), but every worker would then hold its own noise, and a
worker that saw its share could subtract it.

Trust boundary
--------------
The per-shard counts are exact functions of private records, as private as the records themselves: the Ray
cluster must belong to the data holder (its object store holds private embeddings and exact counts in memory;
configure object spilling to a private disk, e.g. under the run's ``private/`` folder, or disable it). Nothing
here writes to disk. For several *mutually distrusting* data holders use secure aggregation instead
(:mod:`privtext.federated`, WASP §4.7).

Ray is an optional dependency (``pip install -c constraints.txt -e '.[ray]'``), imported on first use.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends.ray_cluster import cluster_cpus, connect, ray_module
from ..errors import ConfigError
from .voting import label_groups


def _ray() -> Any:
    return ray_module("distributed voting (cluster.backend: ray)")


def _shard_counts(private_emb: np.ndarray, candidate_emb: np.ndarray, private_groups: np.ndarray,
                  candidate_groups: np.ndarray, kwargs: dict[str, Any]) -> tuple[np.ndarray, int]:
    """One shard's exact counts (runs on a Ray worker)."""
    from .voting import nearest_votes

    return nearest_votes(private_emb, candidate_emb, private_groups=private_groups,
                         candidate_groups=candidate_groups, **kwargs)


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous, near-equal, non-empty row ranges covering 0..n (fewer ranges than ``shards`` when n is
    smaller)."""
    if shards < 1:
        raise ConfigError(f"shards must be ≥ 1, got {shards}")
    k = max(1, min(int(shards), n))
    edges = np.linspace(0, n, k + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]


class RayVoteCounter:
    """A :data:`privtext.mechanisms.voting.VoteCounter` that counts votes shard by shard on Ray.

    ``address``: an existing cluster (``"auto"``, ``"ray://host:10001"``) or None for a local one started with
    ``num_cpus`` CPUs; ``shards``: private shards per vote (default: the cluster's CPU count). A cluster this
    object started is left running for the next vote and shut down by :meth:`close`."""

    def __init__(self, *, address: str | None = None, shards: int | None = None, num_cpus: int | None = None,
                 worker_threads: int | None = 1):
        if shards is not None and (isinstance(shards, bool) or int(shards) < 1):
            raise ConfigError(f"cluster.shards must be a positive integer, got {shards!r}")
        if num_cpus is not None and int(num_cpus) < 1:
            raise ConfigError(f"cluster.num_cpus must be a positive integer, got {num_cpus!r}")
        self.address, self.shards, self.num_cpus = address, shards, num_cpus
        self.worker_threads = worker_threads
        self._started = False
        self._remote: Any = None

    def _init(self) -> Any:
        ray, started = connect(address=self.address, num_cpus=self.num_cpus, worker_threads=self.worker_threads,
                               purpose="distributed voting (cluster.backend: ray)")
        self._started = self._started or started
        if self._remote is None:
            self._remote = ray.remote(_shard_counts)
        return ray

    def __call__(self, private_emb: np.ndarray, candidate_emb: np.ndarray, *,
                 private_groups: Sequence[int] | np.ndarray | None = None,
                 candidate_groups: Sequence[int] | np.ndarray | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, int]:
        ray = self._init()
        n, n_c = len(private_emb), len(candidate_emb)
        pg, cg = label_groups(private_groups, n, candidate_groups, n_c)
        counts = np.zeros(n_c, dtype=np.int64)
        if n == 0:
            return counts, 0
        want = self.shards or cluster_cpus(ray)
        cand_ref, cg_ref = ray.put(np.ascontiguousarray(candidate_emb)), ray.put(cg)  # broadcast once
        futures = [self._remote.remote(np.ascontiguousarray(private_emb[a:b]), cand_ref, pg[a:b], cg_ref, kwargs)
                   for a, b in shard_bounds(n, want)]
        n_voting = 0
        for c, v in ray.get(futures):
            counts += np.asarray(c, dtype=np.int64)
            n_voting += int(v)
        return counts, n_voting

    def close(self) -> None:
        if self._started:
            _ray().shutdown()
            self._started = False


def build_counter(cluster: Any) -> RayVoteCounter | None:
    """The vote counter a ``cluster:`` section asks for (None: count in this process)."""
    if cluster is None or cluster.backend == "local":
        return None
    return RayVoteCounter(address=cluster.address, shards=cluster.shards, num_cpus=cluster.num_cpus)


__all__ = ["RayVoteCounter", "build_counter", "shard_bounds"]
