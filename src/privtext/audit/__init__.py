"""Empirical privacy audits: run a mechanism many times on a worst-case neighbouring pair and bound, from below,
how well the best attack can tell the two apart — then check the bound against the claim.

A guarantee is a claim about *every* attack; an audit tries *one* good attack and measures its success with a
Clopper-Pearson confidence interval. If the attack does better than the claim allows (its lower confidence bound
exceeds the claim), the claim is false for this implementation — the audit fails. An audit that passes does not
prove the claim (another attack might do better); it catches implementations that deliver less than they
account for: noise that is smaller than recorded, a sensitivity that is larger, a subsampled release that shares
its sample with another (the SecPE bug of the first review).

* DP / GDP mechanisms (Aug-PE's vote histogram, the DP label histogram): the pair is a data set with and without
  one canary record whose vote lands in a known bin; the attack thresholds that bin at the midpoint of the two
  exact values (the likelihood-ratio test for a Gaussian shift, fixed in advance). From the false-positive and
  false-negative rates' upper confidence bounds it reports a lower bound on μ (GDP: μ ≥ Φ⁻¹(1−FPR) − Φ⁻¹(FNR),
  Dong et al. 2019) and on ε at the claimed δ (ε ≥ log((1−δ−FNR)/FPR)); the claim is the recorded event's μ.
* Secret protection (SecPE's clustering, with its Bernoulli sampling): the pair is the data with and without one
  secret holder placed where it moves its cluster most (antipodal to the public centre); the attack thresholds
  the standardised count shift plus the standardised centre shift along the holder's direction. The threshold
  gives a false-positive rate of at most p' (1e-3 by default: the prior p = 1e-4 of the papers would need millions
  of trials) on the no-secret outputs: by default from upper confidence bounds on their location and scale (they
  are public statistics plus Gaussian noise), or from their empirical quantile (``q_model="empirical"``, with the
  rate's Clopper-Pearson upper bound); the claim is the accountant's blow-up B(p') of the recorded events (B grows
  with p, so using an upper bound on the rate is conservative); the estimate is the lower confidence bound of the
  attack's success with the secret present.

Every audit runs the mechanism functions the methods run (``dp_vote_histogram``, ``dp_label_histogram``,
``secret_clustering``) with the claims computed by the accountant the ledger uses. ``privtext audit RUN_DIR``
audits each kind of release a run recorded, at its recorded parameters, on synthetic worst-case inputs (it never
reads the run's private data).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri
from scipy.stats import beta, chi2
from scipy.stats import t as t_dist

from ..errors import ConfigError


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 − alpha) Clopper-Pearson interval for a binomial proportion k/n."""
    if n <= 0 or not 0 <= k <= n:
        raise ConfigError(f"need 0 ≤ k ≤ n and n > 0, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


@dataclass(frozen=True)
class AuditResult:
    """One audit: ``estimate`` is the attack's lower confidence bound on the audited quantity (μ for DP/GDP
    mechanisms, the posterior for secret protection), ``interval`` its two-sided (1 − alpha) interval, ``claim``
    the value the accounting promises; ``passed`` is ``estimate ≤ claim``."""

    mechanism: str
    quantity: str  # "mu" or "posterior"
    claim: float
    estimate: float
    interval: tuple[float, float]
    trials: int
    alpha: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.estimate <= self.claim * (1 + 1e-12)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def line(self) -> str:
        lo, hi = self.interval
        return (f"{self.mechanism:34} claim {self.quantity} ≤ {self.claim:.4g}; attack {self.estimate:.4g} "
                f"({100 * (1 - self.alpha):g}% CI {lo:.4g}–{hi:.4g}), {self.trials} trials: {'pass' if self.passed else 'FAIL'}")


# ------------------------------------------------------------------------------------------- DP / GDP audits


def _mu_bounds(fp: int, fn: int, n: int, alpha: float) -> tuple[float, float, float]:
    """(lower confidence bound, point estimate, upper bound) of μ from the false-positive and false-negative counts
    of a fixed test run n times on each side; each rate's interval at confidence 1 − alpha/2 (Bonferroni)."""
    fpr_lo, fpr_hi = clopper_pearson(fp, n, alpha / 2)
    fnr_lo, fnr_hi = clopper_pearson(fn, n, alpha / 2)

    def mu(fpr: float, fnr: float) -> float:
        fpr, fnr = min(max(fpr, 1e-300), 1.0), min(max(fnr, 1e-300), 1.0)
        return float(ndtri(1 - fpr) - ndtri(fnr)) if fpr < 1 else -math.inf

    return mu(fpr_hi, fnr_hi), mu(max(fp, 0.5) / n, max(fn, 0.5) / n), mu(fpr_lo, fnr_lo)


def audit_gaussian_release(
    run_once: Callable[[bool, np.random.Generator], float],
    *,
    base: float,
    shift: float,
    claim_mu: float,
    trials: int,
    rng: np.random.Generator,
    alpha: float = 0.05,
    mechanism: str = "gaussian release",
    delta: float | None = None,
) -> AuditResult:
    """Audit a release claimed to be ``claim_mu``-GDP for the pair (without, with) the canary.

    ``run_once(with_canary, rng)`` runs the mechanism once and returns the statistic (the canary's bin); its exact
    value is ``base`` without the canary and ``base + shift`` with it. The test rejects "without" when the
    statistic exceeds the midpoint, fixed before any trial."""
    if trials < 10:
        raise ConfigError(f"an audit needs at least 10 trials per side, got {trials}")
    tau = base + shift / 2
    fp = sum(run_once(False, rng) > tau for _ in range(trials))
    fn = sum(run_once(True, rng) <= tau for _ in range(trials))
    lo, point, hi = _mu_bounds(int(fp), int(fn), trials, alpha)
    details: dict[str, Any] = {"false_positives": int(fp), "false_negatives": int(fn), "threshold": tau,
                               "mu_point": point}
    if delta is not None:
        fpr_hi = clopper_pearson(int(fp), trials, alpha / 2)[1]
        fnr_hi = clopper_pearson(int(fn), trials, alpha / 2)[1]
        eps = max(math.log(max(1 - delta - fnr_hi, 1e-300) / fpr_hi), math.log(max(1 - delta - fpr_hi, 1e-300) / fnr_hi))
        details["epsilon_lower_bound"] = max(eps, 0.0)
        details["delta"] = delta
    return AuditResult(mechanism=mechanism, quantity="mu", claim=float(claim_mu), estimate=max(lo, 0.0),
                       interval=(max(lo, 0.0), hi), trials=trials, alpha=alpha, details=details)


def audit_vote_histogram(noise_multiplier: float, *, sensitivity: float = 1.0, trials: int = 2000,
                         rng: np.random.Generator, alpha: float = 0.05, actual_noise_scale: float = 1.0,
                         delta: float | None = None) -> AuditResult:
    """Aug-PE's DP nearest-neighbour vote histogram (``privtext.mechanisms.voting.dp_vote_histogram``) at noise
    multiplier σ and sensitivity Δ: k = Δ canary records (a secret group, or one record) all vote for candidate 0.
    The claim is μ = 1/σ per release (``GaussianDpEvent(σ)``). ``actual_noise_scale`` < 1 runs a broken mechanism
    (noise scaled down) against the same claim — a canary the audit must catch."""
    from ..mechanisms.voting import dp_vote_histogram

    k = round(sensitivity)
    if k < 1 or abs(k - sensitivity) > 1e-9:
        raise ConfigError(f"the vote audit needs an integer sensitivity (records per canary group), got {sensitivity}")
    gen = np.random.default_rng(12345)  # public, fixed inputs
    d = 8
    cand = np.eye(d, dtype=np.float32)[:6]
    priv = np.eye(d, dtype=np.float32)[gen.integers(1, 6, size=30)]  # nobody else votes for candidate 0
    canary = np.repeat(cand[:1], k, axis=0)

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        x = np.concatenate([priv, canary]) if with_canary else priv
        rel, _ = dp_vote_histogram(x, cand, noise_multiplier=noise_multiplier * actual_noise_scale,
                                   sensitivity=sensitivity, rng=r, center=None)
        return float(rel.raw_noisy[0])

    std = noise_multiplier * sensitivity
    res = audit_gaussian_release(run_once, base=0.0, shift=float(k), claim_mu=1.0 / noise_multiplier, trials=trials,
                                 rng=rng, alpha=alpha, mechanism=f"dp_vote_histogram (σ={noise_multiplier:.4g}, Δ={k})",
                                 delta=delta)
    res.details["noise_std"] = std
    return res


def audit_label_histogram(noise_multiplier: float, *, sensitivity: float = 1.0, trials: int = 2000,
                          rng: np.random.Generator, alpha: float = 0.05, actual_noise_scale: float = 1.0,
                          delta: float | None = None) -> AuditResult:
    """The DP label histogram (``privtext.mechanisms.labels.dp_label_histogram``): k = Δ canary records with label
    0; claim μ = 1/σ."""
    from ..mechanisms.labels import dp_label_histogram

    k = round(sensitivity)
    groups = np.repeat(np.arange(4), 10)

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        g = np.concatenate([groups, np.zeros(k, dtype=np.int64)]) if with_canary else groups
        noisy, _ = dp_label_histogram(g, 4, noise_multiplier=noise_multiplier * actual_noise_scale,
                                      sensitivity=sensitivity, rng=r)
        return float(noisy[0])

    return audit_gaussian_release(run_once, base=10.0, shift=float(k), claim_mu=1.0 / noise_multiplier,
                                  trials=trials, rng=rng, alpha=alpha,
                                  mechanism=f"dp_label_histogram (σ={noise_multiplier:.4g}, Δ={k})", delta=delta)


def _public_code_topq_sensitivity(q: int) -> float:
    """The sensitivity the public WASP code computes, ``2 - 1/(2^(Q-1))`` with Python's ``^`` (XOR, not a
    power): Q = 4 gives 2 − 1/(2 XOR 3) = 2 − 1/1 = 1 (Q = 3 divides by zero). Kept only to build the audit's
    canary; privtext never noises with it."""
    x = 2 ^ (q - 1)
    if x == 0:
        raise ConfigError(f"the public code's formula divides by zero at Q = {q}")
    return 2 - 1 / x


def audit_topq_histograms(noise_multiplier: float, *, q: int, trials: int = 2000, rng: np.random.Generator,
                          alpha: float = 0.05, actual_noise_scale: float = 1.0,
                          delta: float | None = None) -> AuditResult:
    """WASP's Top-Q nearest and furthest vote histograms (``privtext.mechanisms.topq.dp_topq_histograms``) at
    noise multiplier z: one canary private sample whose Q nearest and Q furthest candidates are 2Q distinct bins,
    so it moves the pair (Hⁿ, Hᶠ) by a vector v of norm exactly Δ_Q = √(2Σ4^−(q−1)). The attack projects the
    released pair (minus the exact pair without the canary) on v/‖v‖ — the likelihood-ratio statistic for a
    Gaussian shift — and thresholds at ‖v‖/2. The claim is μ = 1/z per release (``topq_event(z)``).
    ``actual_noise_scale`` < 1 under-noises against the same claim: the public WASP code's XOR sensitivity at
    Q = 4 is the scale 1/Δ_4 ≈ 0.61 (:func:`_public_code_topq_sensitivity`)."""
    from ..mechanisms.topq import dp_topq_histograms, topq_histograms, topq_sensitivity

    d = 4 * q + 4
    cand = np.eye(d, dtype=np.float32)[: 2 * q + 2]
    canary = np.zeros((1, d), dtype=np.float32)
    canary[0, : 2 * q + 2] = np.linspace(1.0, -1.0, 2 * q + 2)  # nearest: bins 0..q-1; furthest: the last q
    gen = np.random.default_rng(54321)  # public, fixed inputs
    priv = gen.standard_normal((25, d)).astype(np.float32)
    without = np.concatenate(topq_histograms(priv, cand, q=q))
    with_c = np.concatenate(topq_histograms(np.concatenate([priv, canary]), cand, q=q))
    v = with_c - without
    norm = float(np.linalg.norm(v))
    if abs(norm - topq_sensitivity(q)) > 1e-6:
        raise AssertionError(f"the Top-{q} canary moved the pair by {norm}, not Δ_Q = {topq_sensitivity(q)}")
    u = v / norm

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        x = np.concatenate([priv, canary]) if with_canary else priv
        rel, _ = dp_topq_histograms(x, cand, q=q, noise_multiplier=noise_multiplier * actual_noise_scale, rng=r)
        return float((np.concatenate([rel.nearest, rel.furthest]) - without) @ u)

    res = audit_gaussian_release(run_once, base=0.0, shift=norm, claim_mu=1.0 / noise_multiplier, trials=trials,
                                 rng=rng, alpha=alpha,
                                 mechanism=f"dp_topq_histograms (z={noise_multiplier:.4g}, Q={q})", delta=delta)
    res.details["sensitivity"] = norm
    return res


# ------------------------------------------------------------------------------------------- pure ε (Laplace)


def audit_laplace_release(
    run_once: Callable[[bool, np.random.Generator], np.ndarray],
    *,
    base: np.ndarray,
    claim_epsilon: float,
    trials: int,
    rng: np.random.Generator,
    alpha: float = 0.05,
    mechanism: str = "laplace release",
) -> AuditResult:
    """Audit a release claimed to be pure ``claim_epsilon``-DP for the pair (without, with) the canary.

    ``run_once(with_canary, rng)`` returns the noisy values of the m bins the canary raises by exactly 1 each
    (``base`` without it). With Laplace(b) noise the likelihood ratio is largest, e^{m/b}, on the event
    E = {every bin ≥ its base + 1}: Pr_with[E] = 2^−m, Pr_without[E] = (e^{−1/b}/2)^m — so the test "reject
    *without* on E" reaches the mechanism's true ε = m/b, the worst case of pure DP (no δ to hide in). The
    estimate is log(TPR_lo / FPR_hi) from the Clopper-Pearson bounds (confidence 1 − alpha/2 each)."""
    if trials < 10:
        raise ConfigError(f"an audit needs at least 10 trials per side, got {trials}")
    thr = np.asarray(base, dtype=np.float64) + 1.0
    fp = sum(bool(np.all(run_once(False, rng) >= thr)) for _ in range(trials))
    tp = sum(bool(np.all(run_once(True, rng) >= thr)) for _ in range(trials))
    fpr_lo, fpr_hi = clopper_pearson(int(fp), trials, alpha / 2)
    tpr_lo, tpr_hi = clopper_pearson(int(tp), trials, alpha / 2)

    def eps(tpr: float, fpr: float) -> float:
        return math.log(tpr / fpr) if tpr > 0 and fpr > 0 else (math.inf if tpr > 0 else 0.0)

    lo, hi = max(eps(tpr_lo, fpr_hi), 0.0), eps(tpr_hi, fpr_lo)
    return AuditResult(mechanism=mechanism, quantity="epsilon", claim=float(claim_epsilon), estimate=lo,
                       interval=(lo, hi), trials=trials, alpha=alpha,
                       details={"true_positives": int(tp), "false_positives": int(fp),
                                "epsilon_point": eps(max(tp, 0.5) / trials, max(fp, 0.5) / trials)})


def audit_dp_vocabulary(epsilon: float, *, r: int = 2, trials: int = 5000, rng: np.random.Generator,
                        alpha: float = 0.05, actual_noise_scale: float = 1.0) -> AuditResult:
    """DP-KPS's DP vocabulary (App A.1, ``privtext.mechanisms.vocabulary.dp_vocabulary``): a canary document
    holding r fresh vocabulary terms raises r bins by 1 (Δ₁ = r); claim ε. The whole noisy histogram is read
    (``size`` = |V|), so the audit sees the Laplace release before the top-V post-processing."""
    from ..data.vocabulary import PublicVocabulary
    from ..mechanisms.vocabulary import dp_vocabulary

    terms = tuple(f"term{chr(97 + i)}" for i in range(r + 4))
    vocab = PublicVocabulary(terms=terms, source="audit")
    docs = [f"{terms[r]} {terms[r + 1]}", terms[r + 2], f"{terms[r + 3]} {terms[r]}"]  # other documents
    canary = " ".join(terms[:r])  # terms a..: held by no other document
    base = np.zeros(r)

    def run_once(with_canary: bool, g: np.random.Generator) -> np.ndarray:
        texts = [*docs, canary] if with_canary else docs
        rel, _ = dp_vocabulary(texts, vocab, r=r, epsilon=epsilon / actual_noise_scale, size=len(terms), rng=g)
        noisy = dict(zip(rel.indices.tolist(), rel.noisy_counts.tolist(), strict=True))
        return np.array([noisy[i] for i in range(r)])

    return audit_laplace_release(run_once, base=base, claim_epsilon=epsilon, trials=trials, rng=rng, alpha=alpha,
                                 mechanism=f"dp_vocabulary (ε={epsilon:.4g}, r={r})")


def audit_dp_term_histogram(epsilon: float, *, trials: int = 5000, rng: np.random.Generator,
                            alpha: float = 0.05, actual_noise_scale: float = 1.0) -> AuditResult:
    """DP-KPS's per-class DP term histogram (``privtext.mechanisms.kde.dp_term_histogram``, weighting "mean",
    Δ₁ = 1): a canary document of class 0 holding one term puts its whole unit of mass on one bin, the worst
    case of the sensitivity bound; claim ε."""
    from ..mechanisms.kde import dp_term_histogram

    docs = [[0], [0, 1], [1, 2], [2], [0, 2]]
    classes = [0, 0, 1, 1, 0]

    def run_once(with_canary: bool, g: np.random.Generator) -> np.ndarray:
        d, c = ([*docs, [0]], [*classes, 0]) if with_canary else (docs, classes)
        rel, _ = dp_term_histogram(d, c, n_classes=2, n_terms=3, epsilon=epsilon / actual_noise_scale, rng=g)
        return np.asarray(rel.noisy, dtype=np.float64)[0, :1]

    base = np.array([1.0 + 0.5 + 0.5])  # class 0's exact mass on term 0 without the canary
    return audit_laplace_release(run_once, base=base, claim_epsilon=epsilon, trials=trials, rng=rng, alpha=alpha,
                                 mechanism=f"dp_term_histogram (ε={epsilon:.4g})")


def audit_laplace_label_histogram(epsilon: float, *, trials: int = 5000, rng: np.random.Generator,
                                  alpha: float = 0.05, actual_noise_scale: float = 1.0) -> AuditResult:
    """The pure-DP label histogram (``privtext.mechanisms.labels.laplace_label_histogram``, Δ₁ = 1): one canary
    record with label 0; claim ε."""
    from ..mechanisms.labels import laplace_label_histogram

    groups = np.repeat(np.arange(3), 5)

    def run_once(with_canary: bool, g: np.random.Generator) -> np.ndarray:
        x = np.concatenate([groups, [0]]) if with_canary else groups
        noisy, _ = laplace_label_histogram(x, 3, epsilon=epsilon / actual_noise_scale, rng=g)
        return np.asarray(noisy, dtype=np.float64)[:1]

    return audit_laplace_release(run_once, base=np.array([5.0]), claim_epsilon=epsilon, trials=trials, rng=rng,
                                 alpha=alpha, mechanism=f"laplace_label_histogram (ε={epsilon:.4g})")


# --------------------------------------------------------------------------------------- secret protection


def audit_secret_clustering(
    *,
    rho: float,
    sigma: float,
    sample: str = "independent",
    claim_sample: str | None = None,
    trials: int = 20000,
    prior: float = 1e-3,
    rng: np.random.Generator,
    alpha: float = 0.05,
    actual_noise_scale: float = 1.0,
    n_public: int = 200,
    q_model: str = "gaussian",
) -> AuditResult:
    """SecPE's Eq 7 release (``privtext.mechanisms.clustering.secret_clustering``) for one secret held by one
    record sampled with probability ``rho``, noise ``sigma``, drawing its sample(s) as ``sample``.

    The claim is the blow-up the accountant gives for the events of ``claim_sample`` (default: ``sample``) at
    this σ — ``clustering_secret_events`` composed once. Passing ``sample="shared", claim_sample="independent"``
    re-introduces the first review's bug (one draw, accounted as two independent releases): the audit must fail.
    """
    from ..mechanisms.clustering import PublicClusters, clustering_secret_events, secret_clustering
    from ..privacy import blowup_of, secret_noise

    if not 0 < rho <= 1:
        raise ConfigError(f"rho must lie in (0, 1], got {rho}")
    if not 0 < prior < 0.5:
        raise ConfigError(f"the audited prior must lie in (0, 0.5), got {prior}")
    d = 4
    e1 = np.zeros((1, d), dtype=np.float32)
    e1[0, 0] = 1.0
    cl = PublicClusters(centres=e1, sizes=np.array([n_public]), group=np.zeros(1, dtype=np.int64))
    holder = -e1  # antipodal: moves the centre by 2R/(n+1), the most one record can
    groups = np.zeros(1, dtype=np.int64)
    rho_a = np.array([rho])
    centre_std = 2.0 / n_public * sigma

    def stat(rel: Any) -> float:
        count = (rel.counts[0] - n_public) / sigma
        shift = -(rel.centres[0, 0] - 1.0) / centre_std  # along the holder's direction (−e₁)
        return float((count + shift) / math.sqrt(2))

    def run_once(with_secret: bool, r: np.random.Generator) -> float:
        x = holder if with_secret else np.zeros((0, d), dtype=np.float32)
        rel, _ = secret_clustering(x, groups[: len(x)], cl, rho=rho_a[: len(x)], sigma=sigma * actual_noise_scale,
                                   rng=r, sample=sample)
        return stat(rel)

    q = np.asarray([run_once(False, rng) for _ in range(trials)])
    if q_model == "gaussian":
        # Q (no secret) is public statistics plus the mechanism's Gaussian noise: estimate its location and scale
        # with upper confidence bounds (t for the mean, χ² for the standard deviation) and put the threshold where
        # the false-positive rate of that worst-case Gaussian is exactly p' — far tighter than counting rare tail
        # events, and still conservative (the noise could only be larger than estimated with prob. ≤ alpha/2)
        n = len(q)
        sd_hi = float(q.std(ddof=1) * math.sqrt((n - 1) / chi2.ppf(alpha / 4, n - 1)))
        mean_hi = float(q.mean() + t_dist.ppf(1 - alpha / 4, n - 1) * q.std(ddof=1) / math.sqrt(n))
        tau = mean_hi + sd_hi * float(ndtri(1 - prior))
        fpr_hi = prior
    elif q_model == "empirical":
        qs = np.sort(q)
        tau = float(qs[math.ceil((1 - prior) * trials) - 1])  # empirical (1 − p') quantile
        fpr_hi = clopper_pearson(int((qs > tau).sum()), trials, alpha / 2)[1]
    else:
        raise ConfigError(f"q_model must be gaussian or empirical, got {q_model!r}")
    hits = sum(run_once(True, rng) > tau for _ in range(trials))
    lo, hi = clopper_pearson(int(hits), trials, alpha / 2)
    cs = claim_sample or sample
    from ..mechanisms.clustering import clustering_plan

    plan = clustering_plan(1, cs)
    noise = secret_noise(np.ones((1, 1)), p=1e-4, r=0.5, compositions=plan.compositions,
                         sampling="max", release_sensitivity=plan.release_sensitivity)
    # the events of ONE clustering for a holder sampled with probability rho, at the audited σ
    noise = _with_rho(noise, rho)
    (se,) = clustering_secret_events(noise, sigma, cs).values()
    claim = float(blowup_of([se.event], min(fpr_hi, 0.5)))
    return AuditResult(
        mechanism=f"secret_clustering ({sample} sample, ρ={rho:g}, σ={sigma:.4g})"
                  + (f", claimed as {cs}" if cs != sample else ""),
        quantity="posterior", claim=claim, estimate=lo, interval=(lo, hi), trials=trials, alpha=alpha,
        details={"prior_audited": prior, "false_positive_rate_upper": fpr_hi, "successes": int(hits),
                 "claim_at": min(fpr_hi, 0.5), "q_model": q_model})


def _with_rho(noise: Any, rho: float) -> Any:
    """A SecretNoiseResult for one holder with sampling probability ``rho`` (the group's ρ replaced)."""
    from dataclasses import replace

    (gid, g), = noise.group_info.items()
    return replace(noise, group_info={gid: replace(g, rho=(float(rho),))})


__all__ = [
    "AuditResult",
    "audit_dp_term_histogram",
    "audit_dp_vocabulary",
    "audit_gaussian_release",
    "audit_label_histogram",
    "audit_laplace_label_histogram",
    "audit_laplace_release",
    "audit_secret_clustering",
    "audit_topq_histograms",
    "audit_vote_histogram",
    "clopper_pearson",
]


# ------------------------------------------------------------------------------------------------ a run


def audit_run(run_dir: Any, *, trials: int = 2000, secret_trials: int = 20000, alpha: float = 0.05,
              rng: np.random.Generator | None = None) -> list[AuditResult]:
    """Audit each kind of noisy release a run recorded, at its recorded parameters, on synthetic worst-case
    inputs (the run's private data is never read): the vote histogram and the label histogram at their noise
    multiplier and sensitivity, SecPE's clustering at its σ, sample mode and the largest single-holder ρ among its
    secret groups."""
    import json

    from ..privacy.release import Release
    from ..rng import secure_rng
    from ..rundir import RunDir

    run = RunDir(run_dir).require()
    rng = rng if rng is not None else secure_rng()
    releases = [Release.from_dict(json.loads(x)) for x in run.ledger.read_text(encoding="utf-8").splitlines()
                if x.strip()]
    seen: dict[tuple[Any, ...], Release] = {}
    for r in releases:
        if r.mechanism == "secret_clustering":
            key: tuple[Any, ...] = (r.mechanism, r.noise_std, r.meta.get("sample"))
        else:
            key = (r.mechanism, r.event.noise_multiplier if hasattr(r.event, "noise_multiplier") else None,
                   r.sensitivity)
        seen.setdefault(key, r)
    out = []
    for (mech, *_), r in seen.items():
        if mech in ("dp_nn_vote_histogram", "federated_nn_vote_sum"):
            # the parties' sum is the central Gaussian mechanism on the union (privtext.federated.votes)
            out.append(audit_vote_histogram(float(r.event.noise_multiplier), sensitivity=r.sensitivity,
                                            trials=trials, rng=rng, alpha=alpha))
        elif mech == "dp_label_histogram":
            out.append(audit_label_histogram(float(r.event.noise_multiplier), sensitivity=r.sensitivity,
                                             trials=trials, rng=rng, alpha=alpha))
        elif mech == "topq_vote_histograms" or (mech == "federated_topq_sum" and r.meta.get("level") == "record"):
            out.append(audit_topq_histograms(float(r.event.noise_multiplier), q=int(r.meta.get("q", 1)),
                                             trials=trials, rng=rng, alpha=alpha))
        elif mech in ("dp_vocabulary", "laplace") and r.key.endswith("vocabulary") and r.event.noise_multiplier > 0:
            out.append(audit_dp_vocabulary(1.0 / float(r.event.noise_multiplier),
                                           r=max(1, min(round(r.sensitivity), 4)), trials=max(trials, 5000),
                                           rng=rng, alpha=alpha))
        elif mech == "laplace" and r.key == "dpkps/histogram" and r.event.noise_multiplier > 0:
            out.append(audit_dp_term_histogram(1.0 / float(r.event.noise_multiplier), trials=max(trials, 5000),
                                               rng=rng, alpha=alpha))
        elif mech == "laplace_label_histogram" and r.event.noise_multiplier > 0:
            out.append(audit_laplace_label_histogram(1.0 / float(r.event.noise_multiplier),
                                                     trials=max(trials, 5000), rng=rng, alpha=alpha))
        elif mech == "secret_clustering" and r.noise_std > 0 and r.secret_events:
            rho = _largest_single_holder_rho(r)
            out.append(audit_secret_clustering(rho=rho, sigma=r.noise_std, sample=str(r.meta.get("sample") or
                                               "independent"), trials=secret_trials, rng=rng, alpha=alpha))
    return out


def _largest_single_holder_rho(release: Any) -> float:
    """ρ of the worst single-holder secret group of a clustering release (a group whose mixture has two
    components, [1 − ρ, ρ]); without one, the probability that the group's holders are sampled at all."""
    best = 0.0
    fallback = 0.0
    for se in release.secret_events.values():
        ev = se.event
        while hasattr(ev, "event"):  # SelfComposedDpEvent(mixture, 2)
            ev = ev.event
        probs = list(getattr(ev, "sampling_probs", []))
        if len(probs) == 2:
            best = max(best, float(probs[1]))
        elif probs:
            fallback = max(fallback, 1.0 - float(probs[0]))
    return best or fallback or 1.0


__all__ += ["audit_run"]
