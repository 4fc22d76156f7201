"""SecPE's Secret Clustering (Alg 2, Thm 1 / Eq 7) and cluster-centre voting (Alg 3 lines 8-11).

Public clusters
---------------
k-means on the embeddings of the *public* records (records holding no declared secret, plus any external public
corpus), per label group, gives centres e_k and sizes n_k. They are public and released as they are. Public
embeddings are clipped to the radius R like the private ones, so ‖e_k‖ ≤ R and every point of a cluster lies in
the ball of radius R (needed for the 2R bound below; a no-op for unit vectors with R = 1, Remark 3.3).

Release (Eq 7)
--------------
Each private record i is clipped, ê_i = e_i·min(1, R/‖e_i‖), kept with probability ρ_i (Bernoulli, from
SecretNoise), and assigned to its nearest public centre of its own label group. With m_k records assigned:

    ẽ_k = (n_k e_k + Σ_{i∈C_k} ê_i) / (n_k + m_k) + (2R/n_k)·N(0, σ² I_d)
    ñ_k = n_k + m_k + N(0, σ²)

Sensitivity, for the neighbouring pair "secret s present / absent" (SecPE §3.1: the records holding s are in the
data or not; which records hold a declared secret is treated as public, see docs/privacy.md): let S be the
number of *sampled* records holding s (Poisson-binomial with the ρ_i of its holders) and S_k those in cluster k.

* counts: removing them changes ñ by a vector of L2 norm (Σ_k S_k²)^½ ≤ S, under noise σ per bin: the release
  is dominated by the mixture Σ_s Pr[S=s]·N(s, σ²) against N(0, σ²) (SecPE Alg 1 line 5; Thm 1);
* centres: removing j of the m_k private points of cluster k moves its mean by
  ‖Σ_rem ê_i − j·mean‖/(n_k + m_k − j) ≤ 2R·j/n_k (Thm 1's proof), so with noise (2R/n_k)·σ per coordinate the
  normalised shift is ≤ S_k and, over clusters, ≤ S: the same mixture.

**One sample or two** (``sample``). Composition of mixture (subsampled) events needs *independent* sampling.
Alg 2 draws z ~ Bernoulli(ρ_i) once and both ñ and ẽ use it; the paper then accounts the two releases as if each
had its own sample. With one shared draw the two shifts are not independent: a sampled holder moves the count and
the normalised centre in the same draw, so the joint normalised shift is ‖(S, S)‖ = √2·S — one mixture with
sensitivity √2 per clustering, composed T times, not two independent mixtures composed 2T times. Accounting the
shared draw as two releases under-counts (``../shared/notes/secpe_shared_sample_bound.py``: at ρ = 0.05, T = 1,
the true posterior is ≥ 3.0 r). privtext offers both correct forms:

* ``independent`` (default): the counts and the centres each draw their own Bernoulli(ρ) sample; each is one
  mixture event Σ_s Pr[S=s] N(s, σ²), and a clustering is ``SelfComposedDpEvent(mixture, 2)``;
* ``shared``: one sample for both, as Alg 2 writes it; a clustering is one mixture with shifts √2·s
  (``mixture_event(ρ, σ, sensitivity=√2)``).

At the same ρ and (p, r), ``independent`` needs 0-33% less noise than ``shared`` (equal at ρ = 1, where
sampling plays no role; measured in tests/test_mechanisms_clustering.py and docs/privacy.md), because each
release enjoys its own amplification by sampling — so it is the default. The events of a clustering come from
one factory, :func:`clustering_secret_events`, used by calibration (:func:`privtext.privacy.secret_noise` with
``compositions``/``release_sensitivity`` from :func:`clustering_plan`) and by the ledger alike.

T re-clusterings compose T clustering events (or one, when the clusters are released once and reused, which is
post-processing).

Voting (Alg 3)
--------------
Each noisy centre gives its noisy count ñ_k to its nearest candidate of the same label group. This uses only
released values: no privacy cost, no private data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError
from ..privacy.events import gaussian_event
from ..privacy.noise import add_gaussian
from ..privacy.relation import Contribution, NeighbouringRelation
from ..privacy.release import Release
from ..search import Backend, Metric, nearest
from .labels import allocate


@dataclass(frozen=True)
class PublicClusters:
    centres: np.ndarray  # float32 (K, d)
    sizes: np.ndarray  # int64 (K,) n_k ≥ 1
    group: np.ndarray  # int64 (K,) label group of each cluster

    def __len__(self) -> int:
        return len(self.sizes)


@dataclass(frozen=True)
class ClusterRelease:
    centres: np.ndarray  # float64 (K, d) ẽ_k
    counts: np.ndarray  # float64 (K,) ñ_k
    sampled: int  # how many private records the centres' Bernoulli(ρ) draw kept (private diagnostic, not released)
    noise_std_counts: float = 0.0  # σ
    noise_std_centres: np.ndarray | None = None  # (2R/n_k)·σ per cluster


def clip_rows(x: np.ndarray, radius: float) -> np.ndarray:
    """ê = e·min(1, R/‖e‖) (float32 in, float32 out; norms in float64)."""
    if radius <= 0:
        raise ConfigError(f"clip radius must be > 0, got {radius}")
    x = np.asarray(x, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x).astype(np.float64))
    scale = np.minimum(1.0, radius / np.maximum(norms, 1e-12))
    return x if (scale == 1.0).all() else x * scale.astype(np.float32)[:, None]


def _kmeans(x: np.ndarray, k: int, *, seed: int, iters: int, backend: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if k >= len(x):
        return x.copy()
    if backend == "faiss":
        import faiss

        km = faiss.Kmeans(x.shape[1], k, niter=iters, seed=seed % (2**31 - 1), verbose=False,
                          min_points_per_centroid=1, max_points_per_centroid=1 << 30)
        km.train(x)
        return np.asarray(km.centroids, dtype=np.float32)
    if backend == "sklearn":
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=k, n_init=1, max_iter=iters, random_state=seed % (2**31 - 1))
        km.fit(x)
        return km.cluster_centers_.astype(np.float32)
    raise ConfigError(f"kmeans backend must be 'faiss' or 'sklearn', got {backend!r}")


def public_kmeans(
    public_emb: np.ndarray,
    public_groups: np.ndarray,
    n_groups: int,
    k_total: int,
    *,
    seed: int,
    radius: float = 1.0,
    iters: int = 25,
    backend: str = "faiss",
    metric: Metric = "l2",
    sample_per_centre: int | None = None,
    assign_backend: Backend = "auto",
) -> PublicClusters:
    """K public centres split over label groups in proportion to their public counts (≥ 1 per non-empty group).

    Centres are the means of their assigned (clipped) public points after the final assignment, so e_k and n_k
    are exactly the statistics Eq 7 needs; empty clusters are dropped.

    Speed (public data, no privacy constraint): ``sample_per_centre`` fits the k-means on a seeded sample of at
    most that many points per centre (None: every point); ``assign_backend`` is the final assignment's search
    (:func:`~privtext.search.nearest`; an approximate one such as ``ivf-gemm`` changes which public
    points a centre averages, never the validity of Eq 7: e_k and n_k are computed from the assignment made).
    """
    if sample_per_centre is not None and sample_per_centre < 1:
        raise ConfigError(f"sample_per_centre must be ≥ 1, got {sample_per_centre}")
    pg = np.asarray(public_groups, dtype=np.int64)
    if len(pg) != len(public_emb):
        raise ConfigError(f"{len(pg)} public group ids for {len(public_emb)} public embeddings")
    if k_total < 1:
        raise ConfigError(f"secpe.clusters must be ≥ 1, got {k_total}")
    counts = np.bincount(pg[pg >= 0], minlength=n_groups)
    nonempty = counts > 0
    if not nonempty.any():
        raise ConfigError("no public records to cluster: SecPE needs secret-free or external public text")
    ks = np.zeros(n_groups, dtype=np.int64)
    ks[nonempty] = allocate(counts[nonempty].astype(float), max(k_total, int(nonempty.sum())), min_each=1)
    ks = np.minimum(ks, counts)
    x = clip_rows(public_emb, radius)
    centres, sizes, groups = [], [], []
    for g in np.nonzero(nonempty)[0]:
        xi = x[pg == g]
        fit = xi
        if sample_per_centre is not None and len(xi) > sample_per_centre * int(ks[g]):
            pick = np.random.default_rng(seed + int(g)).choice(len(xi), sample_per_centre * int(ks[g]), replace=False)
            fit = xi[np.sort(pick)]
        c = _kmeans(fit, int(ks[g]), seed=seed + int(g), iters=iters, backend=backend)
        assign = nearest(xi, c, metric=metric, backend=assign_backend)
        for j in range(len(c)):
            members = xi[assign == j]
            if len(members) == 0:
                continue
            centres.append(members.mean(axis=0))
            sizes.append(len(members))
            groups.append(int(g))
    return PublicClusters(np.asarray(centres, dtype=np.float32), np.asarray(sizes, dtype=np.int64),
                          np.asarray(groups, dtype=np.int64))


Sample = Literal["independent", "shared"]
SAMPLES = ("independent", "shared")


@dataclass(frozen=True)
class ClusteringPlan:
    """How a run of SecPE spends its compositions: ``clusterings`` releases of Eq 7, each of ``per_release``
    mixture compositions with shift Δ = ``release_sensitivity`` per sampled holder."""

    clusterings: int
    sample: str
    per_release: int
    release_sensitivity: float

    @property
    def compositions(self) -> int:
        return self.clusterings * self.per_release


def clustering_plan(clusterings: int, sample: str = "independent") -> ClusteringPlan:
    """``independent``: 2 compositions per clustering with Δ = 1; ``shared``: 1 with Δ = √2 (module docstring)."""
    if sample not in SAMPLES:
        raise ConfigError(f"secpe.sample must be one of {', '.join(SAMPLES)}; got {sample!r}")
    if clusterings < 1:
        raise ConfigError(f"SecPE needs at least one clustering, got {clusterings}")
    if sample == "independent":
        return ClusteringPlan(clusterings, sample, 2, 1.0)
    return ClusteringPlan(clusterings, sample, 1, math.sqrt(2.0))


def clustering_event(sigma: float, sample: str = "independent") -> Any:
    """The record-level description of one clustering for a secret holder sampled with certainty: the Gaussian
    parts of the release per unit shift (``independent``: two Gaussians with multiplier σ, composed; ``shared``:
    one with multiplier σ/√2). What :func:`secret_clustering` returns and the ledger records as ``Release.event``;
    the secret-protection accounting uses :func:`clustering_secret_events`."""
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ConfigError(f"σ must be a finite number ≥ 0, got {sigma}")
    plan = clustering_plan(1, sample)
    return gaussian_event(float(sigma) / plan.release_sensitivity, count=plan.per_release)


def clustering_release(key: str, *, sigma: float, sample: str, noise: Any, clusters: int, radius: float,
                       relation: NeighbouringRelation, iteration: int | None = None) -> Release:
    """The description of one clustering release (counts and centres: ONE release carrying every event it spends):
    the record-level event :func:`clustering_event`, the per-secret events :func:`clustering_secret_events`, noise
    std σ on the counts (the centres carry (2R/n_k)·σ), and the per-record Δ = 1 of the run's relation (each
    sampled holder adds 1 to one count and a clipped shift to one centre; the mixture events carry how many are
    sampled)."""
    # per unit of σ a sampled holder moves one count by 1 and one centre by ≤ 1 (its clipped shift scaled by the
    # centre noise's 2R/n_k): two releases of Δ = 1 (independent samples), or one of Δ = √2 (shared sample)
    plan = clustering_plan(1, sample)
    delta = relation.sensitivity(Contribution(plan.release_sensitivity, "l2", True,
                                              "one sampled holder: one count and one clipped centre shift"))
    return Release(
        key=key, mechanism="secret_clustering", event=clustering_event(sigma, sample), noise_std=float(sigma),
        sensitivity=delta, iteration=iteration,
        description=(f"noisy sizes ñ_k and centres ẽ_k of {clusters} clusters (Eq 7): counts N(0, σ²), centres "
                     f"(2R/n_k)·N(0, σ² I); Bernoulli(ρ) sample "
                     f"{'per release' if sample == 'independent' else 'shared by both (Δ = √2)'}"),
        secret_events=clustering_secret_events(noise, sigma, sample),
        meta={"clusters": clusters, "clip_radius": radius, "sample": sample, "relation": relation.to_dict()},
    )


def clustering_secret_events(noise: Any, sigma: float, sample: str = "independent") -> dict[str, Any]:
    """Per secret group: the :class:`~privtext.privacy.SecretEvent` of ONE clustering (counts and centres)."""
    plan = clustering_plan(1, sample)
    if getattr(noise, "release_sensitivity", plan.release_sensitivity) != plan.release_sensitivity:
        raise ConfigError(f"SecretNoise was calibrated for Δ={noise.release_sensitivity}, not for sample={sample!r}")
    return noise.secret_events(sigma, per_release=plan.per_release)


@dataclass(frozen=True)
class RecordAssignment:
    """Each private record's public cluster and clip factor, for every record ``searched``.

    A record's cluster is its nearest public centre of its own label group (−1 where its group has none, or where
    it was not searched), computed from the record and the public centres alone; ``scale`` is its clip factor
    min(1, R/‖e_i‖). Both are fixed for a run (the public clusters are), so a run searches once
    (:func:`assign_records`) and every clustering release reuses the result: each release then costs two
    Bernoulli draws, two bincounts and one sparse sum instead of a search of the private set. The values the
    release computes are the same as with a fresh search (tests/test_mechanisms_clustering.py checks them byte
    for byte); the assignment itself is private and never released."""

    owner: np.ndarray  # int64 (N,)
    scale: np.ndarray  # float32 (N,) min(1, R/‖e_i‖)
    searched: np.ndarray  # bool (N,)
    radius: float


def assign_records(
    private_emb: np.ndarray,
    private_groups: np.ndarray,
    clusters: PublicClusters,
    *,
    radius: float = 1.0,
    metric: Metric = "l2",
    backend: Backend = "auto",
    nprobe: int | None = None,
    search: np.ndarray | None = None,
    chunk: int = 1 << 18,
) -> RecordAssignment:
    """The nearest public centre of each clipped private record in ``search`` (default: every record), ``chunk``
    rows at a time (the clipped copy is O(chunk), never a second copy of the private set).

    ``backend``/``nprobe``: the search (:func:`~privtext.search.nearest`; default exact). An approximate
    one (``ivf-gemm``) still puts each record in exactly one cluster, which is all the sensitivity analysis
    assumes (module docstring): privacy is unchanged, utility changes with the agreement (benchmarks/scale.py)."""
    if radius <= 0:
        raise ConfigError(f"clip radius must be > 0, got {radius}")
    pg = np.asarray(private_groups, dtype=np.int64)
    if len(pg) != len(private_emb):
        raise ConfigError(f"{len(pg)} private group ids for {len(private_emb)} private embeddings")
    n = len(private_emb)
    search = np.ones(n, dtype=bool) if search is None else np.asarray(search, dtype=bool)
    owner = np.full(n, -1, dtype=np.int64)
    scale = np.ones(n, dtype=np.float32)
    groups = np.unique(clusters.group)
    kept = np.nonzero(search)[0]
    kw = {"nprobe": nprobe} if nprobe is not None else {}
    for s in range(0, len(kept), chunk):
        rows = kept[s:s + chunk]
        x = np.asarray(private_emb[rows], dtype=np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", x, x).astype(np.float64))
        sc = np.minimum(1.0, radius / np.maximum(norms, 1e-12)).astype(np.float32)
        scale[rows] = sc
        ehat = x if (sc == 1.0).all() else x * sc[:, None]  # clip_rows, from the norms already taken
        rg = pg[rows]
        for g in groups:
            ci = np.nonzero(clusters.group == g)[0]
            sel = np.nonzero(rg == g)[0]
            if len(sel):
                owner[rows[sel]] = ci[nearest(ehat[sel], clusters.centres[ci], metric=metric, backend=backend, **kw)]
    return RecordAssignment(owner=owner, scale=scale, searched=search.copy(), radius=float(radius))


def secret_clustering(
    private_emb: np.ndarray,
    private_groups: np.ndarray,
    clusters: PublicClusters,
    *,
    rho: np.ndarray,
    sigma: float,
    rng: np.random.Generator,
    radius: float = 1.0,
    metric: Metric = "l2",
    sample: str = "independent",
    backend: Backend = "auto",
    nprobe: int | None = None,
    assignment: RecordAssignment | None = None,
) -> tuple[ClusterRelease, Any]:
    """One release of Eq 7 (both ñ_k and ẽ_k). Returns ``(release, clustering_event(σ, sample))``.

    ``assignment``: the run's :func:`assign_records` (it must cover every record that can be sampled, ρ_i > 0,
    with this ``radius``); without it, the records kept by either sample are searched here, once for the union
    of both samples (a record's centre depends on the record alone, so both releases see the same assignment as
    two searches would), with ``backend``/``nprobe``.

    ``rng`` must be the release's privacy generator (:func:`privtext.rng.noise_rng`): it draws the Bernoulli(ρ)
    sample(s) as well as the noise, and the mixture analysis needs the sample to be as secret as the noise.
    The caller records the events before calling this."""
    rho = np.asarray(rho, dtype=np.float64)
    if len(rho) != len(private_emb):
        raise ConfigError(f"{len(rho)} sampling probabilities for {len(private_emb)} private records")
    if np.isnan(rho).any() or ((rho < 0) | (rho > 1)).any():
        bad = rho[np.isnan(rho) | (rho < 0) | (rho > 1)][0]
        raise ConfigError(f"sampling probabilities ρ must lie in [0, 1], got {bad}")
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ConfigError(f"σ must be a finite number ≥ 0, got {sigma}")
    if radius <= 0:
        raise ConfigError(f"clip radius must be > 0, got {radius}")
    if assignment is not None:
        if len(assignment.owner) != len(private_emb):
            raise ConfigError(f"a record assignment of {len(assignment.owner)} records for {len(private_emb)} "
                              "private records")
        if assignment.radius != radius:
            raise ConfigError(f"a record assignment clipped at radius {assignment.radius}, not {radius}")
        if not assignment.searched[rho > 0].all():
            raise ConfigError(f"the record assignment lacks {int((~assignment.searched[rho > 0]).sum())} records "
                              "that can be sampled (ρ > 0)")
    event = clustering_event(sigma, sample)
    K = clusters.centres.shape[0]
    keep_counts = rng.random(len(rho)) < rho
    keep_centres = keep_counts if sample == "shared" else rng.random(len(rho)) < rho
    n = clusters.sizes.astype(np.float64)
    if assignment is None:
        assignment = assign_records(private_emb, private_groups, clusters, radius=radius, metric=metric,
                                    backend=backend, nprobe=nprobe, search=keep_counts | keep_centres)
    owner = assignment.owner
    sums = _cluster_sums(private_emb, owner, assignment.scale, keep_centres, K)
    m = _counts(owner, keep_centres, K)
    m_counts = m if sample == "shared" else _counts(owner, keep_counts, K)
    centres = (clusters.centres.astype(np.float64) * n[:, None] + sums) / (n + m)[:, None]
    counts = n + m_counts
    centres = add_gaussian(centres, sigma, rng, factor=(2 * radius / n)[:, None])
    counts = add_gaussian(counts, sigma, rng)
    return ClusterRelease(centres=centres, counts=counts, sampled=int(keep_centres.sum()),
                          noise_std_counts=float(sigma), noise_std_centres=(2 * radius / n) * float(sigma)), event


def _cluster_sums(x: np.ndarray, owner: np.ndarray, scale: np.ndarray, add: np.ndarray, k: int,
                  chunk: int = 1 << 18) -> np.ndarray:
    """Σ_{i ∈ add, owner_i = k} scale_i·x_i per cluster (the clipped rows ê_i), float64: a sparse (K × N) product
    with x, ``chunk`` records at a time (float32 within a chunk, float64 across), reading the rows in place
    instead of copying the kept ones."""
    import scipy.sparse as sp

    rows = np.nonzero(add & (owner >= 0))[0]
    sums = np.zeros((k, x.shape[1]), dtype=np.float64)
    for s in range(0, len(rows), chunk):
        r = rows[s:s + chunk]
        onehot = sp.csr_matrix((scale[r], (owner[r], r)), shape=(k, len(x)))
        sums += np.asarray(onehot @ x, dtype=np.float64)
    return sums


def _counts(owner: np.ndarray, keep: np.ndarray, k: int) -> np.ndarray:
    """How many ``keep`` records each cluster got."""
    return np.bincount(owner[keep & (owner >= 0)], minlength=k).astype(np.int64)


def centre_votes(
    centres: np.ndarray,
    counts: np.ndarray,
    centre_groups: np.ndarray,
    candidate_emb: np.ndarray,
    candidate_groups: np.ndarray,
    *,
    metric: Metric = "l2",
) -> np.ndarray:
    """Alg 3 lines 8-11: each noisy centre adds its noisy count to its nearest candidate of the same group."""
    hist = np.zeros(len(candidate_emb), dtype=np.float64)
    cg = np.asarray(candidate_groups)
    for g in np.unique(centre_groups):
        ki = np.nonzero(centre_groups == g)[0]
        ci = np.nonzero(cg == g)[0]
        if len(ci) == 0:
            continue
        nn = ci[nearest(centres[ki].astype(np.float32), candidate_emb[ci], metric=metric)]
        np.add.at(hist, nn, counts[ki])
    return hist
