"""Distributed vote counting on a Ray cluster: shards of the private records vote where they are; only their
exact vote COUNTS travel, are summed, and the sum is what the Gaussian mechanism releases — noise is added once,
centrally, by :func:`privtext.mechanisms.voting.dp_vote_histogram` from the release's own generator.

Privacy: the summed histogram equals the single-process histogram exactly (every record still casts one vote in
its own label group), so Δ = 1 and the event are unchanged; the shards' partial counts are exact private values —
they stay inside the cluster the private data already lives on and are never written or released.

Ray is optional (``pip install 'privtext[ray]'``) and imported only here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from ..config import ClusterConfig
from ..errors import ConfigError, MissingDependencyError


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "distributed voting") from None
    return ray


def distributed_nearest_votes(
    private_emb: np.ndarray,
    candidate_emb: np.ndarray,
    *,
    cluster: ClusterConfig,
    count: Callable[..., tuple[np.ndarray, int]],
    private_groups: Sequence[int] | np.ndarray | None = None,
    candidate_groups: Sequence[int] | np.ndarray | None = None,
    **vote_kwargs: Any,
) -> tuple[np.ndarray, int]:
    """``count`` (:func:`privtext.mechanisms.voting.nearest_votes`, passed in by its module) computed shard by
    shard on Ray and summed."""
    if cluster.backend == "local":
        return count(private_emb, candidate_emb, private_groups=private_groups,
                             candidate_groups=candidate_groups, **vote_kwargs)
    if cluster.backend != "ray":
        raise ConfigError(f"cluster.backend must be 'local' or 'ray', got {cluster.backend!r}")
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=cluster.address, num_cpus=cluster.num_cpus, include_dashboard=False,
                 log_to_driver=False, ignore_reinit_error=True)
    n = len(private_emb)
    pg = np.zeros(n, dtype=np.int64) if private_groups is None else np.asarray(private_groups)
    if len(pg) != n:
        raise ConfigError(f"{len(pg)} private group ids for {n} private embeddings")
    remote = ray.remote(_shard_votes)
    cand_ref = ray.put(np.asarray(candidate_emb, dtype=np.float32))
    cg_ref = ray.put(None if candidate_groups is None else np.asarray(candidate_groups))
    bounds = np.linspace(0, n, cluster.shards + 1).astype(int)
    futures = [remote.remote(count, np.asarray(private_emb[s:e], dtype=np.float32), pg[s:e], cand_ref, cg_ref,
                             vote_kwargs)
               for s, e in pairwise(bounds) if e > s]
    counts = np.zeros(len(candidate_emb), dtype=np.int64)
    n_voting = 0
    for c, nv in ray.get(futures):
        counts += c
        n_voting += nv
    return counts, n_voting


def _shard_votes(count: Callable[..., tuple[np.ndarray, int]], q: np.ndarray, pg: np.ndarray, cand: np.ndarray,
                 cg: np.ndarray | None, kwargs: dict[str, Any]) -> tuple[np.ndarray, int]:
    return count(q, cand, private_groups=pg, candidate_groups=cg, **kwargs)
