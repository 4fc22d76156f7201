"""One-run auditing (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023).

m canaries are each put into the data independently with probability ½ (S_i ∈ {±1}, from OS entropy); the method
runs **once**; an attacker who sees only the output guesses T_i ∈ {+1 (in), −1 (out), 0 (abstain)} for every
canary — any function of the output, chosen without looking at S. With r = #{T_i ≠ 0} guesses of which W are
correct, their Theorem 3.1 (ε-DP for adding or removing one canary) gives, for every v,

    Pr[W ≥ v] ≤ Pr[Binomial(r, q) ≥ v],   q = e^ε / (1 + e^ε)

(the guesses are no better than ε-randomized response on each canary, although the canaries share one run —
DP's connection to generalisation, with no group-privacy cost), and their Theorem 5.2 / Algorithm 2 extends it
to (ε, δ)-DP:

    Pr[W ≥ v] ≤ Pr[Binomial(r, q) ≥ v] + 2mδ · max_{1≤i≤v} Pr[v − i ≤ Binomial(r, q) < v] / i.

:func:`p_value` is that right-hand side; :func:`epsilon_lower_bound` the largest ε it rejects at the given
confidence (bisection: the p-value increases with ε). Everything here is a pure function of (m, r, v, δ).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit
from scipy.stats import binom

from ..errors import ConfigError


def _check(m: int, r: int, v: int) -> None:
    if not (isinstance(m, int) and isinstance(r, int) and isinstance(v, int)) or not 0 <= v <= r <= m:
        raise ConfigError(f"need integers 0 ≤ v ≤ r ≤ m (correct guesses, guesses, canaries); got v={v}, r={r}, m={m}")


def p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """An upper bound on Pr[≥ v of r guesses correct] under (ε, δ)-DP with m canaries (module docstring)."""
    _check(m, r, v)
    if not epsilon >= 0 or not 0 <= delta <= 1:
        raise ConfigError(f"need ε ≥ 0 and 0 ≤ δ ≤ 1, got ε={epsilon}, δ={delta}")
    q = float(expit(epsilon))
    tail = float(binom.sf(v - 1, r, q))  # Pr[Bin(r, q) ≥ v]
    if delta > 0 and v > 0:
        i = np.arange(1, v + 1)
        between = binom.cdf(v - 1, r, q) - binom.cdf(v - i - 1, r, q)  # Pr[v − i ≤ Bin < v] (cdf(−1) = 0)
        tail += 2.0 * m * delta * float(np.max(between / i))
    return min(tail, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, *, delta: float = 0.0, confidence: float = 0.95,
                        tol: float = 1e-6) -> float:
    """The largest ε (to ``tol``) that ``v`` correct guesses out of ``r`` (m canaries) refute at ``confidence``:
    sup{ε ≥ 0 : p_value(m, r, v, ε, δ) < 1 − confidence}, or 0 when even ε = 0 is not refuted."""
    _check(m, r, v)
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    level = 1.0 - confidence
    if r == 0 or p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < level:
        lo, hi = hi, hi * 2
        if hi > 1e4:  # every guess right with δ = 0 and a huge r: the bound is that large
            return math.inf
    while hi - lo > tol * max(1.0, lo):
        mid = (lo + hi) / 2
        if p_value(m, r, v, mid, delta) < level:
            lo = mid
        else:
            hi = mid
    return lo


def perfect_guess_bound(r: int, confidence: float = 0.95) -> float:
    """Closed form for δ = 0 and every one of r guesses right: q^r = 1 − confidence, ε = logit(q)."""
    q = (1.0 - confidence) ** (1.0 / r)
    return math.log(q / (1.0 - q))


def canaries_needed(epsilon: float, *, delta: float = 0.0, confidence: float = 0.95, tests: int = 1,
                    limit: int = 100_000) -> int:
    """The fewest canaries m whose every guess right (r = v = m) refutes ``epsilon`` at ``confidence`` with a
    Bonferroni share 1/``tests`` of the error level: below it no attack, however good, can exceed the claim."""
    if not epsilon > 0:
        raise ConfigError(f"the claimed ε must be > 0, got {epsilon}")
    conf = 1.0 - (1.0 - confidence) / tests
    m = 1
    while epsilon_lower_bound(m, m, m, delta=delta, confidence=conf, tol=1e-4) <= epsilon:
        m = m * 2 if m < 64 else m + max(m // 8, 1)
        if m > limit:
            raise ConfigError(f"no number of canaries up to {limit} can refute ε = {epsilon} at δ = {delta}")
    lo, hi = max(m // 2, 1), m
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if epsilon_lower_bound(mid, mid, mid, delta=delta, confidence=conf, tol=1e-4) > epsilon:
            hi = mid
        else:
            lo = mid
    return hi


__all__ = ["canaries_needed", "epsilon_lower_bound", "p_value", "perfect_guess_bound"]
