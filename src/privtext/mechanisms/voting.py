"""The DP nearest-neighbour vote histogram (Aug-PE's private step; SecPE §3.2, Alg 3 line 9-10 in its
non-clustered form).

Each private record casts one vote for its nearest candidate *of the same label*; the histogram of votes over
candidates is released with Gaussian noise N(0, σ²) on every bin, then optionally thresholded.

Sensitivity (add/remove one private record, record-level DP)
---------------------------------------------------------------
Let h(D) ∈ ℕ^{N_syn} be the vote histogram. Adding or removing one record x changes exactly one bin — the one
x votes for, inside x's own label group — by exactly 1, so ‖h(D) − h(D')‖₂ = 1: **L2 sensitivity Δ = 1**.
With noise N(0, σ²·I) the release is the Gaussian mechanism with noise multiplier σ/Δ = σ, i.e. μ = 1/σ-GDP
per iteration (Dong et al.; SecPE Def 2.2), and T iterations compose to μ = √T/σ (the Aug-PE calibration
σ = √T/μ). The event is dp_accounting's ``GaussianDpEvent(noise_multiplier=σ/Δ)``.

* Labels: a record's label decides which group it votes in; the group partition is a function of the record
  alone, so the sensitivity argument is unchanged (one record, one bin).
* Approximate neighbours (IVF/HNSW) change *which* bin a record votes for but never the number of votes a
  record casts, so Δ = 1 holds for every backend.
* Group-level protection: when a neighbouring relation removes a whole group of k records (e.g. every record
  holding one secret — SecPE's GDP baseline with secret-level sensitivity) the L2 sensitivity is k (all k
  records may vote for one candidate). Pass ``sensitivity=k``; the noise std is σ·k.
* Threshold H (Aug-PE/PE): ``max(h̃, H) − H`` = ``max(h̃ − H, 0)`` — post-processing, no privacy cost; it
  removes the noise floor so that sampling probabilities are non-negative.
* Centring (``center``, beyond Aug-PE): both sides are mapped by x ↦ (x − c)/‖x − c‖ with a *public* vector c
  (by default the mean of the candidates' embeddings) before the search. Nearest-neighbour votes in embedding
  space pile onto "hub" candidates — generic, long texts near the centre of the cloud (hubness, Radovanović et
  al. 2010; centring as its cure, Suzuki et al. 2013). The map is a fixed public function applied to every
  record, and each record still casts exactly one vote, so Δ = 1 is unchanged. Measured on Yelp (5000 private
  reviews, 3000 n-gram candidates, 500 selected by rank, σ = 1.87): FID to the private set 0.126 without
  centring, 0.093 with it (a random 500 of the candidates: 0.114); mean length of the selected reviews 144
  words without, 103 with (private: 104).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..privacy.events import gaussian_event
from ..privacy.noise import add_gaussian
from ..search import APPROX, Backend, Metric, center_rows, nearest, row_source

_log = logging.getLogger("privtext.embed")
_WARNED: set[str] = set()

#: computes exact vote counts: ``(private_emb, candidate_emb, *, private_groups, candidate_groups, metric, backend,
#: center, **nn_kwargs) -> (counts, n_voting)``, as :func:`nearest_votes`
VoteCounter = Callable[..., tuple[np.ndarray, int]]


@dataclass(frozen=True)
class VoteRelease:
    """The released (noisy) histogram and what it took."""

    noisy: np.ndarray  # float64, one bin per candidate, after thresholding when threshold > 0
    raw_noisy: np.ndarray  # float64, before thresholding (what the Gaussian mechanism output)
    noise_std: float
    threshold: float
    sensitivity: float
    n_private: int
    n_voting: int  # records whose label group had at least one candidate
    meta: dict[str, Any] = field(default_factory=dict)


def threshold_histogram(h: np.ndarray, threshold: float) -> np.ndarray:
    """``max(h, H) − H``: clip at H then subtract (post-processing)."""
    if threshold < 0:
        raise ConfigError(f"threshold must be ≥ 0, got {threshold}")
    return np.maximum(h, threshold) - threshold if threshold > 0 else h.copy()


def label_groups(private_groups: Sequence[int] | np.ndarray | None, n_private: int,
                 candidate_groups: Sequence[int] | np.ndarray | None, n_candidates: int,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The label-group ids of both sides (all 0 when None), checked against the row counts."""
    pg = np.zeros(n_private, dtype=np.int64) if private_groups is None else np.asarray(private_groups)
    cg = np.zeros(n_candidates, dtype=np.int64) if candidate_groups is None else np.asarray(candidate_groups)
    if len(pg) != n_private:
        raise ConfigError(f"{len(pg)} private group ids for {n_private} private embeddings")
    if len(cg) != n_candidates:
        raise ConfigError(f"{len(cg)} candidate group ids for {n_candidates} candidates")
    return pg, cg


def nearest_votes(
    private_emb: np.ndarray,
    candidate_emb: np.ndarray,
    *,
    private_groups: Sequence[int] | np.ndarray | None = None,
    candidate_groups: Sequence[int] | np.ndarray | None = None,
    metric: Metric = "l2",
    backend: Backend = "auto",
    center: np.ndarray | None = None,
    **nn_kwargs: Any,
) -> tuple[np.ndarray, int]:
    """Exact (noise-free) vote counts per candidate, voting within label groups. Returns (counts, n_voting).

    ``center``: a public vector; both sides are centred on it and renormalised before the search.

    Embeddings from a tiered embedder (``embedder: {runtime: auto}``: fast bf16 vectors that know their texts,
    :mod:`privtext.embed.tiers`) are voted on by :func:`_exact_nearest`: every vote whose margin is within
    the fast vectors' measured error bound is re-decided with fp32 vectors of that record and its contenders, so
    the votes are the fp32 vectors' votes. Each record's vote still depends on that record alone (Δ = 1)."""
    n_c = len(candidate_emb)
    pg, cg = label_groups(private_groups, len(private_emb), candidate_groups, n_c)
    if not len(private_emb) or not n_c:
        return np.zeros(n_c, dtype=np.int64), 0
    if _refinable(private_emb, candidate_emb, backend):
        return _votes_by_group(pg, cg, n_c, _exact_nearest(private_emb, candidate_emb, metric=metric, center=center))
    if center is not None:
        private_emb, candidate_emb = center_rows(private_emb, center), center_rows(candidate_emb, center)

    def nearest_of(qi: np.ndarray, ci: np.ndarray) -> np.ndarray:
        return nearest(private_emb[qi], candidate_emb[ci], metric=metric, backend=backend, **nn_kwargs)

    return _votes_by_group(pg, cg, n_c, nearest_of)


def _votes_by_group(pg: np.ndarray, cg: np.ndarray, n_candidates: int,
                    nearest_of: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, int]:
    """Each private record's one vote for its nearest candidate of its own label group: ``nearest_of(qi, ci)``
    gives, for the private rows ``qi`` of a group, the position in ``ci`` (that group's candidates) of each one's
    nearest. A group without candidates casts no vote (each record still adds to one bin at most). Returns
    (counts, n_voting)."""
    counts = np.zeros(n_candidates, dtype=np.int64)
    n_voting = 0
    for g in np.unique(pg):
        qi = np.nonzero(pg == g)[0]
        ci = np.nonzero(cg == g)[0]
        if len(ci) == 0:
            continue
        np.add.at(counts, ci[nearest_of(qi, ci)], 1)
        n_voting += len(qi)
    return counts, n_voting


def _refinable(private_emb: np.ndarray, candidate_emb: np.ndarray, backend: str) -> bool:
    """Both sides come from one tiered embedder and the search is exact (an approximate backend was asked for on
    purpose: its votes are approximate anyway). One side without a source cannot be re-decided: logged."""
    ps, cs = row_source(private_emb), row_source(candidate_emb)
    if ps is None and cs is None:
        return False
    if ps is None or cs is None or ps.embedder is not cs.embedder:
        side = "private" if ps is None else "candidate"
        if side not in _WARNED:  # once per process: a federated or sharded vote asks for every party and shard
            _WARNED.add(side)
            _log.warning("exact votes: %s embeddings carry no fast-tier source (sliced or copied, as a party's or "
                         "a shard's records are); votes use the vectors as given, not re-decided in fp32", side)
        return False
    if backend in APPROX:
        return False
    return True


def _exact_nearest(private_emb: np.ndarray, candidate_emb: np.ndarray, *, metric: Metric,
                   center: np.ndarray | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The per-group search of :func:`nearest_votes` for tiered embeddings (both sides non-empty): the nearest
    candidates of the reference (fp32) vectors, computed from the fast ones and the reference vectors of
    re-decided records and their contenders only (:mod:`privtext.search.exact_votes`: the bound, the stages, why
    Δ = 1 holds). The bound is calibrated on candidates (public) once per call."""
    from ..search.exact_votes import calibrated, refine_group

    ps, cs = row_source(private_emb), row_source(candidate_emb)
    assert ps is not None and cs is not None
    pf, cf = np.asarray(private_emb, dtype=np.float32), np.asarray(candidate_emb, dtype=np.float32)
    bounds, stats = calibrated(ps, cs, cf, center, metric)

    def nearest_of(qi: np.ndarray, ci: np.ndarray) -> np.ndarray:
        return refine_group(ps, qi, pf[qi], cs, ci, cf[ci], bounds, center, metric, stats)

    return nearest_of


def dp_vote_histogram(
    private_emb: np.ndarray,
    candidate_emb: np.ndarray,
    *,
    noise_multiplier: float,
    rng: np.random.Generator,
    private_groups: Sequence[int] | np.ndarray | None = None,
    candidate_groups: Sequence[int] | np.ndarray | None = None,
    sensitivity: float = 1.0,
    threshold: float = 0.0,
    metric: Metric = "l2",
    backend: Backend = "auto",
    center: np.ndarray | None = None,
    counter: VoteCounter | None = None,
    **nn_kwargs: Any,
) -> tuple[VoteRelease, Any]:
    """Release the DP nearest-neighbour vote histogram. Returns ``(release, gaussian_event(σ))``; record the
    event (through :class:`privtext.privacy.ReleaseKeeper`) before calling this.

    Noise: N(0, (σ·Δ)²) per bin with σ = ``noise_multiplier`` and Δ = ``sensitivity`` (see module docstring).
    ``counter`` computes the exact counts (default :func:`nearest_votes`); a distributed counter
    (:class:`privtext.mechanisms.distributed.RayVoteCounter`) sums per-shard counts, which equal the
    single-process counts exactly because every record's vote depends on that record alone — the noise is then
    added here, once, centrally, so the release and its sensitivity are unchanged.
    """
    if noise_multiplier < 0 or not np.isfinite(noise_multiplier):
        raise ConfigError(f"noise_multiplier must be a finite number ≥ 0, got {noise_multiplier}")
    if sensitivity <= 0:
        raise ConfigError(f"sensitivity must be > 0, got {sensitivity}")
    event = gaussian_event(noise_multiplier)
    counts, n_voting = (counter or nearest_votes)(
        private_emb, candidate_emb, private_groups=private_groups, candidate_groups=candidate_groups,
        metric=metric, backend=backend, center=center, **nn_kwargs,
    )
    std = float(noise_multiplier) * float(sensitivity)
    raw = add_gaussian(counts, std, rng)
    release = VoteRelease(
        noisy=threshold_histogram(raw, threshold),
        raw_noisy=raw,
        noise_std=std,
        threshold=float(threshold),
        sensitivity=float(sensitivity),
        n_private=len(private_emb),
        n_voting=n_voting,
    )
    return release, event
