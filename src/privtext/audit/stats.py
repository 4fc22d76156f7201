"""The statistics of an audit: confidence bounds on an attack's error rates, the privacy they refute, and how many
trials an audit needs to catch a given fault.

Bounds
------
A fixed test (its rejection region chosen before any trial) is run ``n`` times on each side of a neighbouring pair.
Its false-positive and false-negative counts are binomial, so each rate gets a Clopper-Pearson interval; every
audit in privtext uses the two-sided interval at level ``alpha/2`` for each rate (Bonferroni over the two), i.e.
one-sided bounds at confidence 1 − alpha/4 each, and a refutation at confidence ≥ 1 − alpha overall.

* GDP (Dong, Roth & Su 2019, Cor. 2.14: a test against a μ-GDP mechanism has FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)):
  μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR), evaluated at the rates' upper bounds (:func:`mu_bounds`).
* pure ε-DP (Dwork et al. 2006: Pr[E | D'] ≤ e^ε·Pr[E | D] for every event E): ε ≥ log(TPR / FPR), at the lower
  bound of TPR and the upper bound of FPR (:func:`epsilon_bounds`).

Trial counts
------------
An audit that cannot fail proves nothing. The number of trials is therefore chosen from the claim so that a
given fault is caught with probability ≥ ``power`` (default 0.95): :func:`power_mu` and :func:`power_epsilon` give
the exact probability that the lower bound exceeds the claim when the true rates are (fpr, fnr) / (tpr, fpr) —
a sum over the binomial distribution of one count of the probability that the other count stays below the
largest value that still refutes — and :func:`min_trials` searches the smallest n with that probability ≥ power.
The fault privtext plans for is **halved noise** (a mechanism drawing half the noise it records): for a Gaussian
shift with claim μ_c it makes the shift 2μ_c noise standard deviations, so the midpoint test has
FPR = FNR = Φ(−μ_c) (:func:`trials_for_halved_gaussian_noise`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import beta, binom

from ..errors import ConfigError


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 − alpha) Clopper-Pearson interval for a binomial proportion k/n."""
    if n <= 0 or not 0 <= k <= n:
        raise ConfigError(f"need 0 ≤ k ≤ n and n > 0, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


@functools.lru_cache(maxsize=256)
def _upper(n: int, alpha: float) -> np.ndarray:
    """The Clopper-Pearson upper bound (two-sided at ``alpha/2``, as every audit uses) for counts 0..n."""
    x = np.arange(n + 1)
    hi = np.ones(n + 1)
    hi[:n] = beta.ppf(1 - alpha / 4, x[:n] + 1, n - x[:n])
    hi.flags.writeable = False
    return hi


@functools.lru_cache(maxsize=256)
def _lower(n: int, alpha: float) -> np.ndarray:
    x = np.arange(n + 1)
    lo = np.zeros(n + 1)
    lo[1:] = beta.ppf(alpha / 4, x[1:], n - x[1:] + 1)
    lo.flags.writeable = False
    return lo


def gdp_mu(fpr: float, fnr: float) -> float:
    """Φ⁻¹(1 − FPR) − Φ⁻¹(FNR): the μ a test with these rates refutes (−∞ when FPR = 1)."""
    fpr, fnr = min(max(fpr, 1e-300), 1.0), min(max(fnr, 1e-300), 1.0)
    return float(ndtri(1 - fpr) - ndtri(fnr)) if fpr < 1 else -math.inf


def mu_bounds(fp: int, fn: int, n: int, alpha: float) -> tuple[float, float, float]:
    """(lower confidence bound, point estimate, upper bound) of μ from the false-positive and false-negative counts
    of a fixed test run n times on each side; each rate's interval at level alpha/2 (Bonferroni)."""
    fpr_lo, fpr_hi = clopper_pearson(fp, n, alpha / 2)
    fnr_lo, fnr_hi = clopper_pearson(fn, n, alpha / 2)
    return gdp_mu(fpr_hi, fnr_hi), gdp_mu(max(fp, 0.5) / n, max(fn, 0.5) / n), gdp_mu(fpr_lo, fnr_lo)


def epsilon_bounds(tp: int, fp: int, n: int, alpha: float) -> tuple[float, float, float]:
    """(lower confidence bound ≥ 0, point estimate, upper bound) of ε = log(TPR/FPR) from the true- and
    false-positive counts of a fixed test run n times on each side."""
    fpr_lo, fpr_hi = clopper_pearson(fp, n, alpha / 2)
    tpr_lo, tpr_hi = clopper_pearson(tp, n, alpha / 2)

    def eps(t: float, f: float) -> float:
        return math.log(t / f) if t > 0 and f > 0 else (math.inf if t > 0 else 0.0)

    return max(eps(tpr_lo, fpr_hi), 0.0), eps(max(tp, 0.5) / n, max(fp, 0.5) / n), eps(tpr_hi, fpr_lo)


# ----------------------------------------------------------------------------------------------------- power


def power_mu(n: int, claim_mu: float, fpr: float, fnr: float, alpha: float) -> float:
    """P[μ lower bound > claim_mu] for n trials per side when the test's true rates are (fpr, fnr), exactly:
    the bound is decreasing in both counts, so for each false-positive count x the refuting false-negative counts
    are those whose upper bound u satisfies u < Φ(Φ⁻¹(1 − u(x)) − claim_mu)."""
    n = int(n)
    u = _upper(n, float(alpha))
    limit = ndtr(ndtri(1 - np.minimum(u, 1.0)) - claim_mu)  # largest FNR bound that still refutes, per x_fp
    ok = np.searchsorted(u, limit, side="left") - 1  # largest x_fn with u(x_fn) < limit (−1: none)
    pmf = binom.pmf(np.arange(n + 1), n, fpr)
    cdf = np.where(ok >= 0, binom.cdf(np.maximum(ok, 0), n, fnr), 0.0)
    return float(np.clip((pmf * cdf).sum(), 0.0, 1.0))


def power_epsilon(n: int, claim_eps: float, tpr: float, fpr: float, alpha: float) -> float:
    """P[ε lower bound > claim_eps] for n trials per side when the test's true rates are (tpr, fpr), exactly:
    for each true-positive count x the refuting false-positive counts are those whose upper bound u satisfies
    u < l(x)·e^(−claim_eps)."""
    n = int(n)
    u, lo = _upper(n, float(alpha)), _lower(n, float(alpha))
    limit = lo * math.exp(-claim_eps)
    ok = np.searchsorted(u, limit, side="left") - 1
    pmf = binom.pmf(np.arange(n + 1), n, tpr)
    cdf = np.where(ok >= 0, binom.cdf(np.maximum(ok, 0), n, fpr), 0.0)
    return float(np.clip((pmf * cdf).sum(), 0.0, 1.0))


def min_trials(power_at: Callable[[int], float], *, power: float = 0.95, start: int = 10,
               limit: int = 10_000_000) -> int:
    """The smallest n ≥ ``start`` (found by doubling, then bisection) with ``power_at(n) ≥ power``; raises
    :class:`ConfigError` when even ``limit`` trials do not reach it."""
    if not 0 < power < 1:
        raise ConfigError(f"power must lie in (0, 1), got {power}")
    hi = max(int(start), 10)
    while power_at(hi) < power:
        if hi >= limit:
            raise ConfigError(f"no trial count up to {limit} reaches power {power}: the fault is too small to see")
        hi = min(hi * 2, limit)
    lo = max(hi // 2, start - 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_at(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def trials_for_halved_gaussian_noise(claim_mu: float, *, alpha: float, power: float = 0.95,
                                     noise_scale: float = 0.5) -> int:
    """Trials per side for the midpoint test of a Gaussian shift claimed to be ``claim_mu`` standard deviations so
    that a mechanism drawing ``noise_scale`` × its recorded noise (default ½) is caught with probability ≥ power.
    The true shift is then claim_mu/noise_scale deviations, so FPR = FNR = Φ(−claim_mu/(2·noise_scale))."""
    if not claim_mu > 0:
        raise ConfigError(f"the claimed μ must be > 0, got {claim_mu}")
    rate = float(ndtr(-claim_mu / (2 * noise_scale)))
    return min_trials(lambda n: power_mu(n, claim_mu, rate, rate, alpha), power=power)


__all__ = [
    "clopper_pearson",
    "epsilon_bounds",
    "gdp_mu",
    "min_trials",
    "mu_bounds",
    "power_epsilon",
    "power_mu",
    "trials_for_halved_gaussian_noise",
]
