"""SecPE's SecretNoise (Alg 1): per-record sampling probabilities ρ and the noise σ for (p, r)-secret protection.

Input: a records × secrets 0/1 membership matrix M (``M[i, j] = 1`` when record i holds secret s_j; rows are the
private records, columns the secrets), the budget (p_j, r_j), and the number of *compositions* — how many
releases with the same noise-to-sensitivity ratio the caller makes. In SecPE every clustering releases both
noisy counts ñ_k and noisy centres ẽ_k (Thm 1, Eq 7), each with the same dominating pair, so T re-clusterings
are ``compositions = 2·T`` (2 when the clusters are released once). Nothing here assumes T.

Steps (equation numbers from secpe.txt):

1. **LP (Eq 6)** — maximise Σ_i w_i subject to Σ_{i ∈ D_j} w_i ≤ η_j for every secret j and 0 ≤ w_i ≤ 1, with
   ``η_j = Φ⁻¹(1−p_j) − Φ⁻¹(1−r_j)`` (= μ of Eq 4) unless given. Records holding no secret are not in the LP:
   they cannot reveal any secret, so they are always kept (ρ = 1; in privtext they are usually public anyway).
   Solved with ``scipy.optimize.linprog(method="highs")``.
2. **Sampling probabilities** (Alg 1 line 4) — ``sampling``:

   * ``paper``: ρ_i = (1/max w)·w_i/Σ_i' w_i' exactly as Alg 1 writes it. Note Σ_i ρ_i = 1/max w: on average
     only about one secret-holding record (1/η of them) is ever sampled, however many the LP admits — the
     normalisation by Σw looks like a slip (docs/privacy.md);
   * ``max``: ρ_i = w_i/max w (the largest weight is always sampled);
   * ``scaled:c``: ρ_i = c·w_i/max w for c ∈ (0, 1];
   * ``auto``: the candidate among ``paper``, ``max``, ``scaled:c`` for c ∈ :data:`AUTO_SCALES` and ``all``
     (no subsampling: at large r/p, where μ is large, sampling stops paying for itself) with the
     largest **expected signal over total error**, S/E = Σ_i ρ_i / √(σ(ρ)² + Σ_i ρ_i(1−ρ_i)) over the records in
     the LP: the expected number of secret-holding records that reach a released count, over the std of that
     count's error from both sources — the Gaussian noise (σ, times the release sensitivity) and the Bernoulli
     sampling (Poisson-binomial variance). 1/(S/E) is the count's relative error. Counting the sampling error
     matters: a rule that samples about one holder (``paper`` at large r/p) needs no noise at all (σ = 0) yet
     releases a count whose relative error is ≈ 1 — ranking noise-free candidates first, as an earlier version
     did, picked it over ``max`` (relative error 0.019 at r/p = 50 in the Fig 3 set-up; docs/privacy.md §11).
3. **Noise** (Alg 1 lines 5–6) — for secret j the released shift is S_j·Δ + N(0, σ²) with
   S_j = Σ_{i ∈ D_j} Bern(ρ_i) (Poisson-binomial), against N(0, σ²) without the secret. Over ``compositions``
   releases: P_j = (Σ_k Pr[S_j = k]·N(kΔ, σ²))^⊗T, Q_j = N(0, σ²)^⊗T, and
   ``σ_j = min{σ : B_(P_j, Q_j)(p_j) ≤ r_j}``, ``σ = max_j σ_j``. ``blowup``:

   * ``exact`` (default): B from dp_accounting's pessimistic PLD of the mixture (an upper bound on the true
     blow-up, tight to ~1e-5 relative) via :func:`privtext.privacy.calibration.calibrate`;
   * ``paper``: the paper's single-Gaussian approximation ("For numerical stability, we approximate Mixture of
     Gaussian with a single Gaussian", §4), N(E[S_j]·Δ, σ²) with E[S_j] = Σ ρ_i — σ_j = √T·E[S_j]·Δ/μ_j.
     **Not an upper bound**: a mixture puts mass on large shifts that the mean hides (for one record with
     ρ = ½ and Δ/σ = 4 the approximation gives B(1e-4) = 0.044, the mixture 0.30; see the tests);
   * ``worst``: N(m_j·Δ, σ²) with m_j the number of holders with ρ > 0 — valid but ignores sampling.

Secrets with the same multiset of positive ρ's (rounded to 12 digits) and the same (p, r) form one *group* and
share one blow-up computation; the group's mixture uses the element-wise largest ρ of its members, which
dominates each of them (B is monotone in every ρ_i: a larger ρ_i makes S stochastically larger, and for this
monotone-likelihood-ratio family that is a garbling-dominance, preserved by composition).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.special import ndtr, ndtri

from ..errors import DataError, InvalidPrivacyParameter, PrivacyError
from .accounting import blowup_of, certificate_scope, secret_check
from .calibration import SecretTarget, _check_compositions, calibrate
from .conversions import check_pr, mu_from_pr, r_from_mu_p
from .events import (
    SecretEvent,
    gaussian_event,
    mixture_of_gaussians_event,
    no_op_event,
    secret_event,
    self_composed,
)

#: scalings c of ρ = c·w/max w tried by ``sampling="auto"`` (besides ``paper``)
AUTO_SCALES = (1.0, 0.5, 0.25, 0.1, 0.05, 0.02)

Sampling = Literal["paper", "max", "auto"] | str
BlowupMethod = Literal["exact", "paper", "worst"]

_RHO_DIGITS = 12


# ----------------------------------------------------------------------------------------------- primitives


def poisson_binomial_pmf(rho: Sequence[float] | np.ndarray) -> np.ndarray:
    """Pr[S = k], k = 0..m, for S = Σ Bern(ρ_i) (exact dynamic programme, O(m²))."""
    r = np.asarray(rho, dtype=np.float64).ravel()
    if ((r < 0) | (r > 1)).any() or np.isnan(r).any():
        raise InvalidPrivacyParameter(f"sampling probabilities must lie in [0, 1], got {r[(r < 0) | (r > 1)][:3]}")
    pmf = np.ones(1)
    for q in r:
        nxt = np.empty(len(pmf) + 1)
        nxt[0] = pmf[0] * (1 - q)
        nxt[1:-1] = pmf[1:] * (1 - q) + pmf[:-1] * q
        nxt[-1] = pmf[-1] * q
        pmf = nxt
    pmf = np.clip(pmf, 0.0, 1.0)
    return pmf / pmf.sum()


def mixture_event(rho: Sequence[float] | np.ndarray, sigma: float, sensitivity: float = 1.0) -> Any:
    """The per-release event of one secret whose holders are sampled with probabilities ``rho``:
    ``MixtureOfGaussiansDpEvent(σ/Δ, [0, 1, …, m], Pr[S = k])`` — the release shifts by S·Δ (S sampled holders,
    Δ the shift per sampled holder) under noise σ; dividing both by Δ keeps integer sensitivities (the cheap
    bounds in :mod:`.accounting` need them). Released counts shift by S (Δ = 1); Eq 7's centres, normalised by
    their noise scale 2R/n_k, shift by at most S too (Thm 5's proof); counts and centres drawn from one shared
    sample shift together by √2·S (Δ = √2, see :mod:`privtext.mechanisms.clustering`)."""
    if not sensitivity > 0:
        raise InvalidPrivacyParameter(f"sensitivity must be positive, got {sensitivity!r}")
    r = np.asarray(rho, dtype=np.float64).ravel()
    r = r[r > 0]
    if r.size == 0:
        return no_op_event()
    pmf = poisson_binomial_pmf(r)
    return mixture_of_gaussians_event(float(sigma) / float(sensitivity), [float(k) for k in range(len(pmf))],
                                      [float(x) for x in pmf])


def secret_blowup(
    rho: Sequence[float] | np.ndarray,
    *,
    sigma: float,
    p: float,
    compositions: int,
    sensitivity: float = 1.0,
    method: BlowupMethod = "exact",
) -> float:
    """The posterior bound B(p) of one secret after ``compositions`` releases with noise std ``sigma`` and
    per-record sensitivity ``sensitivity`` (Δ), holders sampled with probabilities ``rho``.

    ``exact``: pessimistic PLD of the mixture (upper bound); ``paper``: N(E[S]Δ, σ²) (approximation, may be
    below the truth); ``worst``: N(mΔ, σ²) (upper bound ignoring sampling)."""
    _check_compositions(compositions)
    if not sigma > 0 or not sensitivity > 0:
        raise InvalidPrivacyParameter(f"sigma and sensitivity must be positive, got {sigma!r}, {sensitivity!r}")
    r = np.asarray(rho, dtype=np.float64).ravel()
    r = r[r > 0]
    z = float(sigma) / float(sensitivity)
    if r.size == 0:
        return float(p)
    if method == "paper":
        return float(r_from_mu_p(p, math.sqrt(compositions) * float(r.sum()) / z))
    if method == "worst":
        return float(r_from_mu_p(p, math.sqrt(compositions) * r.size / z))
    if method != "exact":
        raise InvalidPrivacyParameter(f"blowup method must be exact, paper or worst; got {method!r}")
    ev = mixture_event(r, z)
    return blowup_of(self_composed(ev, compositions), p)


@functools.lru_cache(maxsize=4096)
def _group_sigma(rho_key: tuple[float, ...], p: float, r: float, compositions: int, method: str) -> float:
    """σ_j (unit sensitivity) for one group: the smallest σ with B(p) ≤ r over ``compositions`` releases."""
    rho = np.asarray(rho_key, dtype=np.float64)
    if rho.size == 0:
        return 0.0
    mu = float(mu_from_pr(p, r))
    if math.isinf(mu):
        return 0.0
    es, m = float(rho.sum()), int(rho.size)
    # sampling alone may already give (p, r): with no noise the secret is revealed exactly when one of its holders
    # is sampled, B = 1 − π₀^T (1 − p) (π₀ = Π(1 − ρ_i)); then σ_j = 0 (the paper's approximation cannot see this)
    if method == "exact" and float(rho.max()) < 1:
        log_pi0 = compositions * float(np.sum(np.log1p(-rho)))
        if -math.expm1(log_pi0) * (1 - p) + p <= r:
            return 0.0
    if method == "paper":
        return math.sqrt(compositions) * es / mu
    if method == "worst":
        return math.sqrt(compositions) * m / mu
    pmf = poisson_binomial_pmf(rho)
    sens = [float(k) for k in range(len(pmf))]
    probs = [float(x) for x in pmf]

    def make(s: float) -> Any:
        return self_composed(mixture_of_gaussians_event(s, sens, probs), compositions)

    worst = math.sqrt(compositions) * m / mu  # N(mΔ): a valid bound, so σ_j ≤ worst (up to discretisation)
    guess = min(max(math.sqrt(compositions) * es / mu, worst * 1e-3), worst)
    return calibrate(make, SecretTarget(p, r), lower=worst * 1e-4, upper=worst * 1.01, guess=guess)


# ---------------------------------------------------------------------------------------------------- LP


def _as_csr(membership: Any) -> sp.csr_matrix:
    m = getattr(membership, "matrix", membership)
    if sp.issparse(m):
        csr = sp.csr_matrix(m)
    else:
        try:
            arr = np.asarray(m)
        except Exception:
            raise DataError(f"membership must be a scipy.sparse matrix or a 2-d array, got {type(m).__name__}") from None
        if arr.ndim != 2:
            raise DataError(f"membership must be 2-d (records × secrets), got shape {arr.shape}")
        csr = sp.csr_matrix(arr)
    csr.eliminate_zeros()
    if csr.nnz and not np.all(csr.data == 1):
        bad = csr.data[csr.data != 1][0]
        raise DataError(f"membership must be 0/1 (record i holds secret j or not), found the value {bad!r}")
    return csr.astype(np.float64)


def lp_weights(membership: Any, eta: Any) -> tuple[np.ndarray, np.ndarray]:
    """Solve Eq 6: max Σ w_i s.t. Σ_{i ∈ D_j} w_i ≤ η_j, 0 ≤ w ≤ 1, over the records holding some secret.

    Returns (w per record — 0 for records outside the LP, in_lp mask). HiGHS returns a vertex; values are
    clipped to [0, 1] and |w| < 1e-12 set to 0."""
    csr = _as_csr(membership)
    n, m = csr.shape
    eta_a = np.broadcast_to(np.asarray(eta, dtype=np.float64), (m,)).copy()
    if (eta_a <= 0).any() or np.isnan(eta_a).any():
        raise InvalidPrivacyParameter(f"eta must be positive for every secret, got {eta_a[~(eta_a > 0)][0]!r}")
    held = np.asarray(csr.getnnz(axis=1)) > 0
    w = np.zeros(n)
    rows = np.flatnonzero(held)
    if rows.size == 0:
        return w, held
    sub = csr[rows].T.tocsr()  # secrets × LP records
    active = (np.asarray(sub.getnnz(axis=1)) > 0) & np.isfinite(eta_a)
    if active.any():
        res = linprog(-np.ones(rows.size), A_ub=sub[active], b_ub=eta_a[active], bounds=(0, 1), method="highs")
        if res.status != 0:
            raise PrivacyError(f"SecretNoise LP (Eq 6) failed: {res.message}")
        x = np.clip(res.x, 0.0, 1.0)
    else:
        x = np.ones(rows.size)
    x[x < 1e-12] = 0.0
    w[rows] = x
    return w, held


def sampling_probabilities(w: np.ndarray, in_lp: np.ndarray, mode: str) -> np.ndarray:
    """ρ per record from LP weights (records outside the LP get 1). ``mode``: paper | max | scaled:c | all
    (ρ = 1 for every secret holder: no subsampling)."""
    w = np.asarray(w, dtype=np.float64)
    rho = np.ones_like(w)
    lw = w[in_lp]
    if mode == "all":  # no subsampling: every secret holder in every release (the GDP baselines' records)
        rho[in_lp] = 1.0
        return rho
    wmax = float(lw.max()) if lw.size else 0.0
    if wmax <= 0:
        rho[in_lp] = 0.0
        return rho
    if mode == "paper":
        rho[in_lp] = (1.0 / wmax) * lw / lw.sum()
    elif mode == "max":
        rho[in_lp] = lw / wmax
    elif mode.startswith("scaled:"):
        try:
            c = float(mode.split(":", 1)[1])
        except ValueError:
            raise InvalidPrivacyParameter(f"sampling {mode!r}: expected scaled:c with a number c") from None
        if not 0 < c <= 1:
            raise InvalidPrivacyParameter(f"sampling {mode!r}: c must lie in (0, 1]")
        rho[in_lp] = c * lw / wmax
    else:
        raise InvalidPrivacyParameter(f"sampling must be paper, max, scaled:c, all or auto; got {mode!r}")
    return np.clip(rho, 0.0, 1.0)


# ---------------------------------------------------------------------------------------------------- result


@dataclass(frozen=True)
class SecretGroup:
    """Secrets sharing one ρ-multiset and (p, r): one blow-up computation."""

    id: str
    rho: tuple[float, ...]  # sorted, positive; element-wise max over the members
    p: float
    r: float
    sigma: float  # σ_j for unit sensitivity (an upper bound on it when ``exact`` is False)
    secrets: tuple[int, ...]
    exact: bool = True

    @property
    def expected_count(self) -> float:
        return float(sum(self.rho))


@dataclass(frozen=True)
class SecretNoiseResult:
    """Output of :func:`secret_noise`. Arrays are read-only.

    ``sigma`` is the noise std of every one of the ``compositions`` releases, each of which shifts by S·Δ with
    Δ = ``release_sensitivity`` (so ``sigma / release_sensitivity`` is the noise multiplier; SecPE's shared-sample
    mode uses Δ = √2, everything else Δ = 1);
    ``rho``/``w`` are per record (records holding no secret: ρ = 1, w = 0, ``in_lp`` False);
    ``secret_sigma``, ``eta``, ``groups`` are per secret (``groups[j]`` is a key of ``group_info``);
    ``secret_sigma_exact[j]`` is False where σ_j was only bounded (σ_j ≤ ``secret_sigma[j]`` ≤ ``sigma``): such
    a secret could not set the maximum, so it was checked rather than calibrated."""

    sigma: float
    rho: np.ndarray
    w: np.ndarray
    in_lp: np.ndarray
    secret_sigma: np.ndarray
    secret_sigma_exact: np.ndarray
    groups: tuple[str, ...]
    group_info: Mapping[str, SecretGroup]
    eta: np.ndarray
    p: np.ndarray
    r: np.ndarray
    mode: str
    sampling: str
    blowup: str
    compositions: int
    candidates: tuple[dict[str, Any], ...] = ()
    release_sensitivity: float = 1.0
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def signal(self) -> float:
        """Σ ρ over the LP records: expected number of secret-holding records sampled per release."""
        return float(self.rho[self.in_lp].sum())

    def events(self, sigma: float | None = None) -> dict[str, Any]:
        """Per group with a positive ρ: the ``MixtureOfGaussiansDpEvent`` of ONE release with noise multiplier
        ``sigma`` (default: :attr:`sigma`)."""
        s = self.sigma if sigma is None else float(sigma)
        return {gid: mixture_event(g.rho, s, self.release_sensitivity) for gid, g in self.group_info.items() if g.rho}

    def secret_events(self, sigma: float | None = None, *, accounting: BlowupMethod | None = None,
                      per_release: int = 1) -> dict[str, SecretEvent]:
        """As :meth:`events`, wrapped with each group's (p, r) and secrets — for ``Release.secret_events``.

        ``per_release``: how many of the ``compositions`` one recorded release spends (SecPE's independent-sample
        mode records counts and centres as one release of two compositions: the event is then
        ``SelfComposedDpEvent(e, 2)``, and ``planned`` = compositions / per_release releases).

        ``accounting`` (default: this result's ``blowup``) picks what the ledger will compose: ``exact`` the true
        mixture event; ``worst`` ``GaussianDpEvent(σ/m)`` (valid); ``paper`` the paper's stand-in
        ``GaussianDpEvent(σ/E[S])``, marked ``approximate`` — the ledger then states that the guarantee is not
        proven for those groups."""
        s = self.sigma if sigma is None else float(sigma)
        z = s / self.release_sensitivity
        how = accounting or self.blowup
        if per_release < 1 or self.compositions % per_release:
            raise InvalidPrivacyParameter(
                f"per_release={per_release} must divide the {self.compositions} compositions σ was calibrated for")
        out: dict[str, SecretEvent] = {}
        for gid, g in self.group_info.items():
            if not g.rho:
                continue
            if how == "exact":
                ev = mixture_event(g.rho, z)
            elif how == "worst":
                ev = gaussian_event(z / len(g.rho))
            elif how == "paper":
                ev = gaussian_event(z / sum(g.rho))
            else:
                raise InvalidPrivacyParameter(f"accounting must be exact, worst or paper; got {how!r}")
            if per_release > 1:
                ev = self_composed(ev, per_release)
            out[gid] = secret_event(ev, p=g.p, r=g.r, secrets=g.secrets, approximate=how == "paper",
                                    planned=self.compositions // per_release)
        return out

    def blowups(self, sigma: float | None = None, *, method: BlowupMethod = "exact") -> dict[str, float]:
        """B(p) per group after all ``compositions`` releases at ``sigma`` (check: each ≤ its r)."""
        s = self.sigma if sigma is None else float(sigma)
        return {gid: secret_blowup(g.rho, sigma=s, p=g.p, compositions=self.compositions, method=method,
                                   sensitivity=self.release_sensitivity)
                for gid, g in self.group_info.items() if g.rho}

    def summary(self) -> dict[str, Any]:
        return {
            "sigma": self.sigma, "mode": self.mode, "sampling": self.sampling, "blowup": self.blowup,
            "compositions": self.compositions, "release_sensitivity": self.release_sensitivity,
            "records": int(self.rho.size),
            "records_in_lp": int(self.in_lp.sum()), "records_with_positive_rho": int((self.rho[self.in_lp] > 0).sum()),
            "expected_sampled": self.signal, "secrets": int(self.secret_sigma.size), "groups": len(self.group_info),
            "candidates": list(self.candidates), "timings": dict(self.timings),
        }


def _ro(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    a.setflags(write=False)
    return a


def _groups_for(csr_t: sp.csr_matrix, rho: np.ndarray, p: np.ndarray, r: np.ndarray) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for j in range(csr_t.shape[0]):
        idx = csr_t.indices[csr_t.indptr[j]:csr_t.indptr[j + 1]]
        vals = rho[idx]
        vals = np.sort(np.round(vals[vals > 0], _RHO_DIGITS))
        key = (tuple(float(v) for v in vals), float(p[j]), float(r[j]))
        out.setdefault(key, []).append(j)
    return out


def _sigma_lower(rho: tuple[float, ...], p: float, r: float, compositions: int) -> float:
    """A cheap lower bound on σ_j: the largest σ (to 1e-6) at which the test on the sum of the T outputs
    (:func:`~privtext.privacy.accounting.blowup_lower_bound`) still succeeds with probability > r."""
    if not rho:
        return 0.0
    pmf = poisson_binomial_pmf(rho)
    total, base, n = np.ones(1), pmf, compositions
    while n:
        if n & 1:
            total = np.clip(np.convolve(total, base), 0, None)
        n >>= 1
        if n:
            base = np.clip(np.convolve(base, base), 0, None)
    k = np.arange(total.size)
    zp = float(ndtri(p))
    lb = lambda s: float(np.dot(total, ndtr(k / (s * math.sqrt(compositions)) + zp)))  # noqa: E731
    mu = float(mu_from_pr(p, r))
    hi = math.sqrt(compositions) * len(rho) / mu if math.isfinite(mu) else 0.0  # LB(hi) ≤ B_worst(hi) = r
    lo = hi * 1e-9
    if hi == 0 or lb(lo) <= r:
        return 0.0
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if lb(mid) > r:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-6:
            break
    return lo


def _evaluate(csr_t: sp.csr_matrix, rho: np.ndarray, p: np.ndarray, r: np.ndarray, compositions: int,
              method: str, exact_all: bool = False
              ) -> tuple[float, dict[str, SecretGroup], tuple[str, ...], np.ndarray, np.ndarray]:
    """σ = max_j σ_j over the groups. With ``exact``, groups are visited by decreasing cheap lower bound on σ_j;
    a group whose lower bound does not exceed the current maximum σ* is only *checked* at σ* (cheap bounds,
    then one PLD) — if protected there, σ_j ≤ σ* and it is not calibrated (its reported σ_j is then the upper
    bound σ*, flagged not exact). Only groups that can set the maximum get a full calibration."""
    groups = _groups_for(csr_t, rho, p, r)
    keys = sorted(groups, key=lambda k: (len(k[0]), k[0], k[1], k[2]))
    reps: dict[tuple, tuple[float, ...]] = {}
    for key in keys:
        # element-wise max of the members' sorted ρ (rounding merged values within 5e-13)
        rep = np.zeros(len(key[0]))
        for j in groups[key]:
            idx = csr_t.indices[csr_t.indptr[j]:csr_t.indptr[j + 1]]
            v = np.sort(rho[idx][rho[idx] > 0])
            rep = np.maximum(rep, v)
        reps[key] = tuple(float(min(1.0, x)) for x in rep)
    sig: dict[tuple, tuple[float, bool]] = {}
    if method == "exact" and not exact_all:
        lows = {key: _sigma_lower(reps[key], key[1], key[2], compositions) for key in keys}
        best = 0.0
        for key in sorted(keys, key=lambda k: -lows[k]):
            rep = reps[key]
            if not rep:
                sig[key] = (0.0, True)
                continue
            if lows[key] <= best and best > 0:
                ev = self_composed(mixture_event(rep, best), compositions)
                if secret_check(ev, key[1], key[2])[0]:
                    sig[key] = (best, False)
                    continue
            s_ = _group_sigma(rep, key[1], key[2], compositions, method)
            sig[key] = (s_, True)
            best = max(best, s_)
    else:
        for key in keys:
            sig[key] = (_group_sigma(reps[key], key[1], key[2], compositions, method), True)
    info: dict[str, SecretGroup] = {}
    per_secret = np.zeros(csr_t.shape[0])
    exact = np.ones(csr_t.shape[0], dtype=bool)
    labels: list[str] = [""] * csr_t.shape[0]
    for n, key in enumerate(keys):
        gid = f"g{n:04d}"
        s_, ex = sig[key]
        info[gid] = SecretGroup(id=gid, rho=reps[key], p=key[1], r=key[2], sigma=s_, secrets=tuple(groups[key]),
                                exact=ex)
        for j in groups[key]:
            per_secret[j] = s_
            exact[j] = ex
            labels[j] = gid
    sigma = float(per_secret.max()) if per_secret.size else 0.0
    return sigma, info, tuple(labels), per_secret, exact


def secret_noise(
    membership: Any,
    *,
    p: Any,
    r: Any,
    compositions: int,
    sampling: Sampling = "auto",
    eta: Any = None,
    blowup: BlowupMethod = "exact",
    exact_per_secret: bool = False,
    release_sensitivity: float = 1.0,
) -> SecretNoiseResult:
    """SecretNoise (SecPE Alg 1): LP weights, sampling probabilities and the noise multiplier.

    ``membership``: records × secrets 0/1 matrix (scipy.sparse, dense array, or an object with ``.matrix``
    such as :class:`privtext.secrets.SecretMatrix`). ``p``, ``r``: scalars or per-secret vectors.
    ``compositions``: number of releases sharing σ (2·T for SecPE's counts + centres). ``eta``: LP capacities
    (default Φ⁻¹(1−p_j) − Φ⁻¹(1−r_j)). ``sampling``: paper | max | scaled:c | auto. ``blowup``: exact | paper |
    worst. ``release_sensitivity``: Δ, the shift of one release per sampled holder (σ is calibrated for unit
    shifts and multiplied by Δ). ``exact_per_secret``: calibrate every group (slow with many groups); by default a group that cannot
    set the maximum is only checked at the current maximum and reported with that upper bound
    (``secret_sigma_exact`` False). See the module docstring for every step.
    """
    with certificate_scope():  # deterministic: independent of accounting checks made earlier in this process
        return _secret_noise(membership, p=p, r=r, compositions=compositions, sampling=sampling, eta=eta,
                             blowup=blowup, exact_per_secret=exact_per_secret,
                             release_sensitivity=release_sensitivity)


def _secret_noise(membership: Any, *, p: Any, r: Any, compositions: int, sampling: Sampling, eta: Any,
                  blowup: BlowupMethod, exact_per_secret: bool, release_sensitivity: float) -> SecretNoiseResult:
    t0 = time.perf_counter()
    _check_compositions(compositions)
    if not (release_sensitivity > 0 and math.isfinite(release_sensitivity)):
        raise InvalidPrivacyParameter(f"release_sensitivity must be a positive number, got {release_sensitivity!r}")
    csr = _as_csr(membership)
    m = csr.shape[1]
    pa, ra = check_pr(p, r)
    if pa.ndim == 0:
        pa, ra = np.full(m, float(pa)), np.full(m, float(ra))
    elif pa.shape != (m,):
        raise InvalidPrivacyParameter(f"per-secret p and r must have one entry per secret ({m}), got {pa.shape}")
    pa, ra = pa.astype(np.float64), ra.astype(np.float64)
    if eta is None:
        eta_a = np.asarray(mu_from_pr(pa, ra), dtype=np.float64).reshape(m)
    else:
        eta_a = np.broadcast_to(np.asarray(eta, dtype=np.float64), (m,)).copy()
        if (eta_a <= 0).any() or np.isnan(eta_a).any():
            raise InvalidPrivacyParameter("eta must be positive: it caps Σ w over the holders of each secret")
    if blowup not in ("exact", "paper", "worst"):
        raise InvalidPrivacyParameter(f"blowup must be exact, paper or worst; got {blowup!r}")
    w, in_lp = lp_weights(csr, eta_a)
    t_lp = time.perf_counter() - t0
    csr_t = csr.T.tocsr()

    if sampling == "auto":
        modes = ["paper", "max", *[f"scaled:{c:g}" for c in AUTO_SCALES if c != 1.0], "all"]
    else:
        modes = [str(sampling)]
    cands = []
    best = None
    for mode in modes:
        rho = sampling_probabilities(w, in_lp, mode)
        sigma, info, labels, per_secret, exact = _evaluate(csr_t, rho, pa, ra, compositions, blowup,
                                                           exact_per_secret)
        r_in = rho[in_lp]
        signal = float(r_in.sum())
        error = math.sqrt((sigma * release_sensitivity) ** 2 + float((r_in * (1.0 - r_in)).sum()))
        score = signal / error if error > 0 else (math.inf if signal > 0 else 0.0)
        cands.append({"mode": mode, "sigma": sigma, "signal": signal, "score": score})
        rank = (score, signal)  # signal over the released count's total error (noise and sampling)
        if best is None or rank > best[0]:
            best = (rank, mode, rho, sigma, info, labels, per_secret, exact)
    assert best is not None
    _, mode, rho, sigma, info, labels, per_secret, exact = best
    sigma, per_secret = sigma * release_sensitivity, per_secret * release_sensitivity  # unit shifts → Δ
    for c in cands:
        c["sigma"] *= release_sensitivity
    t_total = time.perf_counter() - t0
    return SecretNoiseResult(
        sigma=sigma, rho=_ro(rho), w=_ro(w), in_lp=_ro(in_lp), secret_sigma=_ro(per_secret),
        secret_sigma_exact=_ro(exact), groups=labels,
        group_info=dict(info), eta=_ro(eta_a), p=_ro(pa), r=_ro(ra), mode=mode, sampling=str(sampling),
        blowup=blowup, compositions=int(compositions), candidates=tuple(cands),
        release_sensitivity=float(release_sensitivity), timings={"lp_s": round(t_lp, 4), "noise_s": round(t_total - t_lp, 4), "total_s": round(t_total, 4)},
    )
