"""SecPE's scorer (Alg 3 lines 7-11): the noisy clustering release, then each noisy centre's vote."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ...data.population import Population
from ...engine.loop import ScoreResult
from ...mechanisms.clustering import (
    PublicClusters,
    RecordAssignment,
    assign_records,
    centre_votes,
    clustering_release,
    secret_clustering,
)
from ...mechanisms.voting import center_rows, nearest_votes, threshold_histogram
from ...privacy.relation import NeighbouringRelation
from ...privacy.release import Release, ReleaseKeeper
from ...search import Metric


def _no_diagnostic(name: str, key: str, value: Any) -> None:
    """The default diagnostic sink: private diagnostics are dropped."""


@dataclass(kw_only=True, eq=False)
class ClusterScorer:
    """SecPE's scorer (Alg 3 lines 7-11): release the noisy clustering (once per iteration, or once for the run),
    then let each noisy centre give its noisy count to its nearest candidate — post-processing of released values.

    Built with what it uses: the public clusters, the private embeddings and groups, ρ and σ with SecretNoise's
    result (for the per-secret events), its options, the voting metric and centring, the release keeper, a
    factory of privacy randomness (``noise_rng(key)``) and a sink for private diagnostics."""

    name: ClassVar[str] = "secret_cluster_votes"

    clusters: PublicClusters
    private_emb: np.ndarray
    private_groups: np.ndarray
    rho: np.ndarray
    sigma: float
    noise: Any
    options: Any
    metric: Metric
    center: str
    threshold: float
    relation: NeighbouringRelation
    keeper: ReleaseKeeper
    noise_rng: Callable[[str], np.random.Generator]
    diagnostic: Callable[[str, str, Any], None] = _no_diagnostic
    direct_emb: np.ndarray | None = None
    direct_groups: np.ndarray | None = None
    _assignment: RecordAssignment | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.sigma = float(self.sigma)
        self.threshold = float(self.threshold)

    def _release(self, t_rel: int) -> Release:
        """Counts and centres of one clustering: ONE release carrying every event it spends
        (:func:`privtext.mechanisms.clustering.clustering_release`)."""
        return clustering_release(f"clusters/iter_{t_rel:03d}", sigma=self.sigma, sample=self.options.sample,
                                  noise=self.noise, clusters=len(self.clusters), radius=self.options.clip_radius,
                                  relation=self.relation, iteration=t_rel)

    def assignment(self) -> RecordAssignment:
        """Every record that can be sampled (ρ > 0) in its public cluster, searched at the first release that
        computes and reused by every later one (the public clusters are fixed for the run, so a record's cluster
        is too; a resumed run whose releases are all kept never searches)."""
        if self._assignment is None:
            self._assignment = assign_records(self.private_emb, self.private_groups, self.clusters,
                                              radius=self.options.clip_radius, metric=self.metric,
                                              backend=self.options.assign_backend, nprobe=self.options.assign_nprobe,
                                              search=self.rho > 0)
        return self._assignment

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult:
        release = self._release(iteration if self.options.recluster_each_iteration else 0)
        key = release.key

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            out, event = secret_clustering(self.private_emb, self.private_groups, self.clusters, rho=self.rho,
                                           sigma=self.sigma, rng=self.noise_rng(key),
                                           radius=self.options.clip_radius, metric=self.metric, sample=self.options.sample,
                                           assignment=self.assignment())
            self.diagnostic("sampled_secret_holders", key, out.sampled)
            return {"centres": out.centres, "counts": out.counts}, event

        vals = self.keeper.release(release, compute)
        centres, cands = vals["centres"], vote_emb
        mu = vote_emb.mean(axis=0) if self.center == "candidates" and len(vote_emb) else None
        if mu is not None:  # public: post-processing of released centres and generated texts
            centres, cands = center_rows(centres, mu), center_rows(vote_emb, mu)
        weights = vals["counts"]
        direct = np.zeros(len(population))
        if self.direct_emb is not None:
            # hybrid: the clusters' public part (n_k secret-free records) votes record by record below; the
            # centres carry only the holders' noisy count ñ_k − n_k (post-processing of ñ_k and the public n_k)
            weights = np.clip(weights - self.clusters.sizes, 0.0, None)
            if len(self.direct_emb):
                counts, _ = nearest_votes(self.direct_emb, vote_emb, private_groups=self.direct_groups,
                                          candidate_groups=population.group, metric=self.metric, center=mu)
                direct = counts.astype(np.float64)
        hist = direct + centre_votes(centres, weights, self.clusters.group, cands, population.group,
                                     metric=self.metric)
        hist = threshold_histogram(hist, self.threshold)
        return ScoreResult(hist, meta={"sigma": self.sigma, "clusters": len(self.clusters), "release": key,
                                       "centres_with_votes": int((weights > 0).sum()),
                                       "direct_votes": int(direct.sum())})

    def released_votes(self, histogram: np.ndarray, meta: Mapping[str, Any]) -> Any:
        """The engine's histogram as post-processing of the kept clustering release ``meta["release"]`` (the noisy
        centres' votes, plus the secret-free records' direct votes, which are public here) for issue 38's
        learning step."""
        from ...learn.pairs import ReleasedVotes

        return ReleasedVotes.post_processed(histogram, self.keeper, [str(meta["release"])])


def auto_clusters(*, n_public: int, n_groups: int, num_samples: int, sigma: float, dim: int, radius: float = 1.0,
                  noise_norm: float = 0.25, min_size: int = 10) -> int:
    """K for ``secpe.clusters: auto``.

    A released centre carries noise (2R/n_k)·N(0, σ² I_d) (Eq 7), whose norm is about (2R/n_k)·σ·√d. A centre is
    only useful when that is small against the spread of the clusters (unit embeddings: distances ≲ 1), so every
    cluster should hold n_k ≥ 2Rσ√d / ``noise_norm`` public records; with n_public records split evenly that caps
    K at n_public / that size. The noise does not shrink with the holders' shift, so more clusters only add noise
    (measured: SecPE with 500 and 1500 clusters on Yelp was no better than 100). K is at least one per label group
    and at most N_syn (more centres than samples cannot all win a distinct vote), and clusters hold at least
    ``min_size`` records."""
    need = max(float(min_size), 2.0 * radius * sigma * np.sqrt(dim) / noise_norm) if sigma > 0 else float(min_size)
    k = int(n_public // need)
    return int(max(n_groups, min(k, num_samples, max(n_public // min_size, 1))))


__all__ = ["ClusterScorer", "auto_clusters"]
