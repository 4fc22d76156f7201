"""Noise calibration: one generic search, plus the papers' formulas for comparison.

:func:`calibrate` takes an event builder ``σ ↦ DpEvent`` and a target — :class:`DpTarget` (ε, δ),
:class:`GdpTarget` μ, or :class:`SecretTarget` (p, r) — and returns the smallest σ (to ``rtol``) whose event
meets the target, measured by the same accountant the ledger uses (:mod:`privtext.privacy.accounting`):

* (ε, δ): ε(δ) of dp_accounting's pessimistic PLD (tight up to discretisation);
* μ: exact GDP composition of Gaussian events, μ = (Σ(Δ/σ_i)²)^½;
* (p, r): the blow-up B(p) of the composition (closed form for Gaussians, Lemma 3.2; pessimistic PLD for
  mixtures, SecPE Alg 1 line 6).

Every target is measured on a "μ-like" scale that is close to linear in 1/σ (ε, μ, or the equivalent μ
Φ⁻¹(B) − Φ⁻¹(p)), so a bracketed regula falsi (Illinois) on u = 1/σ converges in a handful of evaluations;
bisection in log σ takes over when a side is infinite. The returned σ carries a relative safety margin of
:data:`SAFETY` (1e-6) above the last σ that met the target, and is checked once more, so that the ledger's
recomputation — the same accountant, possibly over the same events split into separate releases — never fails
by rounding.

Paper formulas (named options of :func:`gaussian_noise_multiplier`):

* ``paper`` — Aug-PE: T Gaussian releases of sensitivity 1 with noise multiplier σ are √T/σ-GDP, so
  σ = √T/μ, with μ from (ε, δ) by Remark C.1 (:func:`~privtext.privacy.conversions.gdp_mu_for_dp`) or from
  (p, r) by Eq 4. This is *exact* for Gaussians (GDP composition and the δ(ε) duality are exact); the PLD
  answer differs only by its pessimistic discretisation (≤ 1e-6 relative).
* ``wasp`` — WASP (Alg 1 line 2, Thm D.4): σ = Δ·√(2 ln(1.25/δ))·√(T−1)/ε for T generation iterations,
  T − 1 of which release private votes. See :func:`wasp_noise_multiplier`.
* :func:`laplace_scale` — pure ε-DP: Laplace scale b = T·Δ/ε for T releases (ε composes additively).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import dp_accounting

from ..errors import InvalidPrivacyParameter, PrivacyError
from .accounting import blowup_of, epsilon_for_delta, equivalent_mu, gdp_mu_of, secret_check
from .conversions import check_delta, check_epsilon, check_pr, gdp_mu_for_dp, mu_from_pr
from .events import DpEvent, flatten

#: relative margin added to the σ that calibration found (see module docstring)
SAFETY = 1e-6


@dataclass(frozen=True)
class DpTarget:
    """(ε, δ)-DP for add-or-remove-one neighbours, measured with dp_accounting's PLD."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_delta(self.delta)
        if self.epsilon == 0:
            raise InvalidPrivacyParameter("epsilon must be positive for an (ε, δ) target")

    def value(self, event: DpEvent | list[DpEvent]) -> float:
        return epsilon_for_delta(event, self.delta)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        return self.value(event) - self.epsilon

    @property
    def gaussian_mu(self) -> float:
        """The μ a Gaussian composition may have to meet this target (Remark C.1)."""
        return float(gdp_mu_for_dp(self.epsilon, self.delta))

    def describe(self) -> str:
        return f"(ε={self.epsilon:g}, δ={self.delta:g})-DP"


@dataclass(frozen=True)
class GdpTarget:
    """μ-GDP, exact for Gaussian events (other events are refused)."""

    mu: float

    def __post_init__(self) -> None:
        if not (self.mu > 0 and math.isfinite(self.mu)):
            raise InvalidPrivacyParameter(f"mu must be a positive finite number, got {self.mu!r}")

    def value(self, event: DpEvent | list[DpEvent]) -> float:
        return gdp_mu_of(event)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        return self.value(event) - self.mu

    @property
    def gaussian_mu(self) -> float:
        return float(self.mu)

    def describe(self) -> str:
        return f"μ={self.mu:g}-GDP"


@dataclass(frozen=True)
class SecretTarget:
    """(p, r)-secret protection for one secret (group): the blow-up at p of the event's pair is at most r."""

    p: float
    r: float

    def __post_init__(self) -> None:
        check_pr(self.p, self.r)

    def value(self, event: DpEvent | list[DpEvent]) -> float:
        return blowup_of(event, self.p)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        # cheap bounds decide far from the boundary (no PLD); the sign always agrees with secret_check, which is
        # also what the ledger uses
        ok, value, _ = secret_check(event, self.p, self.r)
        g = equivalent_mu(value, self.p) - self.gaussian_mu
        return min(g, 0.0) if ok else max(g, 1e-300)

    @property
    def gaussian_mu(self) -> float:
        return float(mu_from_pr(self.p, self.r))

    def describe(self) -> str:
        return f"(p={self.p:g}, r={self.r:g})-secret protection"


Target = DpTarget | GdpTarget | SecretTarget

_STEPS = (1.0005, 1.002, 1.01, 1.05, 1.25, 2.0, 4.0, 16.0, 256.0, 65536.0)


def calibrate(
    make_event: Callable[[float], DpEvent],
    target: Target,
    *,
    lower: float = 1e-3,
    upper: float = 1e4,
    rtol: float = 1e-4,
    guess: float | None = None,
) -> float:
    """The smallest σ ∈ [lower, upper] (to relative tolerance ``rtol``, rounded up) such that
    ``make_event(σ)`` meets ``target``.

    ``make_event`` must be monotone: a larger σ never costs more privacy (true for noise multipliers).
    ``guess`` is an optional starting point; without it, Gaussian-only events start from the exact closed form
    (σ = μ₁/μ*, where μ₁ is the event's μ at σ = 1). Raises :class:`InvalidPrivacyParameter` when even
    σ = ``upper`` misses the target.
    """
    if not (0 < lower < upper and math.isfinite(upper)):
        raise InvalidPrivacyParameter(f"need 0 < lower < upper < ∞, got lower={lower!r}, upper={upper!r}")
    if not (0 < rtol <= 0.1):
        raise InvalidPrivacyParameter(f"rtol must lie in (0, 0.1], got {rtol!r}")
    cache: dict[float, float] = {}

    def gap(s: float) -> float:
        if s not in cache:
            try:
                g = float(target.gap(make_event(s)))
            except OverflowError:
                g = math.inf
            cache[s] = math.inf if math.isnan(g) else g
        return cache[s]

    if guess is None:
        guess = _closed_form_guess(make_event, target)
    s0 = min(max(float(guess if guess and guess > 0 else 1.0), lower), upper)

    # --- bracket: lo fails (gap > 0), hi meets (gap ≤ 0)
    lo: float | None = None
    hi: float | None = None
    if gap(s0) <= 0:
        hi = s0
        for f in _STEPS:
            s = max(hi / f, lower)
            if gap(s) <= 0:
                hi = s
                if s == lower:
                    return _finish(lower, gap)
            else:
                lo = s
                break
        if lo is None:
            return _finish(hi, gap)
    else:
        lo = s0
        for f in _STEPS:
            s = min(lo * f, upper)
            if gap(s) <= 0:
                hi = s
                break
            lo = s
            if s == upper:
                break
        if hi is None:
            raise InvalidPrivacyParameter(
                f"no noise multiplier up to σ={upper:g} meets {target.describe()}: the budget is too small "
                "for this many releases (or the release is not private at all)"
            )
    assert lo is not None and hi is not None

    # --- Illinois regula falsi on u = 1/σ, with a bisection step whenever it stalls
    f_lo, f_hi = gap(lo), gap(hi)
    side = 0
    widths = [math.log(hi / lo)]
    for it in range(200):
        if hi / lo - 1 <= rtol:
            break
        stalled = it >= 2 and widths[-1] > 0.5 * widths[-3]
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo != f_hi and not stalled:
            u_lo, u_hi = 1 / lo, 1 / hi
            u = u_lo - f_lo * (u_hi - u_lo) / (f_hi - f_lo)
            w = u_lo - u_hi  # keep strictly inside the bracket
            u = min(max(u, u_hi + 1e-3 * w), u_lo - 1e-3 * w)
            s = 1 / u
        else:
            s = math.sqrt(lo * hi)
        g = gap(s)
        if g <= 0:
            hi, f_hi = s, g
            if side == -1 and math.isfinite(f_lo):
                f_lo /= 2
            side = -1
        else:
            lo, f_lo = s, g
            if side == 1 and math.isfinite(f_hi):
                f_hi /= 2
            side = 1
        if stalled:
            side = 0
        widths.append(math.log(hi / lo))
    return _finish(hi, gap)


def _finish(hi: float, gap: Callable[[float], float]) -> float:
    s = hi * (1 + SAFETY)
    for _ in range(6):
        if gap(s) <= 0:
            return s
        s *= 1 + 10 * SAFETY
    raise PrivacyError(f"calibration is not monotone near σ={hi!r}: report this with the event")  # pragma: no cover


def _closed_form_guess(make_event: Callable[[float], DpEvent], target: Target) -> float | None:
    try:
        lv1, lv2 = flatten(make_event(1.0)), flatten(make_event(2.0))
    except Exception:
        return None
    if not (lv1.only_gaussian and lv2.only_gaussian) or lv1.gaussian_mu == 0:
        return None
    if not math.isclose(lv1.gaussian_mu, 2 * lv2.gaussian_mu, rel_tol=1e-9):  # z not proportional to σ
        return None
    mu = target.gaussian_mu
    return lv1.gaussian_mu / mu if mu > 0 and math.isfinite(mu) else None


# ------------------------------------------------------------------------------------------- paper formulas


def augpe_noise_multiplier(mu: float, *, compositions: int) -> float:
    """Aug-PE: σ = √T/μ — T Gaussian releases of sensitivity 1 with multiplier σ are exactly (√T/σ)-GDP."""
    _check_compositions(compositions)
    if not (mu > 0):
        raise InvalidPrivacyParameter(f"mu must be positive, got {mu!r}")
    return math.sqrt(compositions) / mu


def wasp_noise_multiplier(epsilon: float, delta: float, *, iterations: int, sensitivity: float = 1.0) -> float:
    """WASP's σ = Δ·√(2 ln(1.25/δ))·√(T−1)/ε (wasp.txt Alg 1 line 2, Thm D.4; WASP uses Δ = 4).

    ``iterations`` is WASP's T, the number of generation rounds; only the T − 1 rounds *with feedback* release
    private votes, hence √(T−1). **At T = 1 the formula gives σ = 0**: correct only because WASP then releases
    nothing private — calling a noisy release with this σ would be a non-private release, so we refuse T < 2.

    Two further caveats (docs/privacy.md): the per-round step uses the classical Gaussian mechanism bound
    σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1), proven only for ε < 1 — WASP runs at ε = 4, where it happens
    to hold (true ε ≈ 3.51 at δ = 1e-5), but it fails for larger ε (asked ε = 10 gives a true ε ≈ 10.39, ε = 20
    gives 25.4); the √(T−1)
    composition of Lemma D.3 is exact for Gaussians (μ adds in quadrature), so that step is fine.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    if not isinstance(iterations, int) or iterations < 2:
        raise InvalidPrivacyParameter(
            f"WASP's formula needs iterations T ≥ 2, got {iterations!r}: at T = 1 it gives σ = 0 (no private "
            "release happens in WASP's first round; a release with σ = 0 would not be private)"
        )
    if not epsilon > 0 or not sensitivity > 0:
        raise InvalidPrivacyParameter("epsilon and sensitivity must be positive")
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) * math.sqrt(iterations - 1) / epsilon


def laplace_scale(epsilon: float, *, sensitivity: float = 1.0, compositions: int = 1) -> float:
    """Pure ε-DP with Laplace noise: b = T·Δ₁/ε for T releases of L1 sensitivity Δ₁ (ε adds up under
    composition, and for pure DP that sum is attained)."""
    _check_compositions(compositions)
    if not epsilon > 0 or not sensitivity > 0:
        raise InvalidPrivacyParameter(f"epsilon and sensitivity must be positive, got {epsilon!r}, {sensitivity!r}")
    return compositions * sensitivity / epsilon


def _check_compositions(compositions: int) -> None:
    if not isinstance(compositions, int) or isinstance(compositions, bool) or compositions < 1:
        raise InvalidPrivacyParameter(f"compositions must be a positive integer, got {compositions!r}")


def gaussian_noise_multiplier(
    budget: Any, *, compositions: int, method: Literal["pld", "paper", "wasp"] = "pld"
) -> float:
    """σ/Δ for ``compositions`` Gaussian releases of sensitivity Δ under ``budget`` (a :class:`Budget`).

    * ``pld`` — :func:`calibrate` on ``SelfComposedDpEvent(GaussianDpEvent(σ), T)``: PLD for (ε, δ), exact for
      μ, Lemma 3.2 closed form for (p, r) (each (p_j, r_j) pair; the largest σ);
    * ``paper`` — σ = √T/μ with μ from Remark C.1 (ε, δ) or Eq 4 (p, r) (Aug-PE);
    * ``wasp`` — WASP's formula with T − 1 = ``compositions`` private rounds (only for (ε, δ) budgets).

    A ``noise`` budget returns its fixed noise multiplier.
    """
    _check_compositions(compositions)
    if method not in ("pld", "paper", "wasp"):
        raise InvalidPrivacyParameter(f"method must be one of pld, paper, wasp; got {method!r}")
    kind = budget.kind
    if kind == "noise":
        if budget.noise_multiplier is None:
            raise InvalidPrivacyParameter("a noise budget without noise_multiplier fixes no σ")
        return float(budget.noise_multiplier)
    if method == "wasp":
        if kind != "dp":
            raise InvalidPrivacyParameter(f"WASP's formula needs an (ε, δ) budget, got a {kind} budget")
        return wasp_noise_multiplier(budget.epsilon, budget.delta, iterations=compositions + 1)

    def make(s: float) -> DpEvent:
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(s), compositions)

    if kind == "dp":
        if method == "paper":
            return augpe_noise_multiplier(float(gdp_mu_for_dp(budget.epsilon, budget.delta)), compositions=compositions)
        return calibrate(make, DpTarget(budget.epsilon, budget.delta))
    if kind == "gdp":
        if method == "paper":
            return augpe_noise_multiplier(budget.mu, compositions=compositions)
        return calibrate(make, GdpTarget(budget.mu))
    if kind == "secret":
        pairs = budget.pairs
        if method == "paper":
            mu = min(float(mu_from_pr(p, r)) for p, r in pairs)
            return augpe_noise_multiplier(mu, compositions=compositions)
        return max(calibrate(make, SecretTarget(p, r)) for p, r in pairs)
    raise InvalidPrivacyParameter(f"unknown budget kind {kind!r}")
