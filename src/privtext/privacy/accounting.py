"""Accounting on dp_accounting's privacy loss distributions (PLDs): ε(δ), μ, and the blow-up B(p).

We do not write an accountant. Every number here comes from a ``dp_accounting.pld.PrivacyLossDistribution``
built with pessimistic discretisation (``pessimistic_estimate=True``, connect-the-dots; Doroshenko et al. 2022),
composed with its own FFT convolution, except where an exact closed form exists (μ-GDP of Gaussian
compositions, and the Gaussian blow-up of Lemma 3.2).

Blow-up and its direction
-------------------------
SecPE (Lemma 3.2, Alg 1 line 6) bounds the adversary's posterior by the blow-up of the pair
(P, Q) = (output *with* the secret, output *without* it)::

    B_(P,Q)(p) = sup {P(E) : Q(E) ≤ p} = min_ε [ e^ε·p + H_{e^ε}(P ‖ Q) ],   H_γ(P‖Q) = sup_E P(E) − γ Q(E).

(≤ holds for every ε since P(E) ≤ e^ε Q(E) + H; the minimum is attained by Neyman–Pearson duality.) So we need
the hockey-stick divergence of P *with respect to* Q, P being the mixture Σ_k Pr[S=k]·N(kΔ, σ²) and Q = N(0, σ²).
In dp_accounting's ``MixtureGaussianPrivacyLoss`` that is the **REMOVE** adjacency (mu_upper = the mixture,
reflected, mu_lower = the Gaussian); ADD is H(Q‖P). :func:`blowup_of` reads the REMOVE side only;
tests/test_privacy_accounting.py checks the direction against numerical integration of ∫(p − e^ε q)₊.

We minimise over ε ≥ 0 only (a pessimistic PLD dominates the true pair at every ε ≥ 0, which is what
dp_accounting guarantees); restricting the minimum can only make the bound larger (still valid).

Speed
-----
``PrivacyLossDistribution.from_mixture_gaussian_mechanism`` spends its time in a recursive Python bisection
(``_inverse_privacy_losses_with_range``): 2–32 s per build. :class:`FastMixtureGaussianPrivacyLoss` overrides
that one method (same contract: the smallest multiple of ``precision`` at which the loss is at most l), and
:func:`_connect_dots_pmf` builds dp_accounting's pessimistic connect-the-dots PMF on an adaptive grid; the tail
truncation, the δ values and the discretisation are dp_accounting's code. A build takes 10–100 ms. Cheap valid
bounds (:func:`secret_check`) avoid most PLDs during calibration and in the ledger.

Discretisation of (ε, δ) PLDs
-----------------------------
The value discretisation interval is chosen per composition (:func:`pld_interval`): finer than the default 1e-3
where each application's privacy loss is narrow (a Poisson-subsampled step at small q: 1e-3 overstated ε by 2–5 %
over 10⁴–10⁵ steps), coarser only where the composed PMF would not fit in memory or, with ε in the hundreds, take
long. Subsampled Gaussian steps are discretised on an adaptive grid (:class:`FastSampledGaussianPrivacyLoss`,
:func:`_connect_dots_pmf`) and self-composed by dp_accounting's FFT. Over σ ∈ [0.5, 5], q ∈ [1e-4, 0.25], T ∈ [10, 10⁵] ε stays within 0.1 % above
dp_accounting's on a 4× finer grid (never below it), in under 2 s (the shared 2-core machine at load 7;
tests/test_accounting_grid.py, benchmarks/accounting.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from dp_accounting import dp_event as _dpe
from dp_accounting.pld import pld_pmf as _pld_pmf
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.pld import privacy_loss_mechanism as _plm
from scipy.special import ndtr, ndtri

from ..errors import InvalidPrivacyParameter, PrivacyError
from .conversions import check_delta, check_prior, gdp_delta, gdp_epsilon, r_from_mu_p
from .events import DpEvent, Leaves, _mog_support, event_from_dict, event_key, flatten

#: value_discretization_interval of every PLD we build. With connect-the-dots, 1e-3 agrees with 1e-4 to ~1e-7
#: in ε for Gaussians (checked in the tests) at a tenth of the cost.
DEFAULT_DISCRETIZATION = 1e-3

#: value_discretization_interval for blow-up PLDs of mixtures (secret protection). Mixture PLDs span long loss
#: ranges; at 5e-3 the blow-up is within ~1e-5 (relative) of the 1e-3 value — still an upper bound — at a
#: fraction of the cost (numbers in benchmarks/secret_noise_ratio.py --accuracy and the tests).
BLOWUP_DISCRETIZATION = 5e-3

#: most points a composed PLD may span before :func:`composed_pld` coarsens its discretization (dp_accounting
#: builds each pmf as a Python dict first, ~100 bytes a point). The privacy loss of a Gaussian of noise multiplier
#: σ spans ~1/σ² nats: at σ = 0.001 and 1e-3 nats a point that is 10⁹ points, and a dpft run with
#: ``privacy: {noise_multiplier: 0.001}`` was killed for memory computing its ε. A coarser interval keeps
#: dp_accounting's pessimistic estimate an upper bound on ε.
MAX_PLD_POINTS = 5_000_000

#: how many noise standard deviations of the loss distribution's tails the range estimate covers
_TAIL_SIGMAS = 12.0

PrivacyLossDistribution = _pld.PrivacyLossDistribution


class FastMixtureGaussianPrivacyLoss(_plm.MixtureGaussianPrivacyLoss):
    """dp_accounting's mixture-of-Gaussians privacy loss with a vectorised inverse.

    ``_inverse_privacy_losses_with_range`` returns, for each loss l, the smallest multiple of ``precision`` x
    such that the privacy loss at x is at most l (upper end of a bisection bracket), exactly as the recursive
    original does; only the loop is vectorised.
    """

    def _privacy_losses_vec(self, x: np.ndarray) -> np.ndarray:
        consts = self._precompute_privacy_loss_constants  # (K,)
        sign = 1.0 if self.adjacency_type == _plm.AdjacencyType.ADD else -1.0
        a = consts[None, :] + sign * np.multiply.outer(x, self.sensitivities / self._variance)  # (n, K)
        amax = a.max(axis=1)
        lse = amax + np.log(np.exp(a - amax[:, None]).sum(axis=1))
        return -lse if sign > 0 else lse

    def _inverse_privacy_losses_with_range(
        self, privacy_losses: np.ndarray, bounds: tuple[float, float], precision: float = 1e-6
    ) -> np.ndarray:
        """For each loss l: the smallest multiple of ``precision``, x ∈ bounds, with privacy loss at x ≤ l.

        The contract of dp_accounting's recursive bisection, computed with a chord start and Newton steps
        (the loss is convex and decreasing in x here), then an exact check of the two neighbouring grid points.
        """
        ls = np.asarray(privacy_losses, dtype=np.float64)
        n = len(ls)
        if n == 0:
            return np.asarray([])
        b0, b1 = float(bounds[0]), float(bounds[1])
        if b1 - b0 <= precision:
            return np.repeat(np.floor(b1 / precision) * precision, n)
        # chord start from a coarse grid (the loss is decreasing: flip for np.interp)
        grid = np.linspace(b0, b1, 4097)
        gl = self._privacy_losses_vec(grid)
        x = np.interp(ls, gl[::-1], grid[::-1])
        for _ in range(8):
            val, slope = self._loss_and_slope(x)
            step = np.where(slope < 0, (val - ls) / np.where(slope < 0, slope, -1.0), 0.0)
            x = np.clip(x - step, b0, b1)
        out = np.ceil(x / precision - 1e-9) * precision
        for _ in range(64):  # fix-up: loss(out) ≤ l and loss(out − precision) > l
            too_small = self._privacy_losses_vec(out) > ls
            out = np.where(too_small, out + precision, out)
            prev = out - precision
            too_big = (prev >= b0) & (self._privacy_losses_vec(prev) <= ls)
            out = np.where(too_big & ~too_small, prev, out)
            if not (too_small.any() or too_big.any()):
                break
        else:  # Newton did not get within a few grid points: bisection for the stragglers (never seen)
            bad = (self._privacy_losses_vec(out) > ls) | (
                (out - precision >= b0) & (self._privacy_losses_vec(out - precision) <= ls))
            out[bad] = self._bisect(ls[bad], b0, b1, precision)
        return np.minimum(out, np.floor(b1 / precision) * precision)

    def _loss_and_slope(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        consts = self._precompute_privacy_loss_constants
        sign = 1.0 if self.adjacency_type == _plm.AdjacencyType.ADD else -1.0
        s = self.sensitivities / self._variance
        a = consts[None, :] + sign * np.multiply.outer(x, s)
        amax = a.max(axis=1)
        w = np.exp(a - amax[:, None])
        tot = w.sum(axis=1)
        lse = amax + np.log(tot)
        dlse = sign * (w @ s) / tot
        return (-lse, -dlse) if sign > 0 else (lse, dlse)

    def _bisect(self, ls: np.ndarray, b0: float, b1: float, precision: float) -> np.ndarray:
        lo = np.full(len(ls), b0)
        hi = np.full(len(ls), b1)
        active = (hi - lo) > precision
        while active.any():
            idx = np.flatnonzero(active)
            mid = (lo[idx] + hi[idx]) / 2
            right = ls[idx] < self._privacy_losses_vec(mid)
            lo[idx] = np.where(right, mid, lo[idx])
            hi[idx] = np.where(right, hi[idx], mid)
            active[idx] = (hi[idx] - lo[idx]) > precision
        return np.ceil(hi / precision) * precision


class FastSampledGaussianPrivacyLoss(_plm.GaussianPrivacyLoss):
    """dp_accounting's (Poisson-subsampled) Gaussian privacy loss with a vectorised inverse and δ.

    ``get_delta_for_epsilon`` is dp_accounting's formula — δ(ε) = μ_upper(X ≤ x) − e^ε μ_lower(X ≤ x) at
    x = the inverse loss, −expm1(ε) below log(1 − q) (REMOVE), 0 above −log(1 − q) (ADD) — with the scalar
    ``inverse_privacy_loss`` loop replaced by its closed form on arrays (REMOVE: the loss without subsampling is
    log(1 + (e^ℓ − 1)/q), then x = −Δ/2 − ℓ₀σ²/Δ; ADD: ℓ₀ = −log(1 + (e^{−ℓ} − 1)/q), x = Δ/2 − ℓ₀σ²/Δ).
    tests/test_privacy_accounting.py checks both against the original on a grid of ε."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sampling_prob = float(self.sampling_prob)  # what _connect_dots_pmf reads (as on mixtures)

    def _is_remove(self) -> bool:
        if self.adjacency_type == _plm.AdjacencyType.REMOVE:
            return True
        if self.adjacency_type == _plm.AdjacencyType.ADD:
            return False
        raise ValueError(f"{self.adjacency_type} adjacency type is not supported here")

    def inverse_privacy_losses(self, privacy_losses: Any) -> np.ndarray:
        """The largest x with loss at x ≥ ℓ, for each ℓ inside the loss's range (log(1 − q), ∞) (REMOVE) or
        (−∞, −log(1 − q)) (ADD); ±∞ at the asymptote."""
        ls = np.asarray(privacy_losses, dtype=np.float64)
        q = self._sampling_prob
        d = float(self.sensitivity)
        s2 = float(self._standard_deviation) ** 2
        remove = self._is_remove()
        with np.errstate(divide="ignore", invalid="ignore"):
            if q == 1.0:
                l0 = ls
            elif remove:
                l0 = ls - math.log(q) + np.log1p(-(1.0 - q) * np.exp(-ls))
            else:
                l0 = -(-ls - math.log(q) + np.log1p(-(1.0 - q) * np.exp(ls)))
        x = -0.5 * d - l0 * s2 / d
        return x if remove else x + d

    def get_delta_for_epsilon(self, epsilon: Any) -> Any:
        scalar = isinstance(epsilon, (int, float, np.floating))
        eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
        deltas = np.zeros_like(eps)
        q = self._sampling_prob
        if q == 1.0:
            inv = np.ones(eps.shape, dtype=bool)
        elif self._is_remove():
            inv = eps > math.log1p(-q)
            deltas[~inv] = -np.expm1(eps[~inv])
        else:
            inv = eps < -math.log1p(-q)
        if inv.any():
            x = self.inverse_privacy_losses(eps[inv])
            deltas[inv] = np.asarray(self.mu_upper_cdf(x), dtype=np.float64) - np.exp(
                eps[inv] + np.asarray(self.mu_lower_log_cdf(x), dtype=np.float64))
        deltas = np.clip(deltas, 0.0, 1.0)
        return float(deltas[0]) if scalar else deltas


#: The connect-the-dots grid is every ``h`` where the upper distribution puts more than this much mass between
#: two points of a coarse grid (step ``COARSE_STEPS·h``), and the coarse grid elsewhere.
FINE_MASS = 1e-13
COARSE_STEPS = 50


def _connect_dots_pmf(loss: Any, h: float) -> Any:
    """dp_accounting's pessimistic connect-the-dots PMF of a monotone privacy loss on an adaptive grid.

    ``_create_pld_pmf_from_monotone_privacy_loss`` uses every multiple of h between the tail bounds; most of
    that range carries almost no mass (a loss range of 80 is 80 000 points at h = 1e-3). Connect-the-dots is
    pessimistic on *any* increasing grid (Doroshenko et al. 2022, Thm 3.4: the discretised pair dominates the
    true pair), so we keep h where the mass is and a coarse step elsewhere; δ values at the grid points are
    dp_accounting's (``get_delta_for_epsilon``), the PMF is ``create_pmf_pessimistic_connect_dots``.
    """
    bounds = loss.connect_dots_bounds()
    lo = math.floor(bounds.epsilon_lower / h)
    hi = math.ceil(bounds.epsilon_upper / h)
    if hi - lo <= 4 * COARSE_STEPS:
        grid = np.arange(lo, hi + 1)
    else:
        coarse = np.unique(np.concatenate([np.arange(lo, hi, COARSE_STEPS), [hi]]))
        eps = coarse * h
        # losses beyond the asymptote log(1 − q) (REMOVE) / −log(1 − q) (ADD) have no inverse: x = ±∞
        q = float(loss._sampling_prob)
        log1m = math.log1p(-q) if q < 1 else -math.inf
        remove = loss.adjacency_type == _plm.AdjacencyType.REMOVE
        valid = eps > log1m + 1e-9 if remove else eps < -log1m - 1e-9
        cdf = np.full(eps.shape, 1.0 if remove else 0.0)
        if valid.any():
            xs = loss.inverse_privacy_losses(eps[valid])
            cdf[valid] = np.asarray(loss.mu_upper_cdf(xs), dtype=np.float64)
        mass = np.abs(np.diff(cdf))
        fine = np.flatnonzero(mass > FINE_MASS)
        pieces = [coarse] + [np.arange(coarse[i], coarse[i + 1] + 1) for i in fine]
        grid = np.unique(np.concatenate(pieces))
    deltas = np.asarray(loss.get_delta_for_epsilon(grid * h), dtype=np.float64)
    return _pld_pmf.create_pmf_pessimistic_connect_dots(h, grid, deltas)


#: Mixture components holding less than this much probability in the tails of the sensitivity distribution
#: are not built (see :func:`mixture_pld`); each composition adds at most this much to δ and to B(p).
MIXTURE_TAIL_MASS = 1e-15


def mixture_pld(
    standard_deviation: float,
    sensitivities: Sequence[float],
    sampling_probs: Sequence[float],
    *,
    value_discretization_interval: float = DEFAULT_DISCRETIZATION,
    both_directions: bool = True,
    tail_mass: float = MIXTURE_TAIL_MASS,
) -> PrivacyLossDistribution:
    """Pessimistic PLD of the mixture-of-Gaussians mechanism: P = Σ_k π_k N(s_k, σ²) against Q = N(0, σ²).

    With ``both_directions=True`` this equals ``from_mixture_gaussian_mechanism(..., use_connect_dots=True)``
    (faster). With ``both_directions=False`` only the REMOVE side — H(P ‖ Q), the one the blow-up needs — is
    built, and the result is marked symmetric: use it for blow-ups only, never for (ε, δ)-DP. On that side the
    sensitivity distribution is first trimmed, pessimistically:

    * the lowest components holding at most ``tail_mass`` in all are moved *up* to the smallest kept
      sensitivity (a stochastically larger shift: the pair is then dominated, see docs/privacy.md);
    * the highest components holding at most ``tail_mass`` are dropped and their mass d becomes privacy loss
      +∞: the pair (P, Q) is a post-processing of ((1−d)·P_kept/(1−d) + d·⊥, Q) with Q(⊥) = 0.

    Without trimming, a component of probability 1e-20 at sensitivity 100 stretches the loss grid to ~10⁶
    points; with it, a secret held by 100 records builds in well under a second.
    """
    if not standard_deviation > 0:
        raise InvalidPrivacyParameter(f"standard_deviation must be positive, got {standard_deviation!r}")
    sens = np.asarray(sensitivities, dtype=np.float64)
    probs = np.asarray(sampling_probs, dtype=np.float64)
    order = np.argsort(sens, kind="stable")
    sens, probs = sens[order], probs[order]
    inf_mass = 0.0
    if not both_directions and tail_mass > 0 and len(sens) > 1:
        nz = probs > 0
        sens, probs = sens[nz], probs[nz]
        low = np.cumsum(probs)
        i_lo = int(np.searchsorted(low, tail_mass, side="right"))  # components [0, i_lo) hold ≤ tail_mass
        i_lo = min(i_lo, len(probs) - 1)
        if i_lo > 0:
            probs[i_lo] += probs[:i_lo].sum()
            sens, probs = sens[i_lo:], probs[i_lo:]
        high = np.cumsum(probs[::-1])
        n_hi = int(np.searchsorted(high, tail_mass, side="right"))
        n_hi = min(n_hi, len(probs) - 1)
        if n_hi > 0 and sens[: len(probs) - n_hi].max() > 0:
            inf_mass = float(probs[len(probs) - n_hi:].sum())
            sens, probs = sens[: len(probs) - n_hi], probs[: len(probs) - n_hi]
            probs = probs / probs.sum()

    def side(adj: Any) -> Any:
        loss = FastMixtureGaussianPrivacyLoss(
            float(standard_deviation), list(sens), list(probs), pessimistic_estimate=True, adjacency_type=adj,
        )
        return _connect_dots_pmf(loss, float(value_discretization_interval))

    remove = PrivacyLossDistribution(side(_plm.AdjacencyType.REMOVE))
    if both_directions:
        return PrivacyLossDistribution(remove._pmf_remove, side(_plm.AdjacencyType.ADD))
    if inf_mass > 0:
        only_inf = PrivacyLossDistribution.create_from_rounded_probability(
            {0: 0.0}, 1.0, value_discretization_interval, pessimistic_estimate=True)
        remove = remove.compute_mixture(only_inf, 1.0 - inf_mass)
    return remove


# ------------------------------------------------------------------------------------------------ leaf PLDs


@functools.lru_cache(maxsize=256)
def _base_pld_cached(key: str, h: float, both: bool) -> PrivacyLossDistribution:
    """The PLD of ONE application of a (non-Gaussian, not subsampled) leaf event, cached by its canonical JSON."""
    return _leaf_pld(event_from_dict(json.loads(key)), 1, h, both)


@functools.lru_cache(maxsize=32)
def _sampled_base_cached(key: str, h: float, count: int) -> PrivacyLossDistribution:
    """The PLD of ONE application of a Poisson-subsampled leaf composed ``count`` times (its tail truncation
    depends on the count, :data:`SAMPLED_TAIL_MASS`), cached by its canonical JSON."""
    return _subsampled_pld(event_from_dict(json.loads(key)), count, h)


def _base_for(e: DpEvent, count: int, h: float, both: bool) -> PrivacyLossDistribution:
    """The PLD of one application of leaf ``e`` at interval ``h`` (to be self-composed ``count`` times)."""
    if _is_subsampled(e):
        return _sampled_base_cached(event_key(e), float(h), int(count))
    return _base_pld_cached(event_key(e), float(h), both)


def _is_subsampled(e: DpEvent) -> bool:
    return isinstance(e, _dpe.PoissonSampledDpEvent) and isinstance(
        e.event, (_dpe.GaussianDpEvent, _dpe.LaplaceDpEvent))


def _subsampled_pld(e: DpEvent, count: int, h: float) -> PrivacyLossDistribution:
    """Pessimistic PLD of one application of a Poisson-subsampled Gaussian or Laplace event (add-or-remove-one:
    REMOVE and ADD sides, dp_accounting's ``sampling_prob`` privacy losses).

    Gaussian: :class:`FastSampledGaussianPrivacyLoss` on :func:`_connect_dots_pmf`'s adaptive grid. A step's loss
    holds almost all its mass within a few ×1e-4 nats of 0 and a thin tail reaching nats (the sampled record):
    at the fine interval the accuracy rule asks for (:func:`pld_interval`), dp_accounting's builder would invert
    the loss once per grid point in Python, 10⁵–10⁶ times. The noise tails are truncated at
    :data:`SAMPLED_TAIL_MASS`/``count`` (never tighter than dp_accounting's default e⁻⁵⁰); the truncated mass
    becomes loss +∞, so δ grows by at most SAMPLED_TAIL_MASS over the ``count`` steps.
    Laplace: dp_accounting's ``from_laplace_mechanism(..., sampling_prob=q)``."""
    q = float(e.sampling_probability)
    inner = e.event
    if isinstance(inner, _dpe.LaplaceDpEvent):
        return _pld.from_laplace_mechanism(float(inner.noise_multiplier), value_discretization_interval=h,
                                           sampling_prob=q)
    bound = max(-50.0, math.log(SAMPLED_TAIL_MASS / max(int(count), 1)))

    def side(adj: Any) -> Any:
        loss = FastSampledGaussianPrivacyLoss(float(inner.noise_multiplier), pessimistic_estimate=True,
                                              log_mass_truncation_bound=bound, sampling_prob=q, adjacency_type=adj)
        return _connect_dots_pmf(loss, float(h))

    remove = side(_plm.AdjacencyType.REMOVE)
    if q == 1.0:
        return PrivacyLossDistribution(remove)
    return PrivacyLossDistribution(remove, side(_plm.AdjacencyType.ADD))


def _leaf_pld(e: DpEvent, count: int, h: float, both: bool) -> PrivacyLossDistribution:
    if isinstance(e, _dpe.GaussianDpEvent):
        return _pld.from_gaussian_mechanism(float(e.noise_multiplier) / math.sqrt(count),
                                            value_discretization_interval=h)
    if isinstance(e, _dpe.LaplaceDpEvent):
        lap = _pld.from_laplace_mechanism(float(e.noise_multiplier), value_discretization_interval=h)
        return lap if count == 1 else lap.self_compose(count)
    if isinstance(e, _dpe.MixtureOfGaussiansDpEvent):
        sens, probs = _mog_support(e)
        zero = 1.0 - sum(probs)
        if zero > 0:
            sens, probs = [0.0, *sens], [zero, *probs]
        pld = mixture_pld(float(e.standard_deviation), sens, probs, value_discretization_interval=h,
                          both_directions=both)
        return pld if count == 1 else pld.self_compose(count)
    if _is_subsampled(e):
        base = _subsampled_pld(e, count, h)
        return base if count == 1 else base.self_compose(count)
    raise PrivacyError(
        f"privtext cannot account for {type(e).__name__}: supported events are Gaussian, Laplace, "
        "MixtureOfGaussians, PoissonSampled(Gaussian|Laplace), SelfComposed, Composed, NoOp"
    )


def _gaussian_loss_span(ratio: float) -> float:
    """Nats spanned by the privacy loss of a Gaussian whose sensitivity/σ is ``ratio``: the loss is
    N(±ratio²/2, ratio²), so about ratio² + 2·T·ratio over T standard deviations each side."""
    return ratio * ratio + 2.0 * _TAIL_SIGMAS * ratio


def _one_span(e: DpEvent) -> float:
    """An upper estimate of the nats one application of leaf ``e`` spans (0 for leaves without noise)."""
    inner = e.event if isinstance(e, _dpe.PoissonSampledDpEvent) else e
    if isinstance(inner, _dpe.GaussianDpEvent) and inner.noise_multiplier > 0:
        return _gaussian_loss_span(1.0 / float(inner.noise_multiplier))
    if isinstance(inner, _dpe.LaplaceDpEvent) and inner.noise_multiplier > 0:
        return 2.0 / float(inner.noise_multiplier)
    if isinstance(inner, _dpe.MixtureOfGaussiansDpEvent) and inner.standard_deviation > 0:
        sens, _ = _mog_support(inner)
        return _gaussian_loss_span(max(sens, default=0.0) / float(inner.standard_deviation))
    return 0.0


def loss_span(leaves: Leaves) -> float:
    """The nats spanned by the support of the *untruncated* composition of ``leaves``: each leaf's span (one
    application, :func:`_one_span`) times its count, since composition adds losses.

    This is the width of the sum of the supports, not of the PMF dp_accounting keeps: its self-composition
    truncates both tails at 1e-15 of mass (Chernoff bounds), so T steps of a subsampled Gaussian span about
    √T·(the spread of one step) rather than T·(one step's support). Only the blow-up PLDs (:func:`blowup_of`)
    and compositions holding mixture-of-Gaussians events (a handful of compositions each) are sized with it; other
    (ε, δ) PLDs are sized by the rules of :func:`pld_interval`."""
    span = 0.0 if math.isinf(leaves.gaussian_z) else _gaussian_loss_span(1.0 / leaves.gaussian_z)
    for e, c in leaves.others:
        span += _one_span(e) * int(c)
    return span


#: the (ε, δ) accuracy rule of :func:`pld_interval`: the discretisation may move ε by about this fraction of
#: itself (estimated from the composed loss's mean and variance). Measured over σ ∈ [0.5, 5], q ∈ [1e-4, 0.25],
#: T ∈ [10, 1e5] (tests/test_accounting_grid.py, benchmarks/accounting.py): ε then lies within 0.1 % above
#: dp_accounting's on a grid 4× finer.
ACCURACY = 1e-3

#: the z of the Gaussian approximation ε ≈ m + z·√V used by the accuracy rule (z ≈ 4 near δ = 1e-5; the
#: rule depends on it only where the mean m dominates ε)
_ACCURACY_Z = 4.0

#: composed (ε, δ) PLDs estimated above this many points are built on a coarser interval when the accuracy rule
#: allows it (ε in the hundreds or thousands: σ = 0.5, q = 0.25 over 10⁵ steps would be 6·10⁶ points at 1e-3)
FAST_PLD_POINTS = 1_000_000

#: mass of the noise distribution's tails a Poisson-subsampled leaf's PLD may leave out, over all its count
#: applications (dp_accounting's ``log_mass_truncation_bound``, per application: this / count). It becomes
#: privacy loss +∞, i.e. it is added to δ (pessimistic), and shortens the thin upper tail of each step's loss.
SAMPLED_TAIL_MASS = 1e-14

#: Chernoff truncation of dp_accounting's self-composition (its default), used to estimate composed sizes
_SELF_COMPOSE_TAIL = 1e-15


def _pmf_stats(pmf: Any, count: int) -> tuple[float, float, float]:
    """(mean, variance of the finite privacy loss, estimated points after ``count`` self-compositions) of one side.

    The estimate mirrors dp_accounting's ``compute_self_convolve_bounds``: its Chernoff orders are k/n for
    k = 1 … 20 (n the input length), so each tail reaches c·k·v/(2n) + log(2/τ)·n/k points past the mean
    (v the variance in grid steps², Gaussian moment generating function) at the best such k."""
    d = pmf.to_dense_pmf() if isinstance(pmf, _pld_pmf.SparsePLDPmf) else pmf
    probs = np.asarray(d._probs, dtype=np.float64)
    n = probs.size
    tot = float(probs.sum())
    h = float(d._discretization)
    if n <= 1 or tot <= 0:
        return float(d._lower_loss) * h, 0.0, float(n * count)
    idx = np.arange(n, dtype=np.float64)
    m = float(probs @ idx) / tot
    v_idx = float(probs @ (idx - m) ** 2) / tot
    mean, var = (m + float(d._lower_loss)) * h, v_idx * h * h
    if count == 1:
        return mean, var, float(n)
    log_term = math.log(2.0 / _SELF_COMPOSE_TAIL)
    k = 20.0 if v_idx <= 0 else min(20.0, max(1.0, math.sqrt(2.0 * log_term / (count * v_idx)) * n))
    tail = count * k * v_idx / (2.0 * n) + log_term * n / k
    return mean, var, float(min(2.0 * tail + 1.0, (n - 1) * count + 1.0))


def _composition_stats(leaves: Leaves, h: float) -> tuple[list[float], list[float], float, float]:
    """The (ε, δ) PLD of ``leaves`` at interval ``h``, before it is composed: per side (REMOVE, ADD) the mean and
    variance of the composed privacy loss (sums over leaves of count × one discretised application's), C the
    number of discretised applications (the merged Gaussian counts once), and the estimated points of the
    composed PMF (sizes add under composition; the larger side)."""
    mean = [0.0, 0.0]
    var = [0.0, 0.0]
    pts = [0.0, 0.0]
    n_apps = 0.0
    if not math.isinf(leaves.gaussian_z):
        mu = 1.0 / leaves.gaussian_z
        mean, var = [mu * mu / 2] * 2, [mu * mu] * 2
        pts = [2.0 * 9.0 * mu / h + 1.0] * 2
        n_apps = 1.0
    for e, c in leaves.others:
        base = _base_for(e, int(c), h, True)
        for i, pmf in enumerate((base._pmf_remove, base._pmf_add)):
            m, v, p = _pmf_stats(pmf, int(c))
            mean[i] += int(c) * m
            var[i] += int(c) * v
            pts[i] += p
        n_apps += int(c)
    return mean, var, max(n_apps, 1.0), max(pts)


def _accurate_interval(mean: Sequence[float], var: Sequence[float], n_apps: float) -> float:
    """The largest interval at which the discretisation moves ε by about :data:`ACCURACY`·ε (see
    :func:`pld_interval`): ε ≈ m + z·√V on each side, connect-the-dots adds ≤ C·h²/4 to V, so each side's ε
    grows by z·(√(V + C·h²/4) − √V); that must stay under ACCURACY·max(ε) (ε is the larger side's)."""
    eps = max(max(m, 0.0) + _ACCURACY_Z * math.sqrt(max(v, 0.0)) for m, v in zip(mean, var, strict=True))
    if not eps > 0:
        return math.inf
    budget = ACCURACY * eps / _ACCURACY_Z
    out = math.inf
    for v in var:
        r = math.sqrt(max(v, 0.0))
        out = min(out, 2.0 * math.sqrt(((r + budget) ** 2 - r * r) / n_apps))
    return out


def _round_down(x: float) -> float:
    """``x`` rounded down to 3 significant digits (readable intervals, shared cache keys)."""
    if not x > 0 or math.isinf(x):
        return x
    e = math.floor(math.log10(x)) - 2
    return float(f"{math.floor(x / 10.0**e)}e{e}")


def pld_interval(leaves: Leaves, requested: float = DEFAULT_DISCRETIZATION, *, refine: bool = True) -> float:
    """The value discretisation interval :func:`composed_pld` uses for ``leaves`` (a deterministic function of the
    events and ``requested``, so calibration and the ledger build the same PLD).

    With ``refine=False`` (blow-up PLDs), and for compositions holding a mixture-of-Gaussians leaf (secret-level
    events: a handful of wide compositions, whose PLD builds cost up to seconds each): ``requested``, or the
    coarser interval at which the support of the untruncated composition (:func:`loss_span`) has
    :data:`MAX_PLD_POINTS` points. That happens only for near-zero noise or long compositions, where a coarser
    pessimistic PLD stays an upper bound.

    With ``refine=True`` ((ε, δ) PLDs), starting from ``requested`` (coarser only where one application of each
    leaf would not fit in :data:`MAX_PLD_POINTS` points: near-zero noise, e.g. σ ≈ 0.001), three rules, applied
    to the leaves' discretised PLDs at the current interval until none changes it:

    * **accuracy** (finer): connect-the-dots moves each application's mass between neighbouring grid points,
      adding up to h²/4 to the variance of the privacy loss per application, so C applications add ≤ C·h²/4 to
      the composed loss's variance V. With ε ≈ m + z·√V (m its mean, z = 4), the interval is the largest at
      which that moves ε by :data:`ACCURACY` of itself (:func:`_accurate_interval`), i.e. h ≈ 0.09·√(V/C)
      where the spread dominates ε. A Poisson-subsampled step's loss is narrow — its standard deviation is
      about q·√(e^{1/σ²} − 1) nats, 2.1e-3 at σ = 2, q = 0.004 — so 1e-3 overstated ε over 10⁴ such steps by
      2 % (0.801 vs 0.786); at q = 1e-4 the interval goes down to ~1e-6 nats. The grid is adaptive
      (:func:`_connect_dots_pmf`), so only the region that holds the mass is evaluated that finely.
    * **memory** (coarser, whatever the accuracy rule says): when the composed PMF would exceed
      :data:`MAX_PLD_POINTS` points (sizes estimated as dp_accounting's truncation bounds give them,
      :func:`_pmf_stats`). That takes near-zero noise: 40 steps at q = 0.5 and σ = 0.05 (ε ≈ 6600) would be
      1.1e7 points at 1e-3.
    * **speed** (coarser, never beyond the accuracy rule): when it would exceed :data:`FAST_PLD_POINTS`
      (ε in the hundreds or more: σ = 0.5, q = 0.25 over 10⁵ steps, ε ≈ 24 700, gets 6e-3; 40 steps at q = 0.5
      and σ = 0.1, ε ≈ 1670, get 2.75e-3).

    Intervals are rounded down to 3 significant digits. Every interval gives a pessimistic PLD (an upper bound
    on ε): the rules only trade tightness against time and memory."""
    h = float(requested)
    if not refine or any(isinstance(e, _dpe.MixtureOfGaussiansDpEvent) for e, _ in leaves.others):
        return max(h, loss_span(leaves) / MAX_PLD_POINTS)
    one = (0.0 if math.isinf(leaves.gaussian_z) else _gaussian_loss_span(1.0 / leaves.gaussian_z)) + sum(
        _one_span(e) for e, _ in leaves.others)
    floor = one / MAX_PLD_POINTS  # finer than this, one application alone would not fit
    h = max(h, floor)
    for _ in range(8):
        mean, var, n_apps, pts = _composition_stats(leaves, h)
        h_acc = _accurate_interval(mean, var, n_apps)
        if pts > MAX_PLD_POINTS:
            h_new = _round_down(h * 1.1 * pts / MAX_PLD_POINTS)
            floor = max(floor, h_new)
        elif h > 1.25 * h_acc and h > floor:
            h_new = max(_round_down(h_acc), floor)
        elif pts > FAST_PLD_POINTS and h_acc > 1.25 * h:
            h_new = _round_down(min(h_acc, h * pts / FAST_PLD_POINTS))
        else:
            break
        if h_new == h:
            break
        h = h_new
    return h


def composed_pld(
    leaves: Leaves, *, value_discretization_interval: float = DEFAULT_DISCRETIZATION, both_directions: bool = True,
    refine: bool | None = None,
) -> PrivacyLossDistribution | None:
    """The PLD of a flattened event (None when nothing private was released; callers handle non-private), at
    :func:`pld_interval` (``refine`` defaults to ``both_directions``: the (ε, δ) PLDs get the accuracy rule,
    the REMOVE-only blow-up PLDs keep ``value_discretization_interval`` unless the loss spans too many points)."""
    if refine is None:
        refine = both_directions
    h = pld_interval(leaves, value_discretization_interval, refine=refine)
    plds = []
    if not math.isinf(leaves.gaussian_z):
        plds.append(_pld.from_gaussian_mechanism(leaves.gaussian_z, value_discretization_interval=h))
    for e, c in leaves.others:
        base = _base_for(e, int(c), h, both_directions)
        plds.append(base if int(c) == 1 else base.self_compose(int(c)))
    if not plds:
        return None
    out = plds[0]
    for q in plds[1:]:
        out = out.compose(q)
    return out


# -------------------------------------------------------------------------------------------------- queries


def _as_leaves(events: DpEvent | Sequence[DpEvent] | Leaves) -> Leaves:
    return events if isinstance(events, Leaves) else flatten(events)


def _zero_noise(lv: Leaves) -> bool:
    """Some mixture leaf adds no noise (the secret is revealed whenever sampled)."""
    return any(isinstance(e, _dpe.MixtureOfGaussiansDpEvent) and not e.standard_deviation > 0 for e, _ in lv.others)


def epsilon_for_delta(
    events: DpEvent | Sequence[DpEvent] | Leaves, delta: float, *,
    value_discretization_interval: float = DEFAULT_DISCRETIZATION,
) -> float:
    """ε at δ of the composition of ``events`` (add-or-remove-one neighbours), from dp_accounting's PLD."""
    check_delta(delta)
    lv = _as_leaves(events)
    if lv.non_private or _zero_noise(lv):
        return math.inf
    pld = composed_pld(lv, value_discretization_interval=value_discretization_interval)
    if pld is None:
        return 0.0
    return float(pld.get_epsilon_for_delta(float(delta)))


def delta_for_epsilon(
    events: DpEvent | Sequence[DpEvent] | Leaves, epsilon: float, *,
    value_discretization_interval: float = DEFAULT_DISCRETIZATION,
) -> float:
    lv = _as_leaves(events)
    if lv.non_private or _zero_noise(lv):
        return 1.0
    pld = composed_pld(lv, value_discretization_interval=value_discretization_interval)
    if pld is None:
        return 0.0
    return float(pld.get_delta_for_epsilon(float(epsilon)))


def gdp_mu_of(events: DpEvent | Sequence[DpEvent] | Leaves) -> float:
    """Exact μ-GDP of a composition of Gaussian events: μ = (Σ (Δ/σ_i)²)^½ (Dong, Roth & Su 2019, Cor 3.3).

    Refuses other events: μ-GDP is not exact (nor, in general, finite) for Laplace or mixture mechanisms."""
    lv = _as_leaves(events)
    if lv.non_private:
        return math.inf
    if lv.others:
        names = sorted({type(e).__name__ for e, _ in lv.others})
        raise PrivacyError(
            f"a μ-GDP budget can only account for Gaussian releases; got {', '.join(names)}: use an (ε, δ) "
            "budget (privacy.epsilon/delta) for these mechanisms"
        )
    return lv.gaussian_mu


def pld_remove_arrays(pld: PrivacyLossDistribution) -> tuple[np.ndarray, np.ndarray, float]:
    """(losses ascending, probabilities, infinity mass) of the REMOVE side of a PLD.

    Reads dp_accounting's dense PMF fields (``_lower_loss``, ``_probs``, ``_infinity_mass``, ``_discretization``,
    stable since 0.4); the tests check the result against the public ``get_delta_for_epsilon``."""
    pmf = pld._pmf_remove.to_dense_pmf()
    probs = np.asarray(pmf._probs, dtype=np.float64)
    losses = (np.arange(probs.size) + pmf._lower_loss) * pmf._discretization
    return losses, probs, float(pmf._infinity_mass)


def blowup_from_pld(pld: PrivacyLossDistribution, p: float) -> float:
    """``min_{ε ≥ 0} e^ε p + H_{e^ε}`` on the REMOVE side of ``pld`` (exact for the discretised PLD; the
    minimum of this convex piecewise-linear function of e^ε is at ε = 0 or at a support point)."""
    return blowup_argmin(pld, p)[0]


def blowup_argmin(pld: PrivacyLossDistribution, p: float) -> tuple[float, float]:
    """(B(p), the minimising ε) — see :func:`blowup_from_pld`."""
    losses, probs, inf_mass = pld_remove_arrays(pld)
    cap = math.log(1.0 / p)  # beyond, e^ε p > 1 ≥ B
    keep = losses > 0
    l_pos, w_pos = losses[keep], probs[keep]
    # suffix sums over losses strictly above each candidate ε = l_k
    u = np.concatenate([np.cumsum(w_pos[::-1])[::-1][1:], [0.0]])
    v = np.concatenate([np.cumsum((w_pos * np.exp(-l_pos))[::-1])[::-1][1:], [0.0]])
    cand = l_pos <= cap
    best, arg = p + inf_mass + float(np.sum(w_pos * -np.expm1(-l_pos))), 0.0  # ε = 0
    if cand.any():
        t = np.exp(l_pos[cand])
        vals = t * p + inf_mass + u[cand] - t * v[cand]
        i = int(np.argmin(vals))
        if vals[i] < best:
            best, arg = float(vals[i]), float(l_pos[cand][i])
    return float(min(1.0, max(p, best))), arg


#: a mixture component whose shift is at least this many σ is perfectly distinguishable from N(0, σ²) (the
#: overlap is ~Φ(−20) ≈ 3e-89): for such events the "revealed whenever sampled" bound is exact
SEPARATED_SHIFTS = 40.0
#: largest loss grid of a single-release mixture PLD; beyond it the discretisation is coarsened (still pessimistic)
MAX_GRID_POINTS = 200_000


def sampled_upper_bound(events: DpEvent | Sequence[DpEvent] | Leaves, p: float) -> float:
    """``1 − Π π₀^c · (1 − p)``: the blow-up if every release whose secret was sampled revealed it.

    For a composition of mixtures with Pr[S = 0] = π₀ (count c each): P^⊗ = Π π₀^c · Q^⊗ + (1 − Π π₀^c)·R, so
    any event of Q-probability ≤ p has P-probability ≤ Π π₀^c·p + 1 − Π π₀^c. Valid for every σ; exact when
    the shifts are far apart (≥ :data:`SEPARATED_SHIFTS` σ) and for σ = 0. Gaussian or other leaves make it 1."""
    lv = _as_leaves(events)
    if lv.non_private or not math.isinf(lv.gaussian_z):
        return 1.0
    log_keep = 0.0
    for e, c in lv.others:
        if not isinstance(e, _dpe.MixtureOfGaussiansDpEvent):
            return 1.0
        _, probs = _mog_support(e)
        pi0 = max(0.0, 1.0 - sum(probs))
        if pi0 <= 0:
            return 1.0
        log_keep += c * math.log(pi0)
    return float(min(1.0, -math.expm1(log_keep) + math.exp(log_keep) * p))


def _separated(lv: Leaves) -> bool:
    if lv.non_private or not math.isinf(lv.gaussian_z) or not lv.others:
        return False
    for e, _ in lv.others:
        if not isinstance(e, _dpe.MixtureOfGaussiansDpEvent) or not e.standard_deviation > 0:
            return False
        sens, _ = _mog_support(e)
        if min(sens) / float(e.standard_deviation) < SEPARATED_SHIFTS:
            return False
    return True


def _grid_interval(lv: Leaves, h: float) -> float:
    """``h``, coarsened so that no single-release mixture PLD exceeds :data:`MAX_GRID_POINTS` (a deterministic
    function of the events, so calibration and the ledger use the same grid)."""
    span = 0.0
    for e, _ in lv.others:
        if isinstance(e, _dpe.MixtureOfGaussiansDpEvent) and e.standard_deviation > 0:
            sens, _ = _mog_support(e)
            if sens:
                a = max(sens) / float(e.standard_deviation)
                span = max(span, a * (20.0 + a))  # loss range over ±10σ around the shifts
    return max(h, span / MAX_GRID_POINTS)


def blowup_of(
    events: DpEvent | Sequence[DpEvent] | Leaves, p: float, *,
    value_discretization_interval: float = BLOWUP_DISCRETIZATION,
) -> float:
    """The posterior bound B(p) of the composition of ``events`` (P = with the secret, Q = without).

    Gaussian-only compositions use Lemma 3.2 in closed form (exact); mixtures whose shifts are all ≥ 40σ use the
    exact "revealed when sampled" value (:func:`sampled_upper_bound`); anything else uses the pessimistic PLD
    (an upper bound on the true blow-up), capped by :func:`sampled_upper_bound`."""
    check_prior(p)
    lv = _as_leaves(events)
    if lv.non_private:
        return 1.0
    if lv.empty:
        return float(p)
    if lv.only_gaussian:
        return float(r_from_mu_p(p, lv.gaussian_mu))
    ub = sampled_upper_bound(lv, p)
    if _separated(lv) or _zero_noise(lv):
        return ub
    h = _grid_interval(lv, float(value_discretization_interval))
    pld = composed_pld(lv, value_discretization_interval=h, both_directions=False)
    assert pld is not None
    return min(ub, blowup_from_pld(pld, float(p)))


def blowup_lower_bound(events: DpEvent | Sequence[DpEvent] | Leaves, p: float) -> float | None:
    """A cheap *lower* bound on B(p) for T releases of one mixture event (None for other compositions).

    The test "sum of the T outputs > σ√T·Φ⁻¹(1−p)" has level p under Q, and power
    E[Φ(S_T·Δ/(σ√T) + Φ⁻¹(p))] under P, S_T the sum of T independent copies of S. B(p) is the best power at
    level p, so this is at most B(p). Calibration uses it to skip PLDs far on the failing side (tiny σ, where a
    PLD would need millions of grid points)."""
    got = _single_mixture(_as_leaves(events))
    if got is None:
        return None
    pmf, sigma, count = got
    kmax = len(pmf) - 1
    total = np.ones(1)
    base, n = pmf, int(count)
    while n:  # binary powering of the convolution
        if n & 1:
            total = np.convolve(total, base)
        n >>= 1
        if n:
            base = np.convolve(base, base)
        total = total[: 1 + kmax * int(count)]
    total = np.clip(total, 0, None)
    k = np.arange(total.size)
    z = sigma * math.sqrt(count)
    return float(np.dot(total, ndtr(k / z + ndtri(p))))


def _single_mixture(lv: Leaves) -> tuple[np.ndarray, float, int] | None:
    """(pmf over integer shifts 0..K, σ, count) when the composition is ``count`` copies of one mixture event."""
    if lv.non_private or not math.isinf(lv.gaussian_z) or len(lv.others) != 1:
        return None
    e, count = lv.others[0]
    if not isinstance(e, _dpe.MixtureOfGaussiansDpEvent) or not e.standard_deviation > 0:
        return None
    sens, probs = _mog_support(e)
    if not sens or any(abs(s_ - round(s_)) > 1e-9 for s_ in sens):
        return None
    pmf = np.zeros(round(max(sens)) + 1)
    pmf[0] = max(0.0, 1.0 - sum(probs))
    for s_, q in zip(sens, probs, strict=True):
        pmf[round(s_)] += q
    return pmf, float(e.standard_deviation), int(count)


def convexity_upper_bound(events: DpEvent | Sequence[DpEvent] | Leaves, p: float, *, grid: int = 256) -> float:
    """A cheap *upper* bound on B(p) for T releases of one mixture event (1.0 for other compositions).

    Write P^⊗T = a·Q^⊗T + (1 − a)·R with a = Pr[S_1 = … = S_T = 0] and R the mixture of N(s, σ²I) over s ≠ 0.
    Then H_{γ'}(P^⊗T ‖ Q^⊗T) = (1 − a)·H_γ(R ‖ Q^⊗T) with γ = (γ' − a)/(1 − a) (exact: amplification by
    sampling), and by joint convexity H_γ(R ‖ Q^⊗T) ≤ Σ_{s≠0} π(s)/(1 − a)·δ_G(log γ; ‖s‖/σ), with δ_G of
    Remark C.1 and ‖s‖² = Σ_t S_t² — as if the adversary also learnt which records were sampled. Minimised over
    a grid of ε' = log γ' ≥ 0 (any ε' gives a valid bound). Exact for one holder and one release; tight when the
    shift is almost deterministic."""
    got = _single_mixture(_as_leaves(events))
    if got is None:
        return 1.0
    pmf, sigma, count = got
    sq = np.zeros((len(pmf) - 1) ** 2 + 1)
    sq[np.arange(len(pmf)) ** 2] = pmf
    total, base, n = np.ones(1), sq, count
    while n:
        if n & 1:
            total = np.clip(_fftconv(total, base), 0, None)
        n >>= 1
        if n:
            base = np.clip(_fftconv(base, base), 0, None)
    a = float(total[0])
    keep = total > 1e-18
    keep[0] = False
    dropped = float(total[1:][~keep[1:]].sum())
    v = np.flatnonzero(keep)
    w = total[keep]
    root = np.sqrt(v)
    if root.size > 1024:  # bin ‖s‖ to at most 1024 values, each rounded up (δ_G grows with μ: still an upper bound)
        edges = np.linspace(root[0], root[-1], 1025)
        idx = np.searchsorted(edges, root, side="left")
        w = np.bincount(idx, weights=w, minlength=edges.size)
        nz = w > 0
        root, w = edges[nz], w[nz]
    mus = root / sigma
    eps_out = np.linspace(0.0, math.log(1.0 / p), grid)
    eps_in = np.log((np.exp(eps_out) - a) / (1.0 - a)) if a < 1 else eps_out
    dg = np.asarray(gdp_delta(eps_in[:, None], mus[None, :]), dtype=np.float64) if mus.size else np.zeros((grid, 0))
    vals = np.exp(eps_out) * p + dg @ w + dropped
    return float(min(1.0, vals.min()))


def _fftconv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if min(a.size, b.size) < 64:
        return np.convolve(a, b)
    from scipy.signal import fftconvolve

    return fftconvolve(a, b)


def worst_gaussian_upper_bound(events: DpEvent | Sequence[DpEvent] | Leaves, p: float) -> float:
    """B(p) of N(K·Δ, σ²)^⊗T — every mixture shift replaced by its largest value K (valid; 1.0 otherwise)."""
    got = _single_mixture(_as_leaves(events))
    if got is None:
        return 1.0
    pmf, sigma, count = got
    return float(r_from_mu_p(p, math.sqrt(count) * (len(pmf) - 1) / sigma))


#: proven facts "B(p) ≤ r for this mixture at σ ≥ s over ≤ c releases": (shifts, probs, p, r) -> [(c, s, bound)]
_GLOBAL_CERTIFICATES: dict[tuple, list[tuple[int, float, float]]] = {}
_CERT_SCOPE: contextvars.ContextVar[dict[tuple, list[tuple[int, float, float]]]] = contextvars.ContextVar(
    "privtext_certificates", default=_GLOBAL_CERTIFICATES)
_MAX_CERT_KEYS = 100_000


@contextlib.contextmanager
def certificate_scope() -> Iterator[None]:
    """Run with a fresh, private certificate store, so that the result (e.g. a calibrated σ) does not depend on
    which checks happened earlier in this process. Calibration of a run's noise uses it: a resumed process
    (which first re-checks its ledger) then computes exactly the σ the first process recorded."""
    token = _CERT_SCOPE.set({})
    try:
        yield
    finally:
        _CERT_SCOPE.reset(token)


def _cert_key(lv: Leaves, p: float, r: float) -> tuple | None:
    if lv.non_private or not math.isinf(lv.gaussian_z) or len(lv.others) != 1:
        return None
    e, _ = lv.others[0]
    if not isinstance(e, _dpe.MixtureOfGaussiansDpEvent):
        return None
    return (tuple(map(float, e.sensitivities)), tuple(map(float, e.sampling_probs)), float(p), float(r))


def secret_check(events: DpEvent | Sequence[DpEvent] | Leaves, p: float, r: float) -> tuple[bool, float, str]:
    """Is B(p) ≤ r for the composition of ``events``? Returns (ok, the bound used, how it was obtained).

    Cheap bounds first, the PLD only when they cannot decide: a lower bound above r refuses
    (``lower_bound``); a cheap upper bound at most r accepts (``upper_bound``); otherwise the value is
    :func:`blowup_of` (``exact``: closed form or pessimistic PLD). It only accepts what a valid upper bound
    proves, and only refuses what a valid lower bound (or the PLD) shows. Calibration (:class:`SecretTarget`) and
    the ledger both decide with this function, so a calibrated σ always passes the ledger.

    Accepted checks of c releases of one mixture at noise σ are remembered (in this process) as certificates:
    B is monotone — larger for more releases, smaller for more noise — so a later check with ≤ c releases and
    ≥ σ noise is accepted at once (``certificate``; the bound reported is the certified one)."""
    lv = _as_leaves(events)
    if lv.only_gaussian or lv.empty or lv.non_private:
        b = blowup_of(lv, p)
        return b <= r, b, "exact"
    key = _cert_key(lv, p, r)
    if key is not None:
        e, c = lv.others[0]
        s_ = float(e.standard_deviation)
        for cc, cs, cb in _CERT_SCOPE.get().get(key, ()):
            if cc >= c and cs <= s_:
                return True, cb, "certificate"
    ok, b, how = _secret_check_uncached(lv, p, r)
    if ok and key is not None:
        store = _CERT_SCOPE.get()
        if len(store) > _MAX_CERT_KEYS:
            store.clear()
        e, c = lv.others[0]
        certs = store.setdefault(key, [])
        certs.append((int(c), float(e.standard_deviation), b))
        if len(certs) > 16:  # keep the most useful: most releases, least noise
            certs.sort(key=lambda t: (-t[0], t[1]))
            del certs[16:]
    return ok, b, how


def _secret_check_uncached(lv: Leaves, p: float, r: float) -> tuple[bool, float, str]:
    lb = blowup_lower_bound(lv, p)
    if lb is not None and lb > r:
        return False, lb, "lower_bound"
    ub = min(sampled_upper_bound(lv, p), worst_gaussian_upper_bound(lv, p), convexity_upper_bound(lv, p))
    if ub <= r:
        return True, ub, "upper_bound"
    b = blowup_of(lv, p)
    return b <= r, b, "exact"


def equivalent_mu(blowup: float, p: float) -> float:
    """The μ whose Gaussian blow-up at p equals ``blowup``: Φ⁻¹(B) − Φ⁻¹(p) (inverse of Lemma 3.2)."""
    if blowup >= 1:
        return math.inf
    return float(ndtri(blowup) - ndtri(p))


def epsilon_closed_form(events: DpEvent | Sequence[DpEvent] | Leaves, delta: float) -> float:
    """Exact ε(δ) for Gaussian-only compositions (Remark C.1); raises for other events."""
    return float(gdp_epsilon(delta, gdp_mu_of(events)))
