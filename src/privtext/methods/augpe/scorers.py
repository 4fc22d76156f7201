"""Aug-PE's scorers: the one step of an iteration that reads private data (a DP nearest-neighbour vote histogram,
from one holder or summed over several parties).

Each release is described by :func:`privtext.privacy.release.gaussian_release`: a record casts one vote
(:data:`privtext.privacy.relation.ONE_VOTE_L2`), the run's relation gives Δ (1 for add/remove one record, k for a
secret's group of k, m for a user capped at m records, 1 for normalised user votes) and the noise std is σ·Δ. The
scorer never computes Δ itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ...config import VotingConfig
from ...data.population import Population
from ...engine.loop import ScoreResult
from ...mechanisms.voting import dp_vote_histogram
from ...privacy.events import gaussian_event
from ...privacy.relation import ONE_VOTE_L2, NeighbouringRelation, party_normalised
from ...privacy.release import ReleaseKeeper, gaussian_release
from ..parties import PartiesOptions


def released_noisy(histogram: np.ndarray, keeper: ReleaseKeeper, meta: Mapping[str, Any]) -> Any:
    """``histogram`` as :class:`~privtext.learn.pairs.ReleasedVotes`: refused unless it equals the ``noisy`` value
    the keeper kept for release ``meta["release"]``."""
    from ...learn.pairs import ReleasedVotes

    return ReleasedVotes.checked(histogram, keeper, str(meta["release"]), "noisy")


@dataclass(kw_only=True, eq=False)
class DPVoteScorer:
    """Aug-PE's scorer: one DP nearest-neighbour vote histogram per iteration.

    Built with what it uses: the private embeddings and label groups, σ, the voting options, the run's relation
    and keeper, and a factory of privacy randomness (``noise_rng(key)``)."""

    name: ClassVar[str] = "dp_nn_votes"

    private_emb: np.ndarray
    private_groups: np.ndarray
    sigma: float
    voting: VotingConfig
    threshold: float
    relation: NeighbouringRelation
    keeper: ReleaseKeeper
    noise_rng: Callable[[str], np.random.Generator]
    counter: Any = None  # exact vote counts elsewhere (Ray shards); None: in this process

    def __post_init__(self) -> None:
        self.sigma = float(self.sigma)
        self.threshold = float(self.threshold)

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult:
        key = f"votes/iter_{iteration:03d}"
        v = self.voting
        center = vote_emb.mean(axis=0) if v.center == "candidates" and len(vote_emb) else None

        r = gaussian_release(
            key, mechanism="dp_nn_vote_histogram", noise_multiplier=self.sigma, contribution=ONE_VOTE_L2,
            relation=self.relation, iteration=iteration,
            description=f"noisy nearest-neighbour vote histogram over {len(population)} candidates; one vote per "
                        "private record",
            meta={"metric": v.metric, "backend": v.backend, "threshold": self.threshold, "center": v.center})

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            rel, event = dp_vote_histogram(
                self.private_emb, vote_emb, noise_multiplier=self.sigma, sensitivity=r.sensitivity,
                rng=self.noise_rng(key), private_groups=self.private_groups,
                candidate_groups=population.group, threshold=self.threshold, metric=v.metric,
                backend=v.backend, center=center, counter=self.counter, chunk_size=v.chunk_size, device=v.device,
                precision=v.precision, nlist=v.nlist, nprobe=v.nprobe, hnsw_m=v.hnsw_m, ef_search=v.ef_search,
            )
            return {"noisy": rel.noisy, "raw_noisy": rel.raw_noisy}, event

        vals = self.keeper.release(r, compute)
        return ScoreResult(vals["noisy"], meta={"sigma": self.sigma, "noise_std": r.noise_std, "release": key})

    def released_votes(self, histogram: np.ndarray, meta: Mapping[str, Any]) -> Any:
        """The engine's histogram, checked equal to the value the keeper kept for the release (issue 38's learning
        step takes nothing else)."""
        return released_noisy(histogram, self.keeper, meta)


@dataclass(kw_only=True, eq=False)
class FederatedVoteScorer:
    """Aug-PE's scorer over several data holders (the PrE-Text setting; :mod:`privtext.federated.votes`): each
    iteration's release is described and recorded BEFORE any party computes; then every party counts the votes of
    its own records, clips them to the public bound B, adds its share N(0, σ²Δ²/t) of the noise, and only the
    (SecAgg+) sum comes back, thresholded like the single-holder histogram (post-processing). Its event is the
    single-holder ``GaussianDpEvent(σ)``: the sum of the parties' counts is the single-holder histogram of their
    union, and a round with |S| ≥ t survivors carries std σΔ·√(|S|/t) ≥ σΔ."""

    name: ClassVar[str] = "federated_nn_votes"

    parties: list[Any]
    options: PartiesOptions
    sigma: float
    voting: VotingConfig
    threshold: float
    relation: NeighbouringRelation
    keeper: ReleaseKeeper
    value_bound: float
    seed: int | None
    reproducible: bool
    drop: dict[int, str] | None = None
    on_round: Callable[[dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        self.sigma = float(self.sigma)
        self.threshold = float(self.threshold)
        self.value_bound = float(self.value_bound)
        self.reproducible = bool(self.reproducible)

    def released_votes(self, histogram: np.ndarray, meta: Mapping[str, Any]) -> Any:
        """As :meth:`DPVoteScorer.released_votes`: the securely aggregated noisy sum as kept."""
        return released_noisy(histogram, self.keeper, meta)

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult:
        from ...federated.votes import federated_nn_votes
        from ...mechanisms.voting import threshold_histogram

        key = f"votes/iter_{iteration:03d}"
        pt, v = self.options, self.voting
        L = len(self.parties)
        tmin = pt.min_survivors if pt.min_survivors is not None else L
        center = vote_emb.mean(axis=0) if v.center == "candidates" and len(vote_emb) else None

        r = gaussian_release(
            key, mechanism="federated_nn_vote_sum", noise_multiplier=self.sigma,
            contribution=party_normalised(ONE_VOTE_L2) if pt.normalise else ONE_VOTE_L2,
            relation=self.relation, iteration=iteration,
            description=(f"sum over {L} parties of their nearest-neighbour vote histograms over {len(population)} "
                         f"candidates, each party adding N(0, σ²Δ²/{tmin - pt.collusion}) (PrE-Text setting; noise "
                         f"covers a server colluding with {pt.collusion} parties); "
                         f"{'SecAgg+' if pt.aggregation == 'secagg' else 'plain (NOT secure) aggregation'}"),
            meta={"metric": v.metric, "backend": v.backend, "threshold": self.threshold, "center": v.center,
                  "parties": L, "aggregation": pt.aggregation, "min_survivors": tmin, "collusion": pt.collusion,
                  "level": pt.level})

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            res = federated_nn_votes(
                self.parties, vote_emb, population.group, sigma=r.noise_std, value_bound=self.value_bound,
                metric=v.metric, center=center, backend=v.backend, normalise=pt.normalise,
                aggregation=pt.aggregation, min_survivors=tmin, collusion=pt.collusion, seed=self.seed, key=key,
                reproducible=self.reproducible, drop=self.drop, timeout=pt.timeout)
            return {"noisy": threshold_histogram(res.values, self.threshold), "raw_noisy": res.values,
                    "survivors": np.asarray(res.survivors, dtype=np.int64),
                    "sum_noise_std": np.asarray([res.noise_std])}, gaussian_event(self.sigma)

        vals = self.keeper.release(r, compute)
        survivors = [int(x) for x in vals["survivors"]]
        sum_std = float(vals["sum_noise_std"][0])
        if self.on_round is not None:
            from ...privacy.statement import released_number

            self.on_round({"iteration": iteration, "survivors": survivors,
                           "sum_noise_std": released_number(sum_std)})
        return ScoreResult(vals["noisy"], meta={"sigma": self.sigma, "noise_std": r.noise_std, "release": key,
                                                "survivors": survivors, "sum_noise_std": sum_std})


__all__ = ["DPVoteScorer", "FederatedVoteScorer"]
