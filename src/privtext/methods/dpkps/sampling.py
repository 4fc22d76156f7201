"""DP-KPS's keyphrase sequences from its released sketches (dpkps.txt §2 (i)-(ii)): scores, the clipped and
thresholded sampling weights, the contrast with the all-class estimate, and the draws — post-processing of
released values only (the releases themselves are :mod:`privtext.mechanisms.kde`). See that module's docstring,
"Scores and sampling" and "Sequences and ensembles", for the derivations."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, DataError, InvalidPrivacyParameter
from ...mechanisms.kde import SQRT2, BlockProjections, KDESketch, SequenceMode, TermHistogram, _check_pos_int


def sketch_for_step(step: int, blocks: Sequence[int]) -> int:
    """Index of the sketch that scores step ``step`` (1-based): the smallest m ≥ step."""
    for k, m in enumerate(blocks):
        if m >= step:
            return k
    raise ConfigError(f"no sketch covers step {step} (blocks {tuple(blocks)})")


class TermScorer:
    """Scores of prefix ⊕ v for every term v of Ṽ under one sketch (see 'Speed' in the module docstring)."""

    def __init__(self, sketch: KDESketch, projections: BlockProjections):
        if projections.features is not sketch.features or projections.blocks != sketch.blocks:
            raise ConfigError("projections were built for other features than the sketch's")
        self.sketch, self.proj = sketch, projections

    def scores(self, class_index: int | None, prefixes: np.ndarray) -> np.ndarray:
        """(N, |Ṽ|): K̃_c(pad(prefix_n ⊕ v)) for every prefix row (i − 1 term ids) and term v; ``class_index=None``
        scores the sum of all class rows (the all-class estimate Σ_c K̃_c, scores being linear in the sketch)."""
        prefixes = np.asarray(prefixes, dtype=np.int64)
        if prefixes.ndim != 2:
            raise DataError(f"prefixes must be a 2-d array of term ids, got shape {prefixes.shape}")
        j = prefixes.shape[1]
        if j >= self.sketch.blocks:
            raise ConfigError(f"a prefix of {j} terms leaves no block for the next term in a {self.sketch.blocks}-"
                              "block sketch")
        s = self.sketch.noisy.sum(axis=0) if class_index is None else self.sketch.noisy[class_index]
        uniq, inverse = np.unique(prefixes, axis=0, return_inverse=True)  # rows sharing a prefix: one score row
        c = self.proj.window_projection(uniq) + self.sketch.features.offsets
        cos_p, sin_p = self.proj.trig(j)
        a = np.cos(c) * s
        b = np.sin(c) * s
        out = SQRT2 * (a @ cos_p.T - b @ sin_p.T) / self.sketch.features.n_features
        return out[np.asarray(inverse).reshape(-1)]


def score_noise_std(sketch: KDESketch) -> float:
    """The standard deviation of the Laplace noise in a score K̃_c(q): (1/I)·Σ_t Λ_t z_t(q) has variance
    (2b²/I²)·Σ_t z_t(q)², and Σ_t z_t(q)² ≈ I (E z_t² = 1, the mean of I bounded terms), so σ ≈ √2·b/√I.
    Public: it depends on b and I only."""
    return SQRT2 * sketch.scale / math.sqrt(sketch.features.n_features)


def sampling_weights(scores: np.ndarray, *, floor: float = 0.0) -> np.ndarray:
    """max(score − floor, 0): the unnormalised sampling distribution (post-processing; rows of zeros mean
    uniform). ``floor`` = κ·:func:`score_noise_std` drops terms whose score does not rise κ noise deviations
    above 0 (the noise floor; Aug-PE's threshold H plays the same role for vote histograms)."""
    return np.maximum(np.asarray(scores, dtype=np.float64) - floor, 0.0)


def contrast_weights(weights: np.ndarray, background: np.ndarray, contrast: float) -> np.ndarray:
    """w_c(v)·lift(v)^α with lift = (p_c(v) + s)/(p_all(v) + s): ``weights`` (rows: one class's clipped scores
    max(K̃_c − κσ, 0)), ``background`` (the same for the all-class scores Σ_c K̃_c), p = each row normalised to
    sum 1 (a zero row: uniform), s = 1/|Ṽ| (smoothing: a term the background misses is not boosted without
    bound). α = ``contrast`` ≥ 0; α = 0 returns ``weights``. Terms every class uses (lift ≈ 1 for the class that
    dominates the corpus, < 1 for the others) lose probability to terms over-represented in the class. Both
    inputs are released values: post-processing."""
    w = np.asarray(weights, dtype=np.float64)
    if contrast == 0:
        return w
    b = np.broadcast_to(np.asarray(background, dtype=np.float64), w.shape)
    n = w.shape[-1]

    def norm(x: np.ndarray) -> np.ndarray:
        t = x.sum(axis=-1, keepdims=True)
        return np.where(t > 0, x / np.where(t > 0, t, 1.0), 1.0 / n)

    s = 1.0 / n
    return w * ((norm(w) + s) / (norm(b) + s)) ** contrast


def draw_rows(weights: np.ndarray, rng: np.random.Generator, *, allowed: np.ndarray | None = None) -> np.ndarray:
    """One index per row, ∝ the row's weights restricted to ``allowed``; uniform over ``allowed`` when the row's
    allowed weights sum to 0."""
    w = np.array(weights, dtype=np.float64, copy=True)
    if w.ndim != 2:
        raise DataError(f"weights must be 2-d, got shape {w.shape}")
    if allowed is not None:
        w = np.where(allowed, w, 0.0)
    tot = w.sum(axis=1)
    empty = tot <= 0
    if empty.any():
        w[empty] = 1.0 if allowed is None else allowed[empty].astype(np.float64)
        tot = w.sum(axis=1)
    if (tot <= 0).any():
        raise ConfigError("no term left to draw (every term is excluded); allow repeats or use a larger vocabulary")
    cdf = np.cumsum(w, axis=1)
    u = rng.random(len(w)) * cdf[:, -1]
    return np.argmax(cdf > u[:, None], axis=1)


def sample_sequences(
    sketches: Sequence[KDESketch],
    projections: Sequence[BlockProjections],
    *,
    counts: Sequence[int],
    length: int,
    sequence: SequenceMode,
    rng: np.random.Generator,
    allow_repeats: bool = False,
    threshold: float = 0.0,
    contrast: float = 0.0,
) -> list[np.ndarray]:
    """Draw ``counts[c]`` term-id sequences of ``length`` per class from the released sketches (post-processing).

    ``sketches``/``projections`` are those of :func:`ensemble_blocks` (one per block count, same order).
    Independent: L draws from one distribution; iterative: step i draws from the scores of prefix ⊕ v under the
    sketch :func:`sketch_for_step` picks. Without repeats a drawn term is excluded from later steps of its row.
    ``threshold`` κ ≥ 0 subtracts κ·:func:`score_noise_std` from every score before clipping at 0 (κ = 0: the
    paper's distribution, clipped). ``contrast`` α ≥ 0 multiplies a class's weights by its lift over the
    all-class estimate to the power α (:func:`contrast_weights`; the all-class threshold is κ·σ·√C, the noise
    deviation of a sum of C independent rows). Returns one (counts[c], length) int64 array per class."""
    length = _check_sampling(length, threshold, contrast)
    if len(sketches) != len(projections) or not sketches:
        raise ConfigError(f"{len(sketches)} sketches for {len(projections)} projection sets")
    n_classes = sketches[0].n_classes
    if len(counts) != n_classes:
        raise ConfigError(f"{len(counts)} sequence counts for {n_classes} classes")
    blocks = [s.blocks for s in sketches]
    n_terms = projections[0].n_terms
    if not allow_repeats and n_terms < length:
        raise ConfigError(f"sequences of {length} distinct terms need at least {length} terms, Ṽ has {n_terms}")
    if sequence not in ("independent", "iterative"):
        raise ConfigError(f"sequence must be 'independent' or 'iterative', got {sequence!r}")
    if sequence == "independent" and blocks[0] != 1:
        raise ConfigError("independent sequences need a single-block sketch")
    if sequence == "iterative" and max(blocks) < length:
        raise InvalidPrivacyParameter(f"the sketches cover {max(blocks)} steps, the sequences have {length}")
    scorers = [TermScorer(s, p) for s, p in zip(sketches, projections, strict=True)]
    out = [np.zeros((int(n), length), dtype=np.int64) for n in counts]
    floors = [threshold * score_noise_std(s) for s in sketches]
    for i in range(1, length + 1):
        k = 0 if sequence == "independent" else sketch_for_step(i, blocks)
        for c in range(n_classes):
            seq = out[c]
            n = len(seq)
            if n == 0:
                continue
            prefix = np.zeros((1, 0), dtype=np.int64) if sequence == "independent" else seq[:, : i - 1]
            scorer = scorers[k]
            w = _class_weights(scorer.scores(c, prefix), lambda s=scorer, p=prefix: s.scores(None, p),
                               floor=floors[k], n_classes=n_classes, contrast=contrast)
            _draw_step(seq, i - 1, np.broadcast_to(w, (n, n_terms)), rng, allow_repeats=allow_repeats)
    return out


def _check_sampling(length: Any, threshold: Any, contrast: Any) -> int:
    """The sampling options of both samplers, checked: L ≥ 1, κ ≥ 0 and α ≥ 0 finite."""
    for name, v, what in (("threshold", threshold, "in noise standard deviations"),
                          ("contrast", contrast, "the lift exponent")):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise ConfigError(f"{name} must be a finite number ≥ 0 ({what}), got {v!r}")
    return _check_pos_int("length", length)


def _class_weights(class_scores: np.ndarray, all_scores: Callable[[], np.ndarray], *, floor: float,
                   n_classes: int, contrast: float) -> np.ndarray:
    """A class's sampling weights max(score − κσ, 0), times its lift over the all-class estimate to the power α
    (:func:`contrast_weights`; the all-class threshold κ·σ·√C is the noise deviation of a sum of C independent
    rows). ``all_scores`` is only called when α > 0."""
    w = sampling_weights(class_scores, floor=floor)
    if not contrast:
        return w
    return contrast_weights(w, sampling_weights(all_scores(), floor=floor * math.sqrt(n_classes)), contrast)


def _draw_step(seq: np.ndarray, i: int, weights: np.ndarray, rng: np.random.Generator, *,
               allow_repeats: bool) -> None:
    """Column i of ``seq``: one draw per row ∝ ``weights`` (rows × |Ṽ|), without repeats excluding the row's
    earlier terms."""
    allowed = None
    if not allow_repeats and i > 0:
        allowed = np.ones(weights.shape, dtype=bool)
        np.put_along_axis(allowed, seq[:, :i], False, axis=1)
    seq[:, i] = draw_rows(weights, rng, allowed=allowed)


# --------------------------------------------------------------------------------- the discrete-kernel sketch


def sample_histogram_sequences(
    histogram: TermHistogram,
    *,
    counts: Sequence[int],
    length: int,
    rng: np.random.Generator,
    allow_repeats: bool = False,
    threshold: float = 0.0,
    contrast: float = 0.0,
) -> list[np.ndarray]:
    """Independent sequences from a released :class:`TermHistogram` (post-processing): L draws per sequence
    ∝ max(H̃_c(v) − κ·σ, 0), σ = √2·b the public deviation of a bin's noise, times the lift over the all-class
    histogram Σ_c H̃_c to the power ``contrast`` (:func:`contrast_weights`; its threshold is κ·σ·√C). Without
    repeats a drawn term is excluded from the rest of its sequence. One (counts[c], length) array per class."""
    length = _check_sampling(length, threshold, contrast)
    n_classes, n_terms = histogram.noisy.shape
    if len(counts) != n_classes:
        raise ConfigError(f"{len(counts)} sequence counts for {n_classes} classes")
    if not allow_repeats and n_terms < length:
        raise ConfigError(f"sequences of {length} distinct terms need at least {length} terms, Ṽ has {n_terms}")
    w = _class_weights(histogram.noisy, lambda: histogram.noisy.sum(axis=0, keepdims=True),
                       floor=threshold * histogram.noise_std, n_classes=n_classes, contrast=contrast)
    out = [np.zeros((int(n), length), dtype=np.int64) for n in counts]
    for i in range(length):
        for c in range(n_classes):
            seq = out[c]
            if len(seq):
                _draw_step(seq, i, np.broadcast_to(w[c], (len(seq), n_terms)), rng, allow_repeats=allow_repeats)
    return out


__all__ = ["TermScorer", "contrast_weights", "draw_rows", "sample_histogram_sequences", "sample_sequences",
           "sampling_weights", "score_noise_std", "sketch_for_step"]
