"""Noise calibration: one entry point for a run's σ, one generic search, plus the papers' formulas.

Every noise multiplier a method uses comes from here. :func:`noise_multiplier` is the entry point (in the spirit
of dp_accounting's ``calibrate_dp_mechanism``): it takes the run's :class:`~privtext.privacy.budget.Budget` and
the method's event builder ``σ ↦ DpEvent`` and returns a ``noise`` budget's fixed σ, a closed-form σ the method
names (``formula``: a paper's calibration, a function of the budget), or the smallest σ whose event meets the
budget's target (:func:`target_of`, :func:`calibrate`). A method never reads ε, δ or μ from its configuration:
tests/test_architecture.py checks it. The module knows no method: a method's own formula lives in its package
(WASP's in :mod:`privtext.methods.wasp.calibration`) and is passed in as ``formula``.

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

Closed forms:

* ``paper`` (:func:`paper_noise_multiplier`, an option of :func:`gaussian_noise_multiplier`) — Aug-PE: T
  Gaussian releases of sensitivity 1 with noise multiplier σ are √T/σ-GDP, so σ = √T/μ, with μ from (ε, δ) by
  Remark C.1 (:func:`~privtext.privacy.conversions.gdp_mu_for_dp`) or from (p, r) by Eq 4. This is *exact* for
  Gaussians (GDP composition and the δ(ε) duality are exact); the PLD answer differs only by its pessimistic
  discretisation (≤ 1e-6 relative).
* :func:`gaussian_share_noise_multiplier` — one Gaussian release taking a share f of a budget's μ²
  (:class:`~privtext.privacy.budget.BudgetSplit`): σ = 1/(√f·μ); :func:`share_noise_ratio` — its σ over that of
  T releases sharing the rest: √((1−f)/(f·T)).
* :func:`laplace_scale` — pure ε-DP: Laplace scale b = T·Δ/ε for T releases (ε composes additively).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidPrivacyParameter, PrivacyError
from .accounting import blowup_of, epsilon_for_delta, equivalent_mu, gdp_mu_of, secret_check
from .conversions import check_delta, check_epsilon, check_pr, gdp_mu_for_dp, mu_from_pr
from .events import DpEvent, flatten, gaussian_event, self_composed

if TYPE_CHECKING:
    from .budget import Budget

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
        """ε(δ) of ``event`` at this target's δ, from dp_accounting's pessimistic PLD (the ledger's accountant)."""
        return epsilon_for_delta(event, self.delta)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        """ε(δ) of ``event`` minus the target ε: ≤ 0 where the event meets the target (what :func:`calibrate` drives
        to 0 from below)."""
        return self.value(event) - self.epsilon

    @property
    def gaussian_mu(self) -> float:
        """The μ a Gaussian composition may have to meet this target (Remark C.1)."""
        return float(gdp_mu_for_dp(self.epsilon, self.delta))

    def describe(self) -> str:
        """The target in words, e.g. ``(ε=4, δ=1e-05)-DP``."""
        return f"(ε={self.epsilon:g}, δ={self.delta:g})-DP"


@dataclass(frozen=True)
class GdpTarget:
    """μ-GDP, exact for Gaussian events (other events are refused)."""

    mu: float

    def __post_init__(self) -> None:
        if not (self.mu > 0 and math.isfinite(self.mu)):
            raise InvalidPrivacyParameter(f"mu must be a positive finite number, got {self.mu!r}")

    def value(self, event: DpEvent | list[DpEvent]) -> float:
        """The μ of ``event`` under exact GDP composition, μ = (Σ(Δ/σ_i)²)^½; raises for non-Gaussian events."""
        return gdp_mu_of(event)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        """μ of ``event`` minus the target μ: ≤ 0 where the event meets the target."""
        return self.value(event) - self.mu

    @property
    def gaussian_mu(self) -> float:
        """The target μ itself (a Gaussian composition may reach exactly μ)."""
        return float(self.mu)

    def describe(self) -> str:
        """The target in words, e.g. ``μ=1-GDP``."""
        return f"μ={self.mu:g}-GDP"


@dataclass(frozen=True)
class SecretTarget:
    """(p, r)-secret protection for one secret (group): the blow-up at p of the event's pair is at most r."""

    p: float
    r: float

    def __post_init__(self) -> None:
        check_pr(self.p, self.r)

    def value(self, event: DpEvent | list[DpEvent]) -> float:
        """The blow-up B(p) of ``event`` at the target's prior p (Lemma 3.2 for Gaussians, pessimistic PLD for
        mixtures; SecPE Alg 1 line 6)."""
        return blowup_of(event, self.p)

    def gap(self, event: DpEvent | list[DpEvent]) -> float:
        """How far ``event`` is from (p, r)-protection on the equivalent-μ scale: Φ⁻¹(B(p)) − Φ⁻¹(p) minus μ(p, r)
        (inverse of SecPE Eq 4); ≤ 0 exactly where :func:`~privtext.privacy.accounting.secret_check` (the ledger's
        test) accepts it."""
        # cheap bounds decide far from the boundary (no PLD); the sign always agrees with secret_check, which is
        # also what the ledger uses
        ok, value, _ = secret_check(event, self.p, self.r)
        g = equivalent_mu(value, self.p) - self.gaussian_mu
        return min(g, 0.0) if ok else max(g, 1e-300)

    @property
    def gaussian_mu(self) -> float:
        """μ(p, r) = Φ⁻¹(1−p) − Φ⁻¹(1−r) (inverse of SecPE Eq 4): the GDP μ whose blow-up at p is exactly r."""
        return float(mu_from_pr(self.p, self.r))

    def describe(self) -> str:
        """The target in words, e.g. ``(p=0.0001, r=0.001)-secret protection``."""
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


# ------------------------------------------------------------------------------------------- the entry point


def target_of(budget: Budget) -> list[Target]:
    """The calibration targets a budget sets for Gaussian noise: one (ε, δ) target (``dp``), one μ target
    (``gdp``), or one (p, r) target per distinct pair (``secret``: the largest σ meets all). A ``noise`` budget
    sets none (its σ is fixed), and a ``pure`` one none a Gaussian can meet (no finite pure ε)."""
    kind = budget.kind
    if kind == "dp":
        return [DpTarget(budget.epsilon, budget.delta)]  # type: ignore[arg-type]
    if kind == "gdp":
        return [GdpTarget(budget.mu)]  # type: ignore[arg-type]
    if kind == "secret":
        return [SecretTarget(p, r) for p, r in budget.pairs]
    if kind == "pure":
        raise InvalidPrivacyParameter("a pure ε-DP budget cannot be met by Gaussian noise (a Gaussian has no finite "
                                      "pure ε): give privacy: {epsilon, delta} or use Laplace releases")
    raise InvalidPrivacyParameter(f"a {kind!r} budget sets no calibration target")


def noise_multiplier(
    budget: Budget,
    make_event: Callable[[float], DpEvent],
    *,
    formula: Callable[[Budget], float] | None = None,
    lower: float = 1e-3,
    upper: float = 1e4,
) -> float:
    """The noise multiplier σ (noise std / Δ) of a run's Gaussian releases under ``budget`` — the one entry point
    through which every method's σ is worked out.

    * a ``noise`` budget: its fixed σ (no target; the ledger only reports ε);
    * ``formula`` given: ``formula(budget)``, a paper's closed form chosen by the method (``privacy.calibration:
      paper``), unchecked here — the ledger accounts for the events the σ gives and refuses one over budget;
    * otherwise the smallest σ ∈ [``lower``, ``upper``] whose ``make_event(σ)`` (the run's whole event, built with
      :mod:`privtext.privacy.events`) meets every target of the budget (:func:`target_of`, :func:`calibrate`).
    """
    if budget.kind == "noise":
        if budget.noise_multiplier is None:
            raise InvalidPrivacyParameter("a noise budget without noise_multiplier fixes no σ")
        return float(budget.noise_multiplier)
    if formula is not None:
        return float(formula(budget))
    return max(calibrate(make_event, t, lower=lower, upper=upper) for t in target_of(budget))


# ------------------------------------------------------------------------------------------- paper formulas


def augpe_noise_multiplier(mu: float, *, compositions: int) -> float:
    """Aug-PE: σ = √T/μ — T Gaussian releases of sensitivity 1 with multiplier σ are exactly (√T/σ)-GDP."""
    _check_compositions(compositions)
    if not (mu > 0):
        raise InvalidPrivacyParameter(f"mu must be positive, got {mu!r}")
    return math.sqrt(compositions) / mu


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


def paper_noise_multiplier(budget: Budget, *, compositions: int) -> float:
    """Aug-PE's closed form σ = √T/μ (:func:`augpe_noise_multiplier`) with μ the budget's: Remark C.1 for
    (ε, δ), μ itself, or Eq 4 for (p, r) (the strictest pair)."""
    kind = budget.kind
    if kind == "dp":
        return augpe_noise_multiplier(float(gdp_mu_for_dp(budget.epsilon, budget.delta)), compositions=compositions)
    if kind == "gdp":
        return augpe_noise_multiplier(budget.mu, compositions=compositions)  # type: ignore[arg-type]
    if kind == "secret":
        mu = min(float(mu_from_pr(p, r)) for p, r in budget.pairs)
        return augpe_noise_multiplier(mu, compositions=compositions)
    raise InvalidPrivacyParameter(f"the paper's σ = √T/μ needs an (ε, δ), μ or (p, r) budget, got a {kind!r} budget")


def gaussian_share_noise_multiplier(budget: Budget, share: float) -> float:
    """σ_L = 1/μ_L of one Gaussian release (sensitivity 1) taking ``share`` f of the budget's μ²: μ_L² = f·μ²
    (:class:`~privtext.privacy.budget.BudgetSplit`; μ-GDP composes as μ² sums, Dong, Roth & Su 2019, Cor 3.3), μ
    the budget's Gaussian level (:attr:`~privtext.privacy.budget.Budget.gaussian_mu`: Remark C.1 for (ε, δ))."""
    from .budget import BudgetSplit

    split = BudgetSplit.gdp(budget.gaussian_mu, {"share": share})
    return 1.0 / split.mu("share")


def share_noise_ratio(share: float, *, compositions: int) -> float:
    """σ_part/σ for one Gaussian release taking ``share`` f of a μ-GDP budget's μ² beside ``compositions`` T
    releases at σ taking the rest (:meth:`~privtext.privacy.budget.BudgetSplit.noise_ratio`): 1/σ_part² = f·μ²
    and T/σ² = (1−f)·μ²  ⇒  σ_part = σ·√((1−f)/(f·T)), whatever μ (Aug-PE's label histogram beside its votes)."""
    from .budget import BudgetSplit

    split = BudgetSplit.gdp(1.0, {"labels": share, "votes": 1 - share})
    return split.noise_ratio("labels", "votes", compositions=compositions)


def gaussian_noise_multiplier(
    budget: Budget, *, compositions: int, method: Literal["pld", "paper"] = "pld"
) -> float:
    """σ/Δ for ``compositions`` Gaussian releases of sensitivity Δ under ``budget`` (:func:`noise_multiplier` on
    ``SelfComposedDpEvent(GaussianDpEvent(σ), T)``):

    * ``pld`` — :func:`calibrate`: PLD for (ε, δ), exact for μ, Lemma 3.2 closed form for (p, r) (each (p_j, r_j)
      pair; the largest σ);
    * ``paper`` — σ = √T/μ with μ from Remark C.1 (ε, δ) or Eq 4 (p, r) (Aug-PE; :func:`paper_noise_multiplier`).

    A ``noise`` budget returns its fixed noise multiplier.
    """
    _check_compositions(compositions)
    if method not in ("pld", "paper"):
        raise InvalidPrivacyParameter(f"method must be one of pld, paper; got {method!r}")

    def make(s: float) -> DpEvent:
        return self_composed(gaussian_event(s), compositions)

    def paper(b: Budget) -> float:
        return paper_noise_multiplier(b, compositions=compositions)

    return noise_multiplier(budget, make, formula=paper if method == "paper" else None)
