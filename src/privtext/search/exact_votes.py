"""Exact nearest-neighbour votes from fast (bf16) embeddings: re-decide, with reference (fp32) vectors of just the
records and candidates involved, every vote whose margin is within the fast vectors' error bound.

Used by :func:`privtext.mechanisms.voting.nearest_votes` when its embeddings come from a
:class:`~privtext.embed.tiers.TieredEmbedder` (``embedder: {runtime: auto}`` on a bf16 CPU): each row then knows
its text and can be fetched at any slower tier, the last being the reference. The votes equal those of the
reference vectors — what :func:`~privtext.search.nearest` returns on them, float64 decisions, ties to the
lowest index — whenever the error bounds below hold.

The bound
---------
In the vote's space (after the public centring and normalisation the vote applies, :func:`vote_space`) let s(q, c)
be the score the vote maximises (q·c for cosine, q·c − ‖c‖²/2 for l2: the same order as −‖q − c‖²). For a record
p whose fast vectors elect w, a candidate j can beat w under the reference vectors only if

    s_fast(p, w) − s_fast(p, j) ≤ E,     E ≥ |(s_fast(p, w) − s_fast(p, j)) − (s_ref(p, w) − s_ref(p, j))|,

so every candidate within E of the fast maximum is a *contender*, and a record with one contender is decided. E is
a bound on the error of a score *difference* (a record's own error, and an error shared by every candidate, cancel
in it). A norm bound on the vectors' errors does not give a usable E: bf16 moves MiniLM vectors by ‖e‖ ≈ 5.5e-3,
and Cauchy–Schwarz would allow a difference error of 2·(‖e_p‖ + 2‖e_c‖) ≈ 0.03 — a window holding most records'
runner-up. The measured difference errors are ten times smaller (their maximum over every record and candidate
of 1200 PubMed abstracts: 3.7e-3; 2000 Yelp reviews: 4.0e-3; benchmarks/embed_exact.py), because the errors are
not aligned with the differences they are projected on. So E is **measured**, per vote, on public data:

* :func:`calibrate` takes ``CALIBRATION_ROWS`` candidates (evenly spaced: a public choice; later votes add
  ``CALIBRATION_PER_VOTE`` new ones and keep the earlier; 16 and 4 when the fast tier differs from the reference
  by float rounding only, where E is :data:`FLOOR` whatever the sample), fetches each at every tier, and for each
  pair of tiers (u for the query, t for the candidates) takes the largest difference error over every (query,
  candidate, candidate) triple of them, with the reference as truth;
* E(u, t) = ``SAFETY`` × that maximum + ``FLOOR``. With 64 calibration rows the maximum found was 88 % / 91 % of
  the maximum over all of PubMed's / Yelp's rows (the full sets above), so ``SAFETY = 2`` leaves a margin of about
  1.8 over every error seen; ``tests/test_exact_votes.py`` checks on the real data that every difference error of
  every record lies below the calibrated E, and that the votes equal the reference votes on every record.

E is a measured bound, not a proof: a record whose difference error exceeds E could keep its fast vote where the
reference vote differs. What the bound's failure can never change is privacy (below). Each vote's re-decisions are
compared with the bound they relied on, and the largest ratio of an observed difference error to E is recorded
(``exact_max_error_ratio`` in the run's private metrics; above 1 a warning is logged).

The stages, per label group
---------------------------
A. fast records × fast candidates (one fp32 matrix product, fp32 rounding added to the window): the winner, and
   the records with more than one contender within E(0, 0).
B. those records' reference vectors (from the private cache after the first time) × fast candidates: contenders
   within E(ref, 0).
C. for each intermediate tier t: the remaining records' contenders at tier t; contenders within E(ref, t).
D. the last contenders at the reference tier: decided in float64 like :func:`~privtext.search.brute_force_nn`
   (ties to the lowest index).

Privacy (record-level, add/remove one private record)
-----------------------------------------------------
A record's vote is computed from its own vectors (fast and reference: functions of its own text; the reference
canonical, one text per pass), the candidates' vectors (public: generated text) and E (computed from candidates
only). No other private record enters it — not even through the bound, which is why E is calibrated on public
rows and never on the records' observed errors. So each record still casts exactly one vote that depends on that
record alone, and the histogram's sensitivity is Δ = 1 (:mod:`privtext.mechanisms.voting`) whatever the bound's
quality; the re-decision only decides *which* candidate it votes for.

What is not exact: the public centre ``center`` (the mean of the candidates' *fast* vectors when
``voting.center: candidates``) is used as given: the vote is exact around it, but the all-fp32 path centres on the
mean of fp32 vectors, 2.3e-3 to 2.5e-3 away (measured), which can move a vote whose reference margin is smaller
than that shift's effect (no vote of 1000 Yelp reviews or 600 PubMed abstracts moved). Top-Q votes (WASP), SecPE's
record → centre assignment and released centres, and DP-KPS's kernel density use the fast vectors' values
directly and are not re-decided here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .decide import _U32
from .reference import Metric, _decide64_pairs, _prep, center_rows

log = logging.getLogger("privtext.embed")

SAFETY = 2.0
FLOOR = 1e-5  # absorbs the float32 rounding of vectors and of the vote-space map (≈ 1e-7) with room to spare
CALIBRATION_FIRST = 16  # calibration texts at an embedder's first vote, ...
CALIBRATION_ROWS = 64  # ... extended to this many unless the window is governed by FLOOR
FLOOR_MARGIN = 4  # floor-governed: SAFETY × the calibrated maximum, times this, is still ≤ FLOOR
CALIBRATION_PER_VOTE = 16  # new ones at every later vote (the earlier ones are kept)
CALIBRATION_POOL = 256  # the most kept
MIN_CALIBRATION = 8  # fewer calibration rows than this: no bound is trusted, every vote is decided at the reference
_BLOCK = 1 << 24


class VectorSource(Protocol):
    """Where the rows of an embeddings array came from, so a vote can fetch any row at a slower, more exact tier
    (:class:`privtext.embed.tiers.RowSource` is the implementation; search/ imports no embedder, so it is named
    here by what it does). ``embedder`` has ``tier_vectors(texts, tier)`` and may have ``counters`` and
    ``calibration``."""

    embedder: Any
    texts: tuple[str, ...]

    @property
    def n_tiers(self) -> int: ...

    def vectors(self, rows: np.ndarray | Sequence[int], tier: int) -> np.ndarray: ...


def row_source(x: Any) -> VectorSource | None:
    """The source an embeddings array carries (an ndarray subclass with a ``source`` attribute: the arrays a
    tiered embedder returns, :class:`privtext.embed.tiers.TieredVectors`), else None. A plain ndarray has none;
    arrays derived from a tiered one (slices, means, copies) have ``source = None``."""
    if not isinstance(x, np.ndarray) or type(x) is np.ndarray:
        return None
    return getattr(x, "source", None)


def vote_space(x: np.ndarray, center: np.ndarray | None, metric: Metric) -> np.ndarray:
    """The rows as the vote compares them: centred on ``center`` and renormalised (:func:`~.reference.center_rows`),
    then prepared as :func:`~privtext.search.nearest` prepares them (float32; unit rows for cosine)."""
    x = np.asarray(x, dtype=np.float32)
    if center is not None:
        x = center_rows(x, center)
    return _prep(x, metric, "embeddings")


def _scores64(q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """The score to maximise, float64: q·b (cosine) or q·b − ‖b‖²/2 (l2; −‖q − b‖²/2 plus a per-row constant)."""
    q64, b64 = q.astype(np.float64), b.astype(np.float64)
    s = q64 @ b64.T
    if metric == "l2":
        s -= 0.5 * np.einsum("ij,ij->i", b64, b64)[None, :]
    return s


@dataclass(frozen=True)
class Bounds:
    """E(u, t) for a query at tier u against candidates at tier t (``window[u, t]``); ``raw`` the calibrated
    maxima before the safety factor. ``rows``: how many calibration rows; 0 means none was trusted (E = ∞)."""

    window: np.ndarray
    raw: np.ndarray
    rows: int


def calibrate(source: Any, fast: np.ndarray, center: np.ndarray | None, metric: Metric, *,
              rows: int = CALIBRATION_ROWS, per_vote: int = CALIBRATION_PER_VOTE, pool: int = CALIBRATION_POOL,
              safety: float | None = None) -> Bounds:
    """E for every pair of tiers: the largest difference error over all (query, a, b) triples of the calibration
    texts (a, b ≠ query), times ``safety`` (default :data:`SAFETY`), plus :data:`FLOOR`.

    The calibration texts are candidates, chosen by a public rule: at an embedder's first vote
    :data:`CALIBRATION_FIRST` evenly spaced ones, extended to ``rows`` unless the window they give is governed by
    :data:`FLOOR` with a margin of :data:`FLOOR_MARGIN` (a fast tier that differs from the reference by float
    rounding: more texts could not move E); at every later vote ``per_vote`` more (a quarter of that when
    floor-governed), evenly spaced among the candidates not calibrated yet, and the earlier ones kept (their
    vectors are known already; the newest ``pool`` at most). ``source``'s rows have the fast vectors ``fast``. No
    private row is read."""
    safety = SAFETY if safety is None else safety
    emb = source.embedder
    known: dict[str, np.ndarray] = getattr(emb, "calibration", None) or {}
    floor_governed = bool(getattr(emb, "calibration_floor_governed", False))
    fresh = [i for i, t in enumerate(source.texts) if t not in known]

    def add(k: int) -> None:
        left = [i for i in fresh if source.texts[i] not in known]
        for j in np.unique(np.linspace(0, len(left) - 1, min(k, len(left))).round().astype(np.int64)) if left else []:
            known[source.texts[left[j]]] = np.asarray(fast[left[j]], dtype=np.float32)

    add(CALIBRATION_FIRST if not known else (max(1, per_vote // 4) if floor_governed else per_vote))
    bounds = _bounds(emb, known, source.n_tiers, center, metric, safety)
    floor_governed = bounds.rows > 0 and _floor_governed(bounds, safety)
    if not floor_governed and len(known) < rows:
        add(rows - len(known))
        bounds = _bounds(emb, known, source.n_tiers, center, metric, safety)
        floor_governed = bounds.rows > 0 and _floor_governed(bounds, safety)
    for t in list(known)[: max(0, len(known) - pool)]:
        del known[t]
    if hasattr(emb, "calibration"):
        emb.calibration = known
        emb.calibration_floor_governed = floor_governed
    return bounds


def _floor_governed(bounds: Bounds, safety: float) -> bool:
    n = len(bounds.raw)
    approx = np.ones((n, n), dtype=bool)
    approx[-1, -1] = False
    return bool((safety * FLOOR_MARGIN * bounds.raw[approx] <= FLOOR).all())


def _bounds(emb: Any, known: dict[str, np.ndarray], n_tiers: int, center: np.ndarray | None, metric: Metric,
            safety: float) -> Bounds:
    texts = list(known)
    if len(texts) < MIN_CALIBRATION:
        inf = np.full((n_tiers, n_tiers), np.inf)
        inf[-1, -1] = 0.0
        return Bounds(inf, inf.copy(), 0)
    vs = [vote_space(np.stack([known[t] for t in texts]), center, metric)]
    vs += [vote_space(emb.tier_vectors(texts, t), center, metric) for t in range(1, n_tiers)]
    truth = _scores64(vs[-1], vs[-1], metric)
    raw = np.zeros((n_tiers, n_tiers))
    off = ~np.eye(len(texts), dtype=bool)
    for u in range(n_tiers):
        for t in range(n_tiers):
            if u == t == n_tiers - 1:
                continue
            d = _scores64(vs[u], vs[t], metric) - truth
            hi = np.where(off, d, -np.inf).max(1)
            lo = np.where(off, d, np.inf).min(1)
            raw[u, t] = float((hi - lo).max())
    window = safety * raw + FLOOR
    window[-1, -1] = 0.0
    return Bounds(window, raw, len(texts))


def calibrated(psrc: Any, csrc: Any, cfast: np.ndarray, center: np.ndarray | None, metric: Metric,
               ) -> tuple[Bounds, Any]:
    """:func:`calibrate` on the candidates, recorded on the embedder's counters (returned too)."""
    bounds = calibrate(csrc, cfast, center, metric)
    stats = getattr(psrc.embedder, "counters", None)
    if stats is not None:
        stats.add("exact_votes", 1)
        stats.add("exact_calibration_rows", bounds.rows)
        stats.high("exact_window", float(bounds.window[0, 0]))
    return bounds, stats


def _fp32_tol(q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """Twice a rigorous bound on the float32 rounding of each row's scores (γ_D·‖q‖·max‖b‖, Higham Thm 3.5, plus
    the l2 column), so the fp32 window holds every candidate the exact scores would."""
    d = q.shape[1] + 2
    nb = float(np.sqrt(np.einsum("ij,ij->i", b, b).max())) if len(b) else 0.0
    nq = np.sqrt(np.einsum("ij,ij->i", q, q).astype(np.float64))
    return 2.02 * d * _U32 * (nq * nb + (nb * nb if metric == "l2" else 0.0)) + 1e-12


def _window(q: np.ndarray, b: np.ndarray, width: float, metric: Metric,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """fp32 scores of every row of ``q`` against all of ``b``: each row's argmax, and for the rows with more than
    one score within ``width`` (plus fp32 rounding) of their maximum, those (row, column) pairs.
    Returns (winners, ambiguous rows, pair rows, pair cols)."""
    n, nb = len(q), len(b)
    win = np.empty(n, dtype=np.int64)
    bt = np.ascontiguousarray(b.T)
    half = 0.5 * np.einsum("ij,ij->i", b, b) if metric == "l2" else None
    tol = _fp32_tol(q, b, metric)
    amb: list[np.ndarray] = []
    pr: list[np.ndarray] = []
    pc: list[np.ndarray] = []
    step = max(1, _BLOCK // max(nb, 1))
    for s in range(0, n, step):
        e = min(n, s + step)
        sc = q[s:e] @ bt
        if half is not None:
            sc -= half[None, :]
        w = sc.argmax(1)
        win[s:e] = w
        lo = sc[np.arange(e - s), w].astype(np.float64) - width - tol[s:e]
        mask = sc >= lo[:, None]
        many = np.nonzero(mask.sum(1) > 1)[0]
        if len(many):
            r, c = np.nonzero(mask[many])
            amb.append(many + s)
            pr.append(many[r] + s)
            pc.append(c)
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64))  # noqa: E731
    return win, cat(amb), cat(pr), cat(pc)


def _within(rows: np.ndarray, cols: np.ndarray, s: np.ndarray, width: np.ndarray | float,
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of (row, col) pairs with float64 scores ``s``: per row the best (ties to the lowest col), and the pairs
    within ``width`` of their row's best. Returns (per-pair keep mask, row of each best, col of each best)."""
    order = np.lexsort((cols, -s, rows))
    r, c, v = rows[order], cols[order], s[order]
    first = np.ones(len(r), dtype=bool)
    first[1:] = r[1:] != r[:-1]
    starts = np.nonzero(first)[0]
    best_of = np.repeat(v[starts], np.diff(np.append(starts, len(r))))
    keep_sorted = v >= best_of - width
    keep = np.empty(len(r), dtype=bool)
    keep[order] = keep_sorted
    return keep, r[starts], c[starts]


def refine_group(psrc: Any, prow: np.ndarray, pfast: np.ndarray, csrc: Any, crow: np.ndarray,
                 cfast: np.ndarray, bounds: Bounds, center: np.ndarray | None, metric: Metric,
                 stats: Any = None) -> np.ndarray:
    """The reference vote (index into ``crow``) of each record of one label group.

    ``prow``/``crow``: the rows of the private and candidate sources in this group; ``pfast``/``cfast``: their
    fast vectors. ``stats``: a :class:`~privtext.embed.tiers.TierCounters` (what was re-decided)."""
    ref = psrc.n_tiers - 1
    W = bounds.window
    p0 = vote_space(pfast, center, metric)
    c0 = vote_space(cfast, center, metric)
    add = stats.add if stats is not None else (lambda k, v: None)
    if len(c0) == 1:
        return np.zeros(len(p0), dtype=np.int64)
    # A: fast × fast
    win, amb, _, _ = _window(p0, c0, float(W[0, 0]), metric)
    add("exact_records", len(p0))
    add("exact_stage_a_ambiguous", len(amb))
    if not len(amb):
        return win
    # B: the ambiguous records' reference vectors × fast candidates
    pref = vote_space(psrc.vectors(prow[amb], ref), center, metric)
    wb, amb_b, pr, pc = _window(pref, c0, float(W[ref, 0]), metric)
    win[amb] = wb
    add("exact_stage_b_ambiguous", len(amb_b))
    if not len(amb_b):
        return win
    local = np.full(len(p0), -1, dtype=np.int64)  # record -> row of pref
    local[amb] = np.arange(len(amb))
    rec, cols = amb[pr], pc  # contender pairs: (record, candidate)
    # C: intermediate tiers on the contenders only; D: the reference
    for t in range(1, ref + 1):
        uc, inv = np.unique(cols, return_inverse=True)
        ct = vote_space(csrc.vectors(crow[uc], t), center, metric)
        if t == ref:  # D: float64, ties to the lowest index (as reference.brute_force_nn)
            urec, rinv = np.unique(rec, return_inverse=True)
            best = _decide64_pairs(pref[local[urec]], ct, rinv, inv, metric, len(urec))
            win[urec] = uc[best]
            add("exact_stage_reference", len(urec))
            _observe(stats, _pair_scores(p0[rec], c0[cols], metric), _pair_scores(pref[local[rec]], ct[inv], metric),
                     rec, float(W[0, 0]))
            return win
        s = _pair_scores(pref[local[rec]], ct[inv], metric)
        keep, rows_best, cols_best = _within(rec, cols, s, float(W[ref, t]))
        win[rows_best] = cols_best
        still = np.nonzero(np.bincount(rec[keep], minlength=len(p0)) > 1)[0]
        add(f"exact_stage_tier{t}_ambiguous", len(still))
        sel = keep & np.isin(rec, still)
        rec, cols = rec[sel], cols[sel]
        if not len(rec):
            return win
    return win  # pragma: no cover - the loop returns at the reference tier


def exact_nearest(private_emb: np.ndarray, candidate_emb: np.ndarray, *, metric: Metric = "l2",
                  center: np.ndarray | None = None) -> np.ndarray:
    """Each record's reference vote (an index into the candidates), no label groups: what
    :func:`~privtext.search.nearest` returns on the reference vectors (centred on ``center``). Both arrays
    must come from one :class:`~privtext.embed.tiers.TieredEmbedder`."""
    ps, cs = row_source(private_emb), row_source(candidate_emb)
    if ps is None or cs is None:
        from ..errors import ConfigError

        raise ConfigError("exact_nearest needs the arrays a TieredEmbedder returned (with their source)")
    pf, cf = np.asarray(private_emb, dtype=np.float32), np.asarray(candidate_emb, dtype=np.float32)
    if not len(cf):
        return np.full(len(pf), -1, dtype=np.int64)
    bounds, stats = calibrated(ps, cs, cf, center, metric)
    return refine_group(ps, np.arange(len(pf)), pf, cs, np.arange(len(cf)), cf, bounds, center, metric, stats)


def _pair_scores(q: np.ndarray, b: np.ndarray, metric: Metric) -> np.ndarray:
    """float64 scores of row pairs (q[i], b[i]), as :func:`_scores64`."""
    q64, b64 = q.astype(np.float64), b.astype(np.float64)
    s = np.einsum("ij,ij->i", q64, b64)
    if metric == "l2":
        s -= 0.5 * np.einsum("ij,ij->i", b64, b64)
    return s


def _observe(stats: Any, fast: np.ndarray, exact: np.ndarray, rec: np.ndarray, bound: float) -> None:
    """After the fact, on records re-decided anyway: the difference errors of their contenders' fast scores
    against the bound E(0, 0) the fast stage relied on. Recorded (the largest ratio) and warned about above 1,
    never fed back into any decision: E stays a function of public rows."""
    if stats is None or not len(rec) or not np.isfinite(bound) or bound <= 0:
        return
    d = fast - exact
    order = np.argsort(rec, kind="stable")
    rs, ds = rec[order], d[order]
    starts = np.nonzero(np.r_[True, rs[1:] != rs[:-1]])[0]
    spread = np.maximum.reduceat(ds, starts) - np.minimum.reduceat(ds, starts)
    ratio = float(spread.max() / bound)
    stats.high("exact_max_error_ratio", ratio)
    if ratio > 1:
        stats.add("exact_bound_exceeded", int((spread > bound).sum()))
        log.warning("exact votes: a re-decided record's fast scores erred by %.2f× the calibrated bound E = %.2e; "
                    "records decided by their fast vectors alone may not match the fp32 votes", ratio, bound)


__all__ = ["CALIBRATION_ROWS", "FLOOR", "SAFETY", "Bounds", "VectorSource", "calibrate", "exact_nearest", "refine_group",
           "row_source", "vote_space"]
