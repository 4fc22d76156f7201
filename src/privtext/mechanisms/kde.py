"""DP kernel density estimates with random Fourier features (DP-KPS §2, App A.2; Wagner, Naamad & Mishra 2023).

Kernel and features
-------------------
DP-KPS uses the Gaussian kernel k_h(x, y) = exp(−‖x − y‖²/h²) (§1.3 with h = 1; App A.2 "Bandwidth selection").
Random Fourier features (Rahimi & Recht 2007), in the normalisation of the proof of Thm A.1::

    ω_t ~ N(0, I_D),  β_t ~ U[0, 2π),  z_t(x) = √2·cos(√2·ω_tᵀx/h + β_t),   t = 1..I.

Then E[z_t(x)·z_t(y)] = E[cos(√2·ω_tᵀ(x − y)/h)] = exp(−‖x − y‖²/h²) = k_h(x, y) (the characteristic function
of a standard normal; the cross term with 2β_t averages to zero). **Convention**: the brief's ω ~ N(0, I/h²)
with √2·cos(ωᵀx + β) gives exp(−‖x − y‖²/(2h²)), the Rahimi–Recht form; we follow the paper's kernel, so a
bandwidth here equals √2 times the Rahimi–Recht bandwidth. Every |z_t| ≤ √2. (ω, β) are public randomness
(drawn from the run's rng, independent of the data, and needed by whoever scores with the sketch).

For a weighted point set X with weights w (Σ w = W) the RFF estimate of Σ_x w_x k_h(x, q) is
(1/I) Σ_t F_t z_t(q) with F_t = Σ_x w_x z_t(x). Each term z_t(q)·F_t lies in [−2W, 2W] and has mean
Σ w_x k(x, q), so by Hoeffding, for one query, P(|error| ≥ η) ≤ 2·exp(−I·η²/(8W²)), i.e. with probability
≥ 1 − δ over (ω, β) all Q queries are within η = W·√(8·ln(2Q/δ)/I) (:func:`rff_error_bound`).

Which points a record contributes
---------------------------------
Record j (a private document) contributes k_j ≥ 0 points (its keyphrase embeddings, or concatenations of m
consecutive ones). Its feature vector is

* ``weighting="mean"`` (default): φ_j = (1/k_j)·Σ_points z(point) — each record has total weight 1, so
  |φ_{j,t}| ≤ √2 however many keyphrases it holds (φ_j = 0 when k_j = 0);
* ``weighting="sum"``: φ_j = Σ of its first ``max_points`` points' z — |φ_{j,t}| ≤ √2·max_points. This is the
  paper's "all single keyphrases from D" (App A.2, Independent), where the per-record cap is left implicit.

Release and sensitivity (derived here; the paper's proof of Thm A.1 states only the noise)
-------------------------------------------------------------------------------------------
Per class c, S_c = Σ_{j ∈ c} φ_j ∈ ℝ^I; the release is S̃_c = S_c + Lap(b)^I for every class (the class set is
public). Let c_w = 1 (mean) or ``max_points`` (sum).

* ``noise="sum"``, **add/remove one record** (the paper's adjacency, §1.3; the default): only the record's own
  class row changes, by φ_j, so ‖ΔS‖₁ ≤ Σ_t |φ_{j,t}| ≤ √2·c_w·I: **Δ₁ = √2·c_w·I**, b = Δ₁/ε. No class size
  is needed or released. The classes are disjoint, so all C rows together are *one* Laplace release of
  ε (parallel composition: a record touches one row).
* ``noise="sum"``, **replace one record**: φ_j leaves one row and φ_j' enters one (the same or another):
  ‖ΔS‖₁ ≤ 2√2·c_w·I: **Δ₁ = 2√2·c_w·I**.
* A *mean* sketch S_c/n_c with a **public** class size n_c only makes sense under replace-one (add/remove
  changes n_c): Δ₁ = 2√2·I/n_c, which is the replace-one sum sketch divided by n_c — the same sampling
  distribution (below), so we do not offer it separately. Releasing n_c with noise to divide by it would spend
  budget on a number the sampler does not need.
* ``noise="paper"`` (App A.2, proof of Thm A.1, as printed): the class *mean* (1/|X|)·Σ z plus
  Lap(2√2·I/ε), noise *not* divided by |X|. That is ε-DP under both relations — the mean of values in
  [−√2, √2] moves by at most 2√2/n per coordinate when one of n records is replaced, by at most √2 when one is
  added or removed (with the mean of an empty class defined as 0), so Δ₁ ≤ 2√2·I for every n ≥ 0 — but it
  carries |X| times the noise of the mean sketch with public |X| (the 1/|X| was presumably lost in print).
  Kept for comparison; requires ``weighting="mean"``.

The event is ``LaplaceDpEvent(b/Δ₁) = LaplaceDpEvent(1/ε)`` in every case: pure ε-DP.

Scores and sampling (§2 (i))
----------------------------
The DP estimate at a query q is K̃_c(q) = (1/I)·Σ_t S̃_{c,t}·z_t(q) (≈ Σ_{x ∈ c} w_x k_h(x, q) + noise; the paper's
mean form divides by |X|). A term v ∈ Ṽ is drawn with probability max(K̃_c(v), 0)/Σ_v' max(K̃_c(v'), 0) — the
clipping is ours (noisy scores can be negative, and negative weights are no probabilities; DESIGN "noisy
histograms with negative entries used as sampling probabilities"); when every score is ≤ 0 the draw is uniform.
Both are post-processing. The distribution is invariant to a positive rescaling of the sketch, which is why the
sum sketch loses nothing by not dividing by the (private) class size. ``threshold`` κ (post-processing too)
subtracts κ·σ first, σ = √2·b/√I the public standard deviation of a score's noise (:func:`score_noise_std`):
terms that do not rise above the noise floor get no probability.

Sequences and ensembles (§2 (ii), App A.2, Thm A.1)
---------------------------------------------------
A sketch over *m blocks* is built from the concatenations x = (e_1, …, e_m) ∈ ℝ^{m·d} of m consecutive keyphrase
embeddings of a record (each block unit-norm), with bandwidth h·√m (the paper's u = 1/m: the concatenation is
scaled to unit norm), i.e. kernel Π_b exp(−‖x_b − y_b‖²/(m·h²)). A prefix y of i < m blocks is scored by
zero-padding it to m blocks: since ‖x[i:]‖² = m − i for unit blocks,

    E[z(x)·z(ȳ)] = exp(−‖x[:i] − y‖²/H²)·exp(−(m − i)/H²),   H = h·√m     (Thm A.1's identity),

so e^{(m−i)/H²}·K̃(ȳ) estimates the prefix KDE with the same bandwidth H, with the RFF/noise error inflated by
that factor (≤ e^{1/(2h²)} when at most half the blocks are padding). :meth:`KDESketch.prefix_estimate`.

* ``independent``: one sketch, m = 1; L draws (without repeats by default).
* ``iterative`` + ``linear``: sketches m = 1..L, step i scores prefix ⊕ v with the m = i sketch (no padding).
* ``iterative`` + ``log``: ⌈log₂ L⌉ sketches with m_j = min(2^j, L), j = 1..⌈log₂ L⌉; step i uses the smallest
  m_j ≥ i, so at most half of a query's blocks are padding. (The paper writes K_{⌈log i⌉} for step i, which for
  i = 1 would be a K_0 outside its ℓ = ⌈log L⌉ structures, and 2^ℓ blocks for the last, more than L: we use
  m_1 = 2 for steps 1–2 and cap the last at L, which keeps both the count ⌈log₂ L⌉ and the half-padding rule.)
  L = 1 uses the single m = 1 sketch.

The budget ε_kde is split equally over the K sketches of the ensemble (ε_kde/K each): sequential composition of
K pure-DP releases, ε = Σ = ε_kde. The classes inside each sketch compose in parallel (above).

Speed: scoring every term of Ṽ for N prefixes uses cos(a + p) = cos a·cos p − sin a·sin p, so a step is two
(N × I)·(I × |Ṽ|) products with the block projections P_b = E_Ṽ·W_b precomputed once
(:class:`privtext.methods.dpkps.sampling.TermScorer`).

This module holds the releases (the sketches and the term histogram, their sensitivities and events); scoring
and sampling sequences from them — post-processing — is DP-KPS's, in :mod:`privtext.methods.dpkps.sampling`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError, DataError
from ..privacy.noise import add_laplace
from ..privacy.relation import Contribution, NeighbouringRelation
from .vocabulary import Neighbouring, check_epsilon, check_neighbouring, laplace_event, relation_name

NoiseMode = Literal["sum", "paper"]
Weighting = Literal["mean", "sum"]
SequenceMode = Literal["independent", "iterative"]
Ensemble = Literal["log", "linear"]

SQRT2 = math.sqrt(2.0)
_CHUNK = 4096  # points per chunk when building a sketch


# --------------------------------------------------------------------------------------------- features


def _check_bandwidth(h: Any) -> float:
    if isinstance(h, bool) or not isinstance(h, (int, float, np.integer, np.floating)) or not (0 < float(h) < math.inf):
        raise ConfigError(f"bandwidth must be a positive finite number, got {h!r}")
    return float(h)


def _check_pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class RandomFourierFeatures:
    """z_t(x) = √2·cos(x·W_t + β_t) with W = √2·ω/h, ω ~ N(0, I_D): E[z(x)·z(y)] = exp(−‖x − y‖²/h²)."""

    weights: np.ndarray  # (D, I) float64: √2·ω/h
    offsets: np.ndarray  # (I,) float64: β
    bandwidth: float

    @classmethod
    def draw(cls, dim: int, n_features: int, *, bandwidth: float, rng: np.random.Generator) -> RandomFourierFeatures:
        """I = ``n_features`` random features for points of dimension D = ``dim`` at bandwidth h: ω ~ N(0, I_D) per
        feature, β ~ U[0, 2π), W = √2·ω/h. Drawn from ``rng`` with public parameters only (no data). Raises
        :class:`~privtext.errors.ConfigError` for a non-positive size or bandwidth or a missing
        ``numpy.random.Generator``."""
        dim = _check_pos_int("dim", dim)
        n = _check_pos_int("n_features", n_features)
        h = _check_bandwidth(bandwidth)
        if not isinstance(rng, np.random.Generator):
            raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        omega = rng.standard_normal((dim, n))
        beta = rng.uniform(0.0, 2.0 * math.pi, size=n)
        return cls(weights=omega * (SQRT2 / h), offsets=beta, bandwidth=h)

    @property
    def dim(self) -> int:
        """D, the dimension of the points (embeddings) the features take."""
        return int(self.weights.shape[0])

    @property
    def n_features(self) -> int:
        """I, the number of random features (the sketch's length per class)."""
        return int(self.weights.shape[1])

    def _check(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise DataError(f"expected points of shape (n, {self.dim}), got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise DataError("non-finite values in points")
        return x

    def project(self, x: np.ndarray) -> np.ndarray:
        """x·W (n, I), without the offsets."""
        return self._check(x) @ self.weights

    def transform(self, x: np.ndarray) -> np.ndarray:
        """z(x): (n, I), every entry in [−√2, √2]."""
        return SQRT2 * np.cos(self.project(x) + self.offsets)

    def block_weights(self, block: int, block_dim: int) -> np.ndarray:
        """The rows of W acting on block ``block`` (d = ``block_dim`` coordinates) of a concatenation."""
        lo, hi = block * block_dim, (block + 1) * block_dim
        if block < 0 or hi > self.dim:
            raise ConfigError(f"block {block} of dimension {block_dim} is outside the {self.dim} feature inputs")
        return self.weights[lo:hi]


def gaussian_kernel(x: np.ndarray, y: np.ndarray, *, bandwidth: float) -> np.ndarray:
    """k_h(x_a, y_b) = exp(−‖x_a − y_b‖²/h²) for all pairs: (len(x), len(y))."""
    h = _check_bandwidth(bandwidth)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * x @ y.T
    return np.exp(-np.maximum(sq, 0.0) / (h * h))


def gaussian_kde(data: np.ndarray, queries: np.ndarray, *, bandwidth: float,
                 weights: np.ndarray | None = None) -> np.ndarray:
    """Exact Σ_j w_j·k_h(x_j, q) for every query (weights 1/n by default: the mean KDE of §1.3)."""
    data = np.asarray(data, dtype=np.float64)
    w = np.full(len(data), 1.0 / max(len(data), 1)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(w) != len(data):
        raise DataError(f"{len(w)} weights for {len(data)} points")
    return w @ gaussian_kernel(data, queries, bandwidth=bandwidth)


def rff_kde(data: np.ndarray, queries: np.ndarray, features: RandomFourierFeatures, *,
            weights: np.ndarray | None = None) -> np.ndarray:
    """The (non-private) RFF estimate (1/I)·Σ_t F_t z_t(q), F = Σ_j w_j z(x_j)."""
    data = np.asarray(data, dtype=np.float64)
    w = np.full(len(data), 1.0 / max(len(data), 1)) if weights is None else np.asarray(weights, dtype=np.float64)
    f = w @ features.transform(data)
    return features.transform(queries) @ f / features.n_features


def rff_error_bound(n_features: int, *, failure_prob: float, n_queries: int = 1, weight_sum: float = 1.0,
                    second_moment: float | None = None) -> float:
    """η with P(max over ``n_queries`` fixed queries of |RFF estimate − exact KDE| > η) ≤ ``failure_prob``.

    The estimate is the mean of I i.i.d. terms Y_t = z_t(q)·F_t with mean Σ w_x k(x, q); with W = Σ|w|,
    |Y_t| ≤ 2W and |Y_t − E Y_t| ≤ 3W. Union bound over the Q queries, λ = ln(2Q/δ):

    * Hoeffding (Y_t ∈ [−2W, 2W]): η = W·√(8λ/I);
    * Bernstein, when ``second_moment`` s ≥ E[(F_t/W)²] = (1/W²)·Σ_{x,x'} w_x w_x' k(x, x') is given (computable
      exactly from the data): Var(Y_t/W) ≤ E[z_t(q)²(F_t/W)²] ≤ 2s =: v and
      P(|Ȳ − μ| ≥ η) ≤ 2·exp(−I·η²/(2v + 2·3·η/3)), so η = W·(2λ + √(4λ² + 8·I·v·λ))/(2I)."""
    n_features = _check_pos_int("n_features", n_features)
    if not 0 < failure_prob < 1:
        raise ConfigError(f"failure_prob must be in (0, 1), got {failure_prob!r}")
    lam = math.log(2.0 * n_queries / failure_prob)
    if second_moment is None:
        return float(weight_sum) * math.sqrt(8.0 * lam / n_features)
    if not 0 <= second_moment <= 2:
        raise ConfigError(f"second_moment must be in [0, 2] (it is a mean of kernel values), got {second_moment!r}")
    v = 2.0 * float(second_moment)
    eta = (2.0 * lam + math.sqrt(4.0 * lam * lam + 8.0 * n_features * v * lam)) / (2.0 * n_features)
    return float(weight_sum) * eta


# --------------------------------------------------------------------------------------------- mechanism


def sketch_sensitivity(
    n_features: int,
    *,
    noise: NoiseMode = "sum",
    weighting: Weighting = "mean",
    max_points: int | None = None,
    neighbouring: Neighbouring = "add_remove",
) -> float:
    """Δ₁ of the released (C × I) sketch (module docstring) under the relation (:mod:`privtext.privacy.relation`):
    √2·c_w·I (sum, add/remove), 2√2·c_w·I (sum, replace one: the contribution is signed), k·√2·c_w·I (a group of
    k records); 2√2·I (paper: the paper's own bound for its class-mean sketch, one-record relations only)."""
    n_features = _check_pos_int("n_features", n_features)
    rel = NeighbouringRelation.of(check_neighbouring(neighbouring))
    if weighting not in ("mean", "sum"):
        raise ConfigError(f"weighting must be 'mean' or 'sum', got {weighting!r}")
    return rel.sensitivity(sketch_contribution(n_features, noise=noise, weighting=weighting, max_points=max_points))


def _points_cap(weighting: str, max_points: int | None) -> int:
    """c_w: a record's total point weight (1 with ``weighting="mean"``, the cap ``max_points`` with ``"sum"``)."""
    if weighting == "mean":
        return 1
    if weighting == "sum":
        if max_points is None:
            raise ConfigError("weighting='sum' needs max_points (the per-record cap that bounds the sensitivity)")
        return _check_pos_int("max_points", max_points)
    raise ConfigError(f"weighting must be 'mean' or 'sum', got {weighting!r}")


def sketch_contribution(n_features: int, *, noise: NoiseMode = "sum", weighting: Weighting = "mean",
                        max_points: int | None = None) -> Contribution:
    """One record's contribution to the summed sketch: c_w unit points, each a vector of I features of
    magnitude ≤ √2 (√2·cos): L1 norm ≤ √2·c_w·I, signed. ``noise="paper"``: the paper's own bound 2√2·I for its
    class-mean sketch (App A.2), which it states for one-record neighbours (add/remove or replace)."""
    if noise == "paper":
        if weighting != "mean":
            raise ConfigError("noise='paper' (the class-mean sketch of App A.2) needs weighting='mean'")
        return Contribution(2.0 * SQRT2 * _check_pos_int("n_features", n_features), "l1", False,
                            "the paper's class-mean sketch bound", fixed_for=("add_remove", "replace_one"))
    if noise != "sum":
        raise ConfigError(f"noise must be 'sum' or 'paper', got {noise!r}")
    c_w = _points_cap(weighting, max_points)
    return Contribution(SQRT2 * c_w * _check_pos_int("n_features", n_features), "l1", False,
                        f"{c_w} point(s) of {n_features} random features")


def kde_event(epsilon: float) -> Any:
    """The event of one :func:`dp_kde_sketch` release (all classes): ``LaplaceDpEvent(1/ε)``."""
    return laplace_event(epsilon)


@dataclass(frozen=True, kw_only=True)
class ClassRelease:
    """A per-class Laplace release: one noisy row per class (C × bins), released at pure ε with Laplace scale
    b = Δ₁/ε, and the per-record weighting and neighbouring relation that Δ₁ was derived for."""

    noisy: np.ndarray  # (C, bins) float64, released
    epsilon: float
    scale: float  # Laplace scale b
    sensitivity: float  # Δ₁
    weighting: str
    neighbouring: str

    @property
    def n_classes(self) -> int:
        """C, the number of classes (rows)."""
        return int(self.noisy.shape[0])


@dataclass(frozen=True, kw_only=True)
class KDESketch(ClassRelease):
    """A released DP-KDE sketch: S̃_c (per class, I random features) over m-block concatenations, with its
    public features."""

    features: RandomFourierFeatures
    blocks: int  # m
    block_dim: int  # d
    noise: str

    @property
    def kernel_bandwidth(self) -> float:
        """H: the bandwidth of the kernel on the m-block concatenations (h·√m)."""
        return self.features.bandwidth

    def pad(self, queries: np.ndarray) -> np.ndarray:
        """Zero-pad queries of i·d coordinates (i ≤ m) to m·d."""
        q = np.asarray(queries, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] % self.block_dim or q.shape[1] > self.blocks * self.block_dim:
            raise DataError(f"queries must have a multiple of {self.block_dim} coordinates, at most "
                            f"{self.blocks * self.block_dim}; got shape {q.shape}")
        out = np.zeros((len(q), self.blocks * self.block_dim))
        out[:, : q.shape[1]] = q
        return out

    def estimate(self, queries: np.ndarray) -> np.ndarray:
        """K̃_c(q) for every class and (zero-padded) query: (C, n)."""
        z = self.features.transform(self.pad(queries))
        return self.noisy @ z.T / self.features.n_features

    def padding_correction(self, prefix_blocks: int) -> float:
        """e^{(m − i)/H²}: the factor that turns a padded estimate into the prefix KDE (unit-norm blocks)."""
        i = int(prefix_blocks)
        if not 1 <= i <= self.blocks:
            raise ConfigError(f"prefix of {i} blocks for a sketch of {self.blocks}")
        return math.exp((self.blocks - i) / self.kernel_bandwidth**2)

    def prefix_estimate(self, prefixes: np.ndarray) -> np.ndarray:
        """Thm A.1: the estimate of the prefix KDE Σ_x w_x exp(−‖x[:i] − y‖²/H²) at i-block queries y."""
        q = np.asarray(prefixes)
        return self.padding_correction(q.shape[1] // self.block_dim) * self.estimate(q)


def _check_classes(record_classes: Sequence[int] | np.ndarray, n_records: int, n_classes: int) -> np.ndarray:
    n_classes = _check_pos_int("n_classes", n_classes)
    cls = np.asarray(record_classes)
    if cls.shape != (n_records,):
        raise DataError(f"{cls.size} class ids for {n_records} records")
    if n_records and (not np.issubdtype(cls.dtype, np.integer) or cls.min() < 0 or cls.max() >= n_classes):
        raise DataError(f"class ids must be integers in [0, {n_classes}); got values {np.unique(cls)[:10].tolist()}")
    return cls.astype(np.int64)


def _release(
    chunks: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    features: RandomFourierFeatures,
    blocks: int,
    block_dim: int,
    n_classes: int,
    record_classes: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    noise: NoiseMode,
    weighting: Weighting,
    sensitivity: float,
    neighbouring: str,
) -> KDESketch:
    """Accumulate S_c = Σ_points weight·z(point) per class from (projection, weight, record) chunks, add noise."""
    n_feat = features.n_features
    sums = np.zeros((n_classes, n_feat))
    has_points = np.zeros(len(record_classes), dtype=bool)
    for proj, w, rec in chunks:
        z = SQRT2 * np.cos(proj + features.offsets)
        a = np.zeros((len(w), n_classes))
        a[np.arange(len(w)), record_classes[rec]] = w
        sums += a.T @ z
        has_points[rec] = True
    if noise == "paper":
        n_c = np.bincount(record_classes[has_points], minlength=n_classes).astype(np.float64)
        sums = sums / np.maximum(n_c, 1.0)[:, None]
    scale = 0.0 if math.isinf(epsilon) else sensitivity / epsilon
    noisy = add_laplace(sums, scale, rng)
    return KDESketch(features=features, blocks=blocks, block_dim=block_dim, noisy=noisy, epsilon=epsilon,
                     scale=scale, sensitivity=sensitivity, noise=noise, weighting=weighting,
                     neighbouring=relation_name(neighbouring))


def _weights(counts: np.ndarray, weighting: Weighting, max_points: int | None) -> np.ndarray:
    """Per-point weights of records with ``counts`` points each, flattened record by record."""
    if weighting == "mean":
        return np.repeat(1.0 / np.maximum(counts, 1), counts)
    return np.concatenate([np.arange(c) < (max_points or 0) for c in counts]).astype(np.float64) if len(counts) \
        else np.zeros(0)


def _public_term_weighting(w: np.ndarray, ids: np.ndarray, rec: np.ndarray, counts: np.ndarray,
                           term_weights: np.ndarray, weighting: str, n_terms: int) -> np.ndarray:
    """Per-window weights ∝ the windows' mean public term weight, summing to 1 per record (docstring of
    :func:`dp_kde_sketch_terms`)."""
    if weighting != "mean":
        raise ConfigError("term_weights need weighting='mean' (a record's weights must sum to 1 for Δ₁ = √2·I)")
    tw = np.asarray(term_weights, dtype=np.float64)
    if tw.shape != (n_terms,) or not np.all(np.isfinite(tw)) or np.any(tw <= 0):
        bad = tw[~(np.isfinite(tw) & (tw > 0))][:3].tolist() if tw.ndim == 1 else tw.shape
        raise ConfigError(f"term_weights must be {n_terms} finite positive numbers (one per Ṽ term); got shape "
                          f"{tw.shape}, bad values {bad}")
    if not len(w):
        return w
    raw = tw[ids].mean(axis=1)
    tot = np.bincount(rec, weights=raw, minlength=len(counts))
    return raw / tot[rec]


def _validate_common(epsilon: float, noise: NoiseMode, weighting: Weighting, max_points: int | None,
                     neighbouring: Neighbouring, rng: Any, n_features: int) -> tuple[float, float]:
    eps = check_epsilon(epsilon, name="epsilon_kde")
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    delta1 = sketch_sensitivity(n_features, noise=noise, weighting=weighting, max_points=max_points,
                                neighbouring=neighbouring)
    return eps, delta1


def dp_kde_sketch(
    record_points: Sequence[np.ndarray],
    record_classes: Sequence[int] | np.ndarray,
    *,
    n_classes: int,
    features: RandomFourierFeatures,
    epsilon: float,
    rng: np.random.Generator,
    blocks: int = 1,
    noise: NoiseMode = "sum",
    weighting: Weighting = "mean",
    max_points: int | None = None,
    neighbouring: Neighbouring = "add_remove",
) -> tuple[KDESketch, Any]:
    """Release the per-class DP-KDE sketch of records given as point sets (each (k_j, D), k_j ≥ 0).

    ``blocks`` only documents how queries are padded (D = blocks·d). Returns ``(sketch, event)``; the event
    equals :func:`kde_event` (ε), which the caller records before this reads the points (run it inside
    :meth:`privtext.privacy.release.ReleaseKeeper.release`)."""
    eps, delta1 = _validate_common(epsilon, noise, weighting, max_points, neighbouring, rng, features.n_features)
    blocks = _check_pos_int("blocks", blocks)
    if features.dim % blocks:
        raise ConfigError(f"features of dimension {features.dim} cannot be split into {blocks} blocks")
    event = kde_event(eps)
    cls = _check_classes(record_classes, len(record_points), n_classes)
    pts = [np.asarray(p, dtype=np.float64).reshape(-1, features.dim) for p in record_points]
    counts = np.array([len(p) for p in pts], dtype=np.int64)
    w = _weights(counts, weighting, max_points)
    rec = np.repeat(np.arange(len(pts)), counts)
    allp = np.concatenate(pts) if pts else np.zeros((0, features.dim))

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        keep = np.flatnonzero(w > 0)
        for s in range(0, len(keep), _CHUNK):
            k = keep[s:s + _CHUNK]
            yield features.project(allp[k]), w[k], rec[k]

    sketch = _release(chunks(), features=features, blocks=blocks, block_dim=features.dim // blocks,
                      n_classes=n_classes, record_classes=cls, epsilon=eps, rng=rng, noise=noise,
                      weighting=weighting, sensitivity=delta1, neighbouring=relation_name(neighbouring))
    return sketch, event


# --------------------------------------------------------------------------------------- term sequences


class BlockProjections:
    """P_b = E·W_b (|Ṽ| × I) for each block b of one sketch's features: public, computed once."""

    def __init__(self, term_embeddings: np.ndarray, features: RandomFourierFeatures, blocks: int):
        e = np.asarray(term_embeddings, dtype=np.float64)
        if e.ndim != 2 or e.shape[1] * blocks != features.dim:
            raise DataError(f"term embeddings of shape {e.shape} do not fit {blocks} blocks of features of "
                            f"dimension {features.dim}")
        self.embeddings, self.features, self.blocks, self.block_dim = e, features, int(blocks), e.shape[1]
        self._cache: dict[int, np.ndarray] = {}
        self._trig: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def n_terms(self) -> int:
        return len(self.embeddings)

    def __getitem__(self, b: int) -> np.ndarray:
        if b not in self._cache:
            self._cache[b] = self.embeddings @ self.features.block_weights(b, self.block_dim)
        return self._cache[b]

    def trig(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos P_b, sin P_b), cached."""
        if b not in self._trig:
            p = self[b]
            self._trig[b] = (np.cos(p), np.sin(p))
        return self._trig[b]

    def window_projection(self, ids: np.ndarray) -> np.ndarray:
        """Σ_b P_b[ids[:, b]] for windows ``ids`` (n, j), j ≤ m: the projection of their (padded) concatenation."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros((len(ids), self.features.n_features))
        for b in range(ids.shape[1]):
            out += self[b][ids[:, b]]
        return out


def record_windows(doc_terms: Sequence[Sequence[int]], blocks: int, *, max_terms: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """All windows of ``blocks`` consecutive terms of each record's term list (cut at ``max_terms``):
    ``(ids (n_windows, blocks), record index (n_windows,))``. Records with fewer terms give none."""
    rows: list[np.ndarray] = []
    recs: list[np.ndarray] = []
    for j, t in enumerate(doc_terms):
        a = np.asarray(list(t)[:max_terms] if max_terms is not None else list(t), dtype=np.int64)
        n_win = len(a) - blocks + 1
        if n_win <= 0:
            continue
        idx = np.arange(n_win)[:, None] + np.arange(blocks)[None, :]
        rows.append(a[idx])
        recs.append(np.full(n_win, j, dtype=np.int64))
    if not rows:
        return np.zeros((0, blocks), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(rows), np.concatenate(recs)


@dataclass(frozen=True)
class TermRecords:
    """Private records as term-id sequences into the embedded vocabulary Ṽ, each with its class, and how a record's
    unit of mass is spread over its terms: the per-record map whose bound the sensitivities of
    :func:`dp_kde_sketch_terms` and :func:`dp_term_histogram` use.

    ``max_terms``: a record's first terms kept (None: all); ``weighting``: ``"mean"`` (a record's points share
    weight 1) or ``"sum"`` (weight 1 each, at most ``max_points``); ``term_weights``: a *public* positive weight
    per Ṽ term (``"mean"`` only; see :func:`dp_kde_sketch_terms`)."""

    doc_terms: Sequence[Sequence[int]]
    doc_classes: Sequence[int] | np.ndarray
    n_classes: int
    max_terms: int | None = None
    weighting: Weighting = "mean"
    max_points: int | None = None
    term_weights: np.ndarray | None = None


def _record_weights(records: TermRecords, *, blocks: int, n_terms: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(record classes, window term ids (W × blocks), each window's record, each window's weight): the points of
    every record and the weights whose per-record sum the sensitivities bound (1 for ``"mean"``, with or without
    public ``term_weights``; ≤ ``max_points`` for ``"sum"``)."""
    r = records
    max_terms = _check_pos_int("max_terms", r.max_terms) if r.max_terms is not None else None
    cls = _check_classes(r.doc_classes, len(r.doc_terms), r.n_classes)
    ids, rec = record_windows(r.doc_terms, blocks, max_terms=max_terms)
    if len(ids) and (ids.min() < 0 or ids.max() >= n_terms):
        raise DataError(f"term ids must lie in [0, {n_terms})")
    counts = np.bincount(rec, minlength=len(r.doc_terms))
    w = _weights(counts, r.weighting, r.max_points)  # windows are grouped by record, in order
    if r.term_weights is not None:
        w = _public_term_weighting(w, ids, rec, counts, r.term_weights, r.weighting, n_terms)
    return cls, ids, rec, w


def dp_kde_sketch_terms(records: TermRecords, *, projections: BlockProjections, epsilon: float,
                        rng: np.random.Generator, noise: NoiseMode = "sum",
                        neighbouring: Neighbouring = "add_remove") -> tuple[KDESketch, Any]:
    """The DP-KDE sketch of ``records`` given as term-id sequences (ids into the embedded vocabulary Ṽ).

    A record's points are the concatenated embeddings of its windows of m = ``projections.blocks`` consecutive
    terms (m = 1: its terms), from its first ``max_terms`` terms. Same release and event as
    :func:`dp_kde_sketch` (the projections are computed from public embeddings without materialising the
    m·d-dimensional concatenations).

    ``term_weights`` (``weighting="mean"`` only): a *public* positive weight per Ṽ term (e.g. its inverse
    document frequency in the public corpus). A record's points then get weights ∝ the mean term weight of each
    window, normalised so that the record's weights sum to 1 (instead of 1/k_j each). Privacy is unchanged:
    φ_j = Σ_p a_p·z(p) with a_p ≥ 0 and Σ_p a_p = 1 is a convex combination of vectors in [−√2, √2]^I, so
    |φ_{j,t}| ≤ √2 and Δ₁ = √2·I as before (the weights depend only on public values and the record itself, a
    per-record map applied before the sum). It moves a record's unit of mass from terms every class uses to the
    rarer terms that tell the classes apart, so those terms' scores rise against the same noise."""
    features = projections.features
    weighting, n_classes = records.weighting, records.n_classes
    eps, delta1 = _validate_common(epsilon, noise, weighting, records.max_points, neighbouring, rng,
                                   features.n_features)
    event = kde_event(eps)
    m = projections.blocks
    cls, ids, rec, w = _record_weights(records, blocks=m, n_terms=projections.n_terms)

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        keep = np.flatnonzero(w > 0)
        for s in range(0, len(keep), _CHUNK):
            k = keep[s:s + _CHUNK]
            yield projections.window_projection(ids[k]), w[k], rec[k]

    sketch = _release(chunks(), features=features, blocks=m, block_dim=projections.block_dim,
                      n_classes=n_classes, record_classes=cls, epsilon=eps, rng=rng, noise=noise,
                      weighting=weighting, sensitivity=delta1, neighbouring=relation_name(neighbouring))
    return sketch, event


# ------------------------------------------------------------------------------------------- ensembles


def ensemble_blocks(length: int, *, sequence: SequenceMode = "independent", ensemble: Ensemble = "log"
                    ) -> tuple[int, ...]:
    """The block counts m of the sketches a sequence mode needs (module docstring)."""
    length = _check_pos_int("length", length)
    if sequence == "independent":
        return (1,)
    if sequence != "iterative":
        raise ConfigError(f"sequence must be 'independent' or 'iterative', got {sequence!r}")
    if ensemble == "linear":
        return tuple(range(1, length + 1))
    if ensemble != "log":
        raise ConfigError(f"ensemble must be 'log' or 'linear', got {ensemble!r}")
    if length == 1:
        return (1,)
    n = math.ceil(math.log2(length))
    return tuple(min(2**j, length) for j in range(1, n + 1))


def ensemble_epsilons(epsilon_kde: float, n_sketches: int) -> list[float]:
    """ε_kde split equally over the ensemble's sketches (sequential composition: they sum to ε_kde)."""
    eps = check_epsilon(epsilon_kde, name="epsilon_kde")
    n = _check_pos_int("n_sketches", n_sketches)
    return [eps / n] * n


def kde_ensemble_event(epsilon_kde: float, n_sketches: int) -> Any:
    """``ComposedDpEvent`` of the ensemble's sketch events (pure ε = ε_kde), built without data."""
    from ..privacy.events import composed

    return composed([kde_event(e) for e in ensemble_epsilons(epsilon_kde, n_sketches)])


def histogram_sensitivity(*, weighting: Weighting = "mean", max_points: int | None = None,
                          neighbouring: Neighbouring = "add_remove") -> float:
    """Δ₁ of the released (C × |Ṽ|) term histogram (:func:`dp_term_histogram`) under the relation: c_w
    (add/remove), 2·c_w (replace one), k·c_w (a group of k); c_w = 1 (``weighting="mean"``) or ``max_points``
    (``"sum"``)."""
    rel = NeighbouringRelation.of(check_neighbouring(neighbouring))
    return rel.sensitivity(histogram_contribution(weighting=weighting, max_points=max_points))


def histogram_contribution(*, weighting: Weighting = "mean", max_points: int | None = None) -> Contribution:
    """One record adds non-negative weights of total c_w to its class's row: L1 norm ≤ c_w."""
    c_w = _points_cap(weighting, max_points)
    return Contribution(float(c_w), "l1", True, f"term weights summing to ≤ {c_w}")


@dataclass(frozen=True, kw_only=True)
class TermHistogram(ClassRelease):
    """A released per-class DP term histogram H̃ (C × |Ṽ|): the DP-KDE of the discrete kernel on Ṽ."""

    @property
    def noise_std(self) -> float:
        """The standard deviation of one bin's noise, √2·b (public)."""
        return SQRT2 * self.scale


def dp_term_histogram(records: TermRecords, *, n_terms: int, epsilon: float, rng: np.random.Generator,
                      neighbouring: Neighbouring = "add_remove") -> tuple[TermHistogram, Any]:
    """The per-class DP term histogram: the DP-KDE of the *discrete* kernel k(u, v) = 1[u = v] on Ṽ.

    Why: DP-KPS's keyphrases are the |Ṽ| terms of the released vocabulary, and at the bandwidths where the
    Gaussian KDE of unit-norm word embeddings separates the terms at all (h ≈ 0.3: k ≈ e^{−11} between two
    terms at cosine 0.5) it is already a histogram over Ṽ — computed through I random features whose noise is
    √(2I) times larger: a score's Laplace noise has deviation 2√I/ε there (:func:`score_noise_std`), √2/ε here.
    On Yelp (N = 2000, ε = 10, docs/dpkps.md) that is σ ≈ 3.8 against ≈ 0.17, while a minority class's term
    mass is ≈ 1–3.

    Release. Record j (a private document) with its first ``max_terms`` Ṽ terms T_j gives a_j ∈ ℝ^{|Ṽ|}:
    ``weighting="mean"`` a_{j,v} = 1/|T_j| on its terms (with public ``term_weights`` w: w_v/Σ_{u∈T_j} w_u),
    so a_j ≥ 0 and Σ_v a_{j,v} = 1 (0 when T_j is empty); ``"sum"``: 1 on each of its first ``max_points`` terms.
    H_c = Σ_{j∈c} a_j; H̃_c = H_c + Lap(b)^{|Ṽ|} for every class c, on every bin (the bin set — classes and Ṽ —
    is public). Add/remove one record changes only its own class's row, by a_j: ‖ΔH‖₁ = Σ_v a_{j,v} ≤ c_w, so
    Δ₁ = c_w (1 for "mean"); replacing one record moves two rows (or one twice): Δ₁ = 2·c_w. b = Δ₁/ε: pure
    ε-DP (the Laplace mechanism), event ``LaplaceDpEvent(1/ε)`` as for the RFF sketch; all C rows are one
    release (parallel composition over the disjoint classes). No class size is used or released."""
    eps = check_epsilon(epsilon, name="epsilon_kde")
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    n_terms = _check_pos_int("n_terms", n_terms)
    weighting = records.weighting
    delta1 = histogram_sensitivity(weighting=weighting, max_points=records.max_points, neighbouring=neighbouring)
    event = kde_event(eps)
    cls, ids, rec, w = _record_weights(records, blocks=1, n_terms=n_terms)
    hist = np.zeros((records.n_classes, n_terms))
    np.add.at(hist, (cls[rec], ids[:, 0]), w)
    scale = 0.0 if math.isinf(eps) else delta1 / eps
    noisy = add_laplace(hist, scale, rng)
    return TermHistogram(noisy=noisy, epsilon=eps, scale=scale, sensitivity=delta1, weighting=weighting,
                         neighbouring=relation_name(neighbouring)), event



__all__ = [
    "SQRT2",
    "BlockProjections",
    "ClassRelease",
    "KDESketch",
    "RandomFourierFeatures",
    "TermHistogram",
    "TermRecords",
    "dp_kde_sketch",
    "dp_kde_sketch_terms",
    "dp_term_histogram",
    "ensemble_blocks",
    "ensemble_epsilons",
    "gaussian_kde",
    "gaussian_kernel",
    "histogram_contribution",
    "histogram_sensitivity",
    "kde_ensemble_event",
    "kde_event",
    "record_windows",
    "rff_error_bound",
    "rff_kde",
    "sketch_contribution",
    "sketch_sensitivity",
]
