"""Closed-form conversions between μ-GDP, (ε, δ)-DP and (p, r)-secret protection.

Notation (SecPE §2–3, App C). ``Φ`` is the standard normal CDF, ``Φ⁻¹`` its inverse. All functions accept scalars
or numpy arrays (per-secret vectors ``p_j``, ``r_j``) and broadcast; they return a float for scalar input.

Tails: ``Φ⁻¹(1 − p)`` is computed as ``−Φ⁻¹(p)`` (``scipy.special.ndtri``), never as ``ndtri(1 − p)``, so p = 1e-12
is as accurate as p = 0.1 (``1 − 1e-12`` already loses four digits in double precision). The GDP δ(ε) curve is
evaluated in log space (``log_ndtr``) so that δ down to 1e-300 keeps its relative accuracy.

* :func:`gdp_tradeoff` — Eq 2, ``G_μ(α) = Φ(Φ⁻¹(1−α) − μ)``.
* :func:`r_from_mu_p` — Lemma 3.2, Eq 4: a μ-GDP mechanism gives ``r = 1 − Φ(Φ⁻¹(1−p) − μ)``. This is the exact
  blow-up ``B(p) = 1 − G_μ(p)`` of the pair (N(μ,1), N(0,1)); it is tight for the Gaussian mechanism.
* :func:`mu_from_pr` — the inverse, ``μ(p, r) = Φ⁻¹(1−p) − Φ⁻¹(1−r)`` (Eq 6's η_j, App B.1's coupling).
* :func:`gdp_delta` / :func:`gdp_epsilon` / :func:`gdp_mu_for_dp` — Remark C.1: μ-GDP ⇔ (ε, δ(ε))-DP for all ε
  with ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth & Su 2019, Cor 2.13; it is also the analytic
  Gaussian mechanism of Balle & Wang 2018), and its two inverses.
* :func:`dp_to_pr` — Lemma C.2: (ε, δ)-DP ⇒ (p, r) with ``r = 1/(1 + (e^ε + 1/c)⁻¹(1−p)/p) + cδ`` for any c ≥ 1;
  we return the best c. :func:`dp_blowup` is the bound obtained the way Lemma 3.2 and Alg 1 obtain theirs — the
  blow-up of the (ε, δ) trade-off curve, ``min(1, e^ε p + δ, 1 − e^{−ε}(1 − δ − p))``. The two are different
  bounds (Lemma C.2 bounds a binary posterior); neither dominates: for small p and δ > 0 Lemma C.2 pays about
  ``2√(pδ)`` where the blow-up pays δ (p = 1e-4, ε = 1, δ = 1e-5: 3.35e-4 against 2.82e-4), while for δ = 0 its
  Bayes form ``p e^ε/(p e^ε + 1 − p)`` is below ``e^ε p``. Accounting in privtext uses blow-ups throughout.
* :func:`compose_pr` — Theorem 3 (naive composition): ``p = max(p₁, p₂)``, ``r = r₁ + r₂`` coordinate-wise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy import optimize
from scipy.special import log_ndtr, ndtr, ndtri

from ..errors import InvalidPrivacyParameter

ArrayLike = Any


def _out(x: np.ndarray) -> Any:
    """A float for 0-d results, the array otherwise."""
    x = np.asarray(x, dtype=np.float64)
    return float(x) if x.ndim == 0 else x


def _elementwise(fn: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """``fn`` of the broadcast arrays' elements, one call per element (for the scalar root-finders)."""
    args = np.broadcast_arrays(*arrays)
    out = np.empty(args[0].shape, dtype=np.float64)
    for idx in np.ndindex(out.shape):
        out[idx] = fn(*(float(a[idx]) for a in args))
    return out


def _arr(name: str, x: ArrayLike) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidPrivacyParameter(f"{name} must be a number or an array of numbers, got {x!r}") from None
    if a.size == 0:
        raise InvalidPrivacyParameter(f"{name} is empty")
    if np.isnan(a).any():
        raise InvalidPrivacyParameter(f"{name} contains NaN")
    return a


def check_prior(p: ArrayLike) -> np.ndarray:
    """Validate a prior p ∈ (0, 1)."""
    a = _arr("p", p)
    bad = (a <= 0) | (a >= 1)
    if bad.any():
        raise InvalidPrivacyParameter(
            f"p must lie in (0, 1), got {float(a[bad].ravel()[0])!r}: p is the adversary's prior probability of guessing "
            "the secret and must be a probability strictly between 0 and 1"
        )
    return a


def check_pr(p: ArrayLike, r: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (p, r) secret budget: 0 < p < r ≤ 1 (broadcast together)."""
    pa, ra = check_prior(p), _arr("r", r)
    try:
        pa, ra = np.broadcast_arrays(pa, ra)
    except ValueError:
        raise InvalidPrivacyParameter(f"p and r have incompatible shapes {pa.shape} and {ra.shape}") from None
    if (ra > 1).any():
        raise InvalidPrivacyParameter(f"r must be at most 1, got {float(ra[ra > 1].ravel()[0])!r}: r is a probability")
    bad = ra <= pa
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        raise InvalidPrivacyParameter(
            f"r={float(ra.ravel()[i])!r} must exceed p={float(pa.ravel()[i])!r}: a posterior bound at or below the prior "
            "protects nothing (no mechanism can make the adversary do worse than guessing)"
        )
    return pa, ra


def check_mu(mu: ArrayLike, *, allow_inf: bool = False) -> np.ndarray:
    """``mu`` as an array after checking μ ≥ 0 and finite (``allow_inf``: ∞ allowed, a non-private release); raises
    :class:`~privtext.errors.InvalidPrivacyParameter` naming the bad value."""
    a = _arr("mu", mu)
    if (a < 0).any() or (not allow_inf and np.isinf(a).any()):
        raise InvalidPrivacyParameter(
            f"mu must be a finite non-negative number, got {float(a.ravel()[0])!r}: μ is the GDP distance between the "
            "two output distributions"
        )
    return a


def check_epsilon(eps: ArrayLike, *, name: str = "epsilon", positive: bool = False) -> Any:
    """The one ε check: ε ≥ 0 (``positive``: ε > 0, as a mechanism's budget must be: ε = 0 would need infinite
    noise); ``inf`` is allowed (no noise: a non-private release). A number gives a float, an array an array."""
    if isinstance(eps, bool) or isinstance(eps, str):
        raise InvalidPrivacyParameter(f"{name} must be a positive number, got {eps!r}")
    a = _arr(name, eps)
    if (a < 0).any() or (positive and (a <= 0).any()):
        bad = float(a[(a <= 0) if positive else (a < 0)].ravel()[0])
        raise InvalidPrivacyParameter(
            f"{name} must be {'> 0 (ε = 0 would need infinite noise)' if positive else 'non-negative'}, got {bad!r}")
    return float(a) if a.ndim == 0 and np.ndim(eps) == 0 else a


def check_delta(delta: ArrayLike, *, allow_zero: bool = False) -> np.ndarray:
    """``delta`` as an array after checking 0 < δ < 1 (``allow_zero``: 0 ≤ δ < 1); raises
    :class:`~privtext.errors.InvalidPrivacyParameter` naming the bad value."""
    a = _arr("delta", delta)
    bad = (a < 0) | (a >= 1) | ((a == 0) & (not allow_zero))
    if bad.any():
        raise InvalidPrivacyParameter(
            f"delta must lie in {'[0, 1)' if allow_zero else '(0, 1)'}, got {float(a[bad].ravel()[0])!r}: δ is the "
            "probability with which the ε guarantee may fail"
        )
    return a


# ------------------------------------------------------------------------------------------------------ GDP


def gdp_tradeoff(alpha: ArrayLike, mu: ArrayLike) -> Any:
    """``G_μ(α) = Φ(Φ⁻¹(1−α) − μ)`` (SecPE Eq 2): the smallest type-II error at type-I error α when testing
    N(0,1) against N(μ,1)."""
    a = _arr("alpha", alpha)
    if ((a < 0) | (a > 1)).any():
        raise InvalidPrivacyParameter(f"alpha must lie in [0, 1], got {alpha!r}")
    m = check_mu(mu, allow_inf=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = ndtr(-ndtri(a) - m)
    return _out(out)


def r_from_mu_p(p: ArrayLike, mu: ArrayLike) -> Any:
    """Lemma 3.2 (Eq 4): the posterior bound ``r = 1 − Φ(Φ⁻¹(1−p) − μ) = Φ(μ + Φ⁻¹(p))`` of a μ-GDP mechanism at
    prior p. It is the exact blow-up of N(μ, 1) against N(0, 1) at p."""
    pa = check_prior(p)
    m = check_mu(mu, allow_inf=True)
    return _out(ndtr(m + ndtri(pa)))


def mu_from_pr(p: ArrayLike, r: ArrayLike) -> Any:
    """``μ(p, r) = Φ⁻¹(1−p) − Φ⁻¹(1−r) = Φ⁻¹(r) − Φ⁻¹(p)``: the largest μ whose μ-GDP guarantee gives (p, r)
    (inverse of Eq 4; η_j of Eq 6). r = 1 gives μ = ∞."""
    pa, ra = check_pr(p, r)
    with np.errstate(divide="ignore"):
        return _out(ndtri(ra) - ndtri(pa))


def gdp_delta(epsilon: ArrayLike, mu: ArrayLike) -> Any:
    """Remark C.1: the δ(ε) of μ-GDP, ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, in log space (accurate to 1e-300)."""
    e = _arr("epsilon", epsilon)
    m = check_mu(mu)
    e, m = np.broadcast_arrays(e, m)
    out = np.zeros(e.shape, dtype=np.float64)
    pos = m > 0
    ee, mm = e[pos], m[pos]
    la = log_ndtr(-ee / mm + mm / 2)
    lb = log_ndtr(-ee / mm - mm / 2)
    # δ = e^{la}·(1 − e^{ε + lb − la}); the bracket is in (0, 1] because e^ε Φ(b) < Φ(a) for μ > 0.
    with np.errstate(over="ignore"):
        out[pos] = np.exp(la) * -np.expm1(np.minimum(ee + lb - la, 0.0))
    return _out(np.clip(out, 0.0, 1.0))


def gdp_epsilon(delta: ArrayLike, mu: ArrayLike) -> Any:
    """Remark C.1 inverted: the smallest ε ≥ 0 with δ_μ(ε) ≤ δ (0 when δ_μ(0) ≤ δ already)."""
    return _out(_elementwise(_gdp_epsilon_scalar, check_delta(delta), check_mu(mu)))


def _gdp_epsilon_scalar(delta: float, mu: float) -> float:
    if mu == 0 or gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(hi, mu) > delta:
        hi *= 2
        if hi > 1e6:
            return math.inf
    f = lambda e: math.log(max(gdp_delta(e, mu), 1e-320)) - math.log(delta)  # noqa: E731
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-13, rtol=1e-14, maxiter=500))


def gdp_mu_for_dp(epsilon: ArrayLike, delta: ArrayLike) -> Any:
    """The largest μ whose μ-GDP guarantee implies (ε, δ)-DP, i.e. δ_μ(ε) = δ (Remark C.1; δ_μ(ε) increases in μ)."""
    return _out(_elementwise(_gdp_mu_scalar, check_epsilon(epsilon), check_delta(delta)))


def _gdp_mu_scalar(eps: float, delta: float) -> float:
    lo, hi = 1e-12, 1.0
    while gdp_delta(eps, hi) < delta:
        hi *= 2
        if hi > 1e4:
            return math.inf
    f = lambda m: math.log(max(gdp_delta(eps, m), 1e-320)) - math.log(delta)  # noqa: E731
    if f(lo) > 0:  # δ_μ(ε) ≥ δ even for μ → 0 (only for ε = 0 and δ ≤ 0 — excluded by validation)
        return 0.0
    return float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500))


# ------------------------------------------------------------------------------------------------ (ε, δ) → (p, r)


def dp_blowup(epsilon: ArrayLike, delta: ArrayLike, p: ArrayLike) -> Any:
    """The tight posterior bound of an (ε, δ)-DP mechanism at prior p: the blow-up of the (ε, δ) trade-off curve,
    ``min(1, e^ε p + δ, 1 − e^{−ε}(1 − δ − p))``. Any (ε, δ)-DP mechanism has B(p) at most this, and the
    canonical (ε, δ) pair attains it."""
    e = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=True)
    pa = check_prior(p)
    with np.errstate(over="ignore"):
        out = np.minimum(np.minimum(np.exp(e) * pa + d, 1 - np.exp(-e) * np.maximum(1 - d - pa, 0.0)), 1.0)
    return _out(out)


def dp_to_pr(epsilon: ArrayLike, delta: ArrayLike, p: ArrayLike, *, c: float | None = None) -> Any:
    """Lemma C.2: (ε, δ)-DP ⇒ (p, r)-secret protection with ``r(c) = 1/(1 + (e^ε + 1/c)⁻¹ (1−p)/p) + cδ``.

    With ``c=None`` the best c ≥ 1 is used (r(c) is convex in c for c ≥ 1; for δ = 0, c → ∞ gives
    ``1/(1 + e^{−ε}(1−p)/p)``). The lemma is looser than :func:`dp_blowup`; it is kept because the paper states it.
    """
    e = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=True)
    pa = check_prior(p)
    if c is not None and not c >= 1:
        raise InvalidPrivacyParameter(f"c must be at least 1 in Lemma C.2, got {c!r}")
    out = _elementwise(lambda ei, di, pi: _lemma_c2(ei, di, pi, c), e, d, pa)
    return _out(np.minimum(out, 1.0))


def _lemma_c2_r(eps: float, delta: float, p: float, c: float) -> float:
    if math.isinf(c):
        return 1.0 / (1.0 + math.exp(-eps) * (1 - p) / p)
    return 1.0 / (1.0 + (1 - p) / (p * (math.exp(eps) + 1.0 / c))) + c * delta


def _lemma_c2(eps: float, delta: float, p: float, c: float | None) -> float:
    if c is not None:
        return _lemma_c2_r(eps, delta, p, c)
    if delta == 0:
        return _lemma_c2_r(eps, delta, p, math.inf)
    # minimise over log c ∈ [0, 60]; the function is unimodal in c (convex on c ≥ 1)
    res = optimize.minimize_scalar(lambda lc: _lemma_c2_r(eps, delta, p, math.exp(lc)), bounds=(0.0, 60.0),
                                   method="bounded", options={"xatol": 1e-10})
    return float(min(res.fun, _lemma_c2_r(eps, delta, p, 1.0)))


def compose_pr(pairs: Iterable[tuple[ArrayLike, ArrayLike]]) -> tuple[Any, Any]:
    """Theorem 3 (naive composition): mechanisms with (p₁, r₁), (p₂, r₂), ... compose to
    ``p = max_k p_k``, ``r = min(1, Σ_k r_k)`` coordinate-wise (per secret). Loose: prefer composing events with
    the accountant (the ledger does)."""
    ps, rs = [], []
    for p, r in pairs:
        pa, ra = check_pr(p, r)
        ps.append(pa)
        rs.append(ra)
    if not ps:
        raise InvalidPrivacyParameter("compose_pr needs at least one (p, r) pair")
    p_out = np.maximum.reduce(np.broadcast_arrays(*ps))
    r_out = np.minimum(np.add.reduce(np.broadcast_arrays(*rs)), 1.0)
    return _out(p_out), _out(r_out)
