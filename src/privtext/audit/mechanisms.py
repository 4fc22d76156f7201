"""Mechanism audits: run a mechanism many times on a worst-case neighbouring pair and bound, from below, how well
the best attack tells the two apart — then check the bound against the claim.

A guarantee is a claim about *every* attack; an audit tries *one* good attack and measures its success with a
Clopper-Pearson confidence interval (:mod:`privtext.audit.stats`). If the attack does better than the claim
allows (its lower confidence bound exceeds the claim), the claim is false for this implementation — the audit
fails. A passing audit does not prove a claim; it catches implementations that deliver less than they account
for: noise smaller than recorded, a sensitivity larger than recorded, a subsampled release that shares its sample
with another (the SecPE bug of the first review).

Canaries at real noise levels
-----------------------------
One record against noise multiplier z = 10 is a shift of 0.1 standard deviations: no feasible number of trials
tells halved noise from the claim. The canaries are therefore **groups of g neighbours** (g neighbours of the
run's relation: g records, g secret groups of k, g parties), with g chosen from the claim so that the group's
claim is ≈ 1.5 (:func:`group_size`): group privacy is exact for the Gaussian mechanism (a shift of g·Δ against
noise z·Δ is a g/z-GDP pair) and for the Laplace mechanism (g·ε), so the claim for the group is g times the
claim per neighbour, and an implementation that under-noises is as far off for the group as for one neighbour.
The number of trials then follows from the claim (:mod:`privtext.audit.stats`): the fewest with which a
mechanism drawing half its recorded noise is caught with probability ≥ 0.95.

Every audit runs the mechanism functions the methods run, draws its noise from the library's privacy noise
source (:func:`privtext.rng.noise_rng`, unless a generator is passed) and builds its canary from the
sensitivity :mod:`privtext.audit.derive` derives from the relation; the noise it adds is the one the run
recorded. So a run whose ledger under-states Δ is caught twice: by the derivation check, and by the attack (the
derived canary moves the release by more than the recorded noise allows).

* Gaussian releases (Aug-PE's votes, WASP's Top-Q pair, the label histogram, the parties' sums): the attack
  thresholds the canary's statistic at the midpoint of the two exact values (the likelihood-ratio test of a
  Gaussian shift, fixed in advance); μ ≥ Φ⁻¹(1−FPR) − Φ⁻¹(FNR) (Dong et al. 2019) against the claim g/z.
* Laplace releases with few coordinates (DP-KPS's vocabulary, term histogram, label shares): the attack thresholds
  the log-likelihood ratio L(y) = Σ_i (|y_i − h_i| − |y_i − h'_i|)/b of the two neighbours at the recorded scale
  b, at the threshold that the trial plan (:func:`plan_laplace`) finds best for catching halved noise; ε ≥
  log(TPR/FPR) against the claim g·ε.
* The RFF sketch (I coordinates, each a tiny part of the shift): no feasible test reaches its pure-ε claim (the
  event needs every coordinate past its shift, probability 2^−I). It is audited against the **Laplace mechanism
  the claim implies** — Laplace(Δ₁/ε) noise on the same sketch — whose μ at the same test is computed by Monte
  Carlo: the sketch may be no more distinguishable than that (quantity ``mu_vs_laplace``).
* Secret protection (SecPE's clustering, with its Bernoulli sampling; SecPE's hybrid votes): the claim is the
  accountant's blow-up B(p') at the attack's false-positive rate p'.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
from scipy.special import ndtri
from scipy.stats import chi2
from scipy.stats import t as t_dist

from ..errors import ConfigError
from .stats import (
    clopper_pearson,
    epsilon_bounds,
    gdp_mu,
    min_trials,
    mu_bounds,
    power_epsilon,
    power_mu,
    trials_for_halved_gaussian_noise,
)

#: the group claim (μ or ε) the canaries aim at: large enough that halved noise is caught in ~100 trials
TARGET_CLAIM = 1.5
#: the probability with which an audit's trial count catches a mechanism drawing half its recorded noise
POWER = 0.95


@dataclass(frozen=True)
class AuditResult:
    """One audit. ``check="attack"``: ``estimate`` is the attack's lower confidence bound on the audited quantity
    (μ for Gaussian releases, ε for Laplace ones, the posterior for secret protection), ``interval`` its
    two-sided (1 − alpha) interval, ``claim`` the value the accounting promises; ``passed`` is ``estimate ≤
    claim``. ``check="derivation"``: the recorded sensitivity (``estimate``) against the derived one (``claim``);
    ``check="calibration"``: the recorded noise (``estimate``) against the one the audit calibrates from the
    configuration and the budget (``claim``, :mod:`privtext.audit.calibrate`); ``passed`` is ``ok`` for both."""

    mechanism: str
    quantity: str
    claim: float
    estimate: float
    interval: tuple[float, float]
    trials: int
    alpha: float
    details: dict[str, Any] = field(default_factory=dict)
    check: str = "attack"
    ok: bool | None = None

    @property
    def passed(self) -> bool:
        if self.ok is not None:
            return bool(self.ok)
        return self.estimate <= self.claim * (1 + 1e-12)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def line(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        if self.check == "derivation":
            d = self.details
            return (f"{self.mechanism:34} {d['norm']} sensitivity: recorded {self.estimate:.6g}, derived "
                    f"{self.claim:.6g} ({d['why']}); recorded noise gives {d['quantity']} {d['implied']:.4g} "
                    f"per neighbour, claim {d['claim']:.4g}: {verdict}")
        if self.check == "calibration":
            d = self.details
            note = f"; {d['note']}" if d.get("note") else ""
            return (f"{self.mechanism:34} {self.quantity}: recorded {self.estimate:.6g}, derived {self.claim:.6g} "
                    f"from the configuration and the budget ({d['why']}; tolerance {d['rtol']:g}){note}: {verdict}")
        lo, hi = self.interval
        return (f"{self.mechanism:34} claim {self.quantity} ≤ {self.claim:.4g}; attack {self.estimate:.4g} "
                f"({100 * (1 - self.alpha):g}% CI {lo:.4g}–{hi:.4g}), {self.trials} trials: {verdict}")


def group_size(claim_per_neighbour: float, target: float = TARGET_CLAIM) -> int:
    """g: the number of neighbours in a canary so that the group's claim g·claim is ≈ ``target`` (at least 1)."""
    if not claim_per_neighbour > 0:
        raise ConfigError(f"a claim per neighbour must be > 0, got {claim_per_neighbour}")
    if math.isinf(claim_per_neighbour):
        return 1
    return max(1, round(target / claim_per_neighbour))


def _noise(rng: np.random.Generator | None) -> np.random.Generator:
    """The audit's noise, always from the library's privacy noise source (:func:`privtext.rng.noise_rng`, looked up
    at call time, so the audit draws from whatever the methods draw from): keyed by OS entropy, or — when the
    caller passes ``rng`` (reproducible audits, tests) — seeded from it."""
    from .. import rng as _rng

    if rng is None:
        return _rng.noise_rng(None, "audit", reproducible=False)
    return _rng.noise_rng(int(rng.integers(2**62)), "audit", reproducible=True)


def _resolve_group(group: int | str | None, claim_per_neighbour: float) -> int:
    if group in (None, 1):
        return 1
    if group == "auto":
        return group_size(claim_per_neighbour)
    if not isinstance(group, int) or group < 1:
        raise ConfigError(f"group must be a positive integer or 'auto', got {group!r}")
    return group


# ------------------------------------------------------------------------------------------- Gaussian audits


def audit_gaussian_release(
    run_once: Callable[[bool, np.random.Generator], float],
    *,
    base: float,
    shift: float,
    claim_mu: float,
    trials: int | None,
    rng: np.random.Generator | None,
    alpha: float = 0.05,
    mechanism: str = "gaussian release",
    delta: float | None = None,
) -> AuditResult:
    """Audit a release claimed to be ``claim_mu``-GDP for the pair (without, with) the canary.

    ``run_once(with_canary, rng)`` runs the mechanism once and returns the statistic; its exact value is ``base``
    without the canary and ``base + shift`` with it. The test rejects "without" when the statistic exceeds the
    midpoint, fixed before any trial. ``trials=None``: the fewest with which halved noise is caught with
    probability ≥ 0.95 (:func:`privtext.audit.stats.trials_for_halved_gaussian_noise`)."""
    planned = trials is None
    if trials is None:
        trials = trials_for_halved_gaussian_noise(claim_mu, alpha=alpha, power=POWER)
    if trials < 10:
        raise ConfigError(f"an audit needs at least 10 trials per side, got {trials}")
    g = _noise(rng)
    tau = base + shift / 2
    fp = sum(run_once(False, g) > tau for _ in range(trials))
    fn = sum(run_once(True, g) <= tau for _ in range(trials))
    lo, point, hi = mu_bounds(int(fp), int(fn), trials, alpha)
    details: dict[str, Any] = {"false_positives": int(fp), "false_negatives": int(fn), "threshold": tau,
                               "mu_point": point, "trials_planned": planned}
    if delta is not None:
        fpr_hi = clopper_pearson(int(fp), trials, alpha / 2)[1]
        fnr_hi = clopper_pearson(int(fn), trials, alpha / 2)[1]
        eps = max(math.log(max(1 - delta - fnr_hi, 1e-300) / fpr_hi), math.log(max(1 - delta - fpr_hi, 1e-300) / fnr_hi))
        details["epsilon_lower_bound"] = max(eps, 0.0)
        details["delta"] = delta
    return AuditResult(mechanism=mechanism, quantity="mu", claim=float(claim_mu), estimate=max(lo, 0.0),
                       interval=(max(lo, 0.0), hi), trials=trials, alpha=alpha, details=details)


def _canary_records(derived: float | None, sensitivity: float, what: str) -> int:
    """Records per neighbour: the derived Δ of a count release is the number of records one neighbour moves."""
    d = float(sensitivity if derived is None else derived)
    k = round(d)
    if k < 1 or abs(k - d) > 1e-9:
        raise ConfigError(f"the {what} audit needs an integer number of records per neighbour, got Δ = {d}")
    return k


def audit_vote_histogram(noise_multiplier: float, *, sensitivity: float = 1.0, derived: float | None = None,
                         group: int | str | None = None, trials: int | None = 2000,
                         rng: np.random.Generator | None = None, alpha: float = 0.05,
                         actual_noise_scale: float = 1.0, delta: float | None = None) -> AuditResult:
    """Aug-PE's DP nearest-neighbour vote histogram (``privtext.mechanisms.voting.dp_vote_histogram``) at noise
    multiplier z with the recorded sensitivity Δ (noise std z·Δ). One neighbour of the relation is ``derived``
    records (default Δ: 1, or k for a secret group); the canary is ``group`` neighbours (``"auto"``: g ≈ 1.5·z),
    all voting for candidate 0, which nobody else votes for. The claim is μ = g/z. ``actual_noise_scale`` < 1
    runs a broken mechanism (noise scaled down) against the same claim."""
    from ..mechanisms import voting

    z = float(noise_multiplier)
    per = _canary_records(derived, sensitivity, "vote")
    g = _resolve_group(group, 1.0 / z if z > 0 else math.inf)
    gen = np.random.default_rng(12345)  # public, fixed inputs
    d = 8
    cand = np.eye(d, dtype=np.float32)[:6]
    priv = np.eye(d, dtype=np.float32)[gen.integers(1, 6, size=30)]  # nobody else votes for candidate 0
    canary = np.repeat(cand[:1], g * per, axis=0)

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        x = np.concatenate([priv, canary]) if with_canary else priv
        rel, _ = voting.dp_vote_histogram(x, cand, noise_multiplier=z * actual_noise_scale, sensitivity=sensitivity,
                                          rng=r, center=None)
        return float(rel.raw_noisy[0])

    claim = g / z if z > 0 else math.inf
    res = audit_gaussian_release(run_once, base=0.0, shift=float(g * per), claim_mu=claim, trials=trials, rng=rng,
                                 alpha=alpha, mechanism=f"dp_vote_histogram (z={z:.4g}, Δ={sensitivity:g}, g={g})",
                                 delta=delta)
    res.details.update(noise_std=z * sensitivity, group=g, records_per_neighbour=per)
    return res


def audit_label_histogram(noise_multiplier: float, *, sensitivity: float = 1.0, derived: float | None = None,
                          group: int | str | None = None, trials: int | None = 2000,
                          rng: np.random.Generator | None = None, alpha: float = 0.05,
                          actual_noise_scale: float = 1.0, delta: float | None = None) -> AuditResult:
    """The DP label histogram (``privtext.mechanisms.labels.dp_label_histogram``): a canary of g neighbours of
    ``derived`` records each, all with label 0; claim μ = g/z."""
    from ..mechanisms import labels

    z = float(noise_multiplier)
    per = _canary_records(derived, sensitivity, "label")
    g = _resolve_group(group, 1.0 / z if z > 0 else math.inf)
    groups = np.repeat(np.arange(4), 10)

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        x = np.concatenate([groups, np.zeros(g * per, dtype=np.int64)]) if with_canary else groups
        noisy, _ = labels.dp_label_histogram(x, 4, noise_multiplier=z * actual_noise_scale, sensitivity=sensitivity,
                                             rng=r)
        return float(noisy[0])

    claim = g / z if z > 0 else math.inf
    res = audit_gaussian_release(run_once, base=10.0, shift=float(g * per), claim_mu=claim, trials=trials, rng=rng,
                                 alpha=alpha, delta=delta,
                                 mechanism=f"dp_label_histogram (z={z:.4g}, Δ={sensitivity:g}, g={g})")
    res.details.update(group=g, records_per_neighbour=per)
    return res


def _public_code_topq_sensitivity(q: int) -> float:
    """The sensitivity the public WASP code computes, ``2 - 1/(2^(Q-1))`` with Python's ``^`` (XOR, not a
    power): Q = 4 gives 2 − 1/(2 XOR 3) = 2 − 1/1 = 1 (Q = 3 divides by zero). Kept only to build the audit's
    canary; privtext never noises with it."""
    x = 2 ^ (q - 1)
    if x == 0:
        raise ConfigError(f"the public code's formula divides by zero at Q = {q}")
    return 2 - 1 / x


def _topq_canary(q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(candidates, background private samples, one canary sample whose Q nearest and Q furthest candidates are
    2Q distinct bins) — public, fixed inputs."""
    d = 4 * q + 4
    cand = np.eye(d, dtype=np.float32)[: 2 * q + 2]
    canary = np.zeros((1, d), dtype=np.float32)
    canary[0, : 2 * q + 2] = np.linspace(1.0, -1.0, 2 * q + 2)  # nearest: bins 0..q-1; furthest: the last q
    gen = np.random.default_rng(54321)
    priv = gen.standard_normal((25, d)).astype(np.float32)
    return cand, priv, canary


def audit_topq_histograms(noise_multiplier: float, *, q: int, sensitivity: float | None = None,
                          group: int | str | None = None, trials: int | None = 2000,
                          rng: np.random.Generator | None = None, alpha: float = 0.05,
                          actual_noise_scale: float = 1.0, delta: float | None = None) -> AuditResult:
    """WASP's Top-Q nearest and furthest vote histograms (``privtext.mechanisms.topq.dp_topq_histograms``) at
    noise multiplier z and the recorded sensitivity (default the exact Δ_Q): a canary of g identical samples whose
    Q nearest and Q furthest candidates are 2Q distinct bins, so it moves the pair (Hⁿ, Hᶠ) by g·v with ‖v‖ =
    Δ_Q = √(2Σ4^−(q−1)) (checked against :func:`privtext.audit.derive.topq_record_sensitivity`). The attack
    projects the released pair (minus the exact pair without the canary) on v/‖v‖ — the likelihood-ratio
    statistic for a Gaussian shift — and thresholds at g‖v‖/2. The claim is μ = g/z. ``actual_noise_scale`` < 1
    under-noises against the same claim: the public WASP code's XOR sensitivity at Q = 4 is the scale 1/Δ_4 ≈
    0.61 (:func:`_public_code_topq_sensitivity`)."""
    from ..mechanisms import topq as topq_mod
    from .derive import topq_record_sensitivity

    z = float(noise_multiplier)
    g = _resolve_group(group, 1.0 / z if z > 0 else math.inf)
    cand, priv, canary = _topq_canary(q)
    without = np.concatenate(topq_mod.topq_histograms(priv, cand, q=q))
    with_c = np.concatenate(topq_mod.topq_histograms(np.concatenate([priv, canary]), cand, q=q))
    v = with_c - without
    norm = float(np.linalg.norm(v))
    if abs(norm - topq_record_sensitivity(q)) > 1e-6:
        raise AssertionError(f"the Top-{q} canary moved the pair by {norm}, not Δ_Q = {topq_record_sensitivity(q)}")
    u = v / norm
    canaries = np.repeat(canary, g, axis=0)

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        x = np.concatenate([priv, canaries]) if with_canary else priv
        rel, _ = topq_mod.dp_topq_histograms(x, cand, q=q, noise_multiplier=z * actual_noise_scale,
                                             sensitivity=sensitivity, rng=r)
        return float((np.concatenate([rel.nearest, rel.furthest]) - without) @ u)

    claim = g / z if z > 0 else math.inf
    res = audit_gaussian_release(run_once, base=0.0, shift=g * norm, claim_mu=claim, trials=trials, rng=rng,
                                 alpha=alpha, delta=delta,
                                 mechanism=f"dp_topq_histograms (z={z:.4g}, Q={q}, g={g})")
    res.details.update(sensitivity=norm, group=g)
    return res


@dataclass(frozen=True)
class _FederatedWorlds:
    """The two worlds of :func:`audit_federated_sum`: t background parties (without the canary) and the parties
    with it (the canary records added to party 0 at record level; at user level g canary parties in front and as
    many background parties dropped from the round, so that both worlds sum exactly t parties), over public
    candidates ``cand`` (one label group) — the parties' records and the candidates are public test data."""

    cand: np.ndarray
    cgroups: np.ndarray
    background: list[Any]
    with_parties: list[Any]
    drop_with: dict[int, str]
    per: int  # records per canary party (user level), 1 at record level

    @classmethod
    def build(cls, *, level: str, g: int, t: int, cap: int | None, normalise: bool, q: int | None
              ) -> _FederatedWorlds:
        """Votes (``q`` None: 6 one-hot candidates, 5 records per party, the canary votes for candidate 0) or the
        Top-Q game (:func:`_topq_canary`'s sample split over the t parties, its canary row)."""
        from ..federated.topq import PartyVotes

        def party_of(rows: np.ndarray) -> PartyVotes:
            return PartyVotes(emb=np.ascontiguousarray(rows, dtype=np.float32),
                              groups=np.zeros(len(rows), dtype=np.int64))

        per = 1 if level == "record" else (1 if normalise and cap is None else int(cap or 1))
        if q is None:
            d = 8
            cand = np.eye(d, dtype=np.float32)[:6]
            gen = np.random.default_rng(2468)
            background = [PartyVotes(emb=np.eye(d, dtype=np.float32)[gen.integers(1, 6, size=5)],
                                     groups=np.zeros(5, dtype=np.int64)) for _ in range(t)]
            canary_row = cand[:1]
        else:
            cand, priv, canary_row = _topq_canary(q)
            background = [PartyVotes(emb=priv[i::t], groups=np.zeros(len(priv[i::t]), dtype=np.int64))
                          for i in range(t)]
        if level == "record":
            p0 = background[0]
            with_parties = [party_of(np.concatenate([p0.emb, np.repeat(canary_row, g, axis=0)])), *background[1:]]
            drop_with: dict[int, str] = {}
        else:
            with_parties = [*(party_of(np.repeat(canary_row, per, axis=0)) for _ in range(g)), *background]
            drop_with = {g + i: "collect_masked_vectors" for i in range(g)}
        return cls(cand=cand, cgroups=np.zeros(len(cand), dtype=np.int64), background=background,
                   with_parties=with_parties, drop_with=drop_with, per=per)


@dataclass(frozen=True)
class _FederatedSum:
    """The parties' sum as :func:`privtext.federated.aggregate.federated_sum` computes it in process, with and
    without its noise, for the parties' ``local`` vectors (votes or Top-Q histograms of ``dim`` coordinates)
    clipped to ``bound``; σ the total noise std, t the round's minimum survivors, ``seeded``: the parties' shares
    are derived from the caller's generator (tests)."""

    local: Callable[[Any], np.ndarray]
    dim: int
    bound: float
    sigma: float
    t: int
    seeded: bool

    def noisy(self, parties: list[Any], drop: dict[int, str], r: np.random.Generator) -> np.ndarray:
        """Every surviving party adds its share N(0, σ²/t) from its own privacy noise source (``party_rng``),
        quantised to the SecAgg+ grid."""
        from ..federated import noise as fnoise

        survivors = [k for k in range(len(parties)) if k not in drop]
        plan = fnoise.plan_quantisation(n_parties=len(parties), dim=self.dim, sigma=max(self.sigma, 1e-12),
                                        value_bound=self.bound, min_survivors=min(self.t, len(survivors)))
        seed = int(r.integers(2**62)) if self.seeded else None
        return fnoise.plain_sum(parties, self.local, plan, quantised=True, survivors=survivors, seed=seed,
                                key="audit", reproducible=self.seeded)

    def exact(self, parties: list[Any], drop: dict[int, str]) -> np.ndarray:
        """The sum of the surviving parties' clipped local vectors, without noise (the shift direction and the
        threshold; σ → 0 is not allowed by the quantisation plan, so it is computed directly)."""
        vs = [np.clip(self.local(p), -self.bound, self.bound) for k, p in enumerate(parties) if k not in drop]
        return np.sum(vs, axis=0)


def audit_federated_sum(noise_multiplier: float, *, sensitivity: float, level: str = "record",
                        cap: int | None = None, normalise: bool = False, min_survivors: int = 2,
                        value_bound: float | None = None, q: int | None = None, group: int | str | None = "auto",
                        trials: int | None = None, rng: np.random.Generator | None = None, alpha: float = 0.05,
                        actual_noise_scale: float = 1.0) -> AuditResult:
    """The parties' noisy sum as the methods run it (``privtext.federated.votes.federated_nn_votes`` for Aug-PE,
    ``privtext.federated.topq.federated_topq`` for WASP when ``q`` is given), with the in-process aggregation: each
    party clips its vector to the public bound B, adds its share N(0, σ²/t) of the noise (σ = z·Δ, t =
    ``min_survivors``) from its own privacy noise source, and the sum is released.

    The canary is g neighbours: at record level g records (of one background party) voting for candidate 0; at
    user level g ≤ t parties of ``cap`` records each (or with normalised vote vectors) voting for candidate 0
    (Top-Q: the pair of the Top-Q canary sample). Both worlds sum exactly t parties (the with-world drops as many
    background parties as it adds canary parties, so that no extra noise share hides the canary): the least noise
    a completed round carries (:class:`_FederatedWorlds`). The claim is μ = g/z.

    Not covered: SecAgg+'s integer quantisation (its rounding error is bounded, ≤ S·c/Q per coordinate; see
    :mod:`privtext.federated.noise`) — the in-process sum adds the same noise shares from the same source."""
    import functools

    from ..federated.topq import party_topq
    from ..federated.votes import party_nn_votes

    z = float(noise_multiplier)
    g = _resolve_group(group, 1.0 / z if z > 0 else math.inf)
    t = int(min_survivors)
    if level not in ("record", "user"):
        raise ConfigError(f"level must be 'record' or 'user', got {level!r}")
    if level == "user":
        # every party adds its own noise share σ/√t: with more than t canary parties the with-world would carry
        # more than σ and the group claim g/z could not be reached; at most t canary parties, t background
        # parties of which the with-world drops as many as it adds, keep both worlds at exactly σ
        g = min(g, t)
    w = _FederatedWorlds.build(level=level, g=g, t=t, cap=cap, normalise=normalise, q=q)
    bound = float(value_bound if value_bound is not None else (1.0 if normalise else (cap or 1024)))
    local = (functools.partial(party_nn_votes, candidate_emb=w.cand, candidate_groups=w.cgroups, normalise=normalise)
             if q is None else
             functools.partial(party_topq, candidate_emb=w.cand, candidate_groups=w.cgroups, q=q,
                               normalise=normalise))
    fsum = _FederatedSum(local=local, dim=len(w.cand) if q is None else 2 * len(w.cand), bound=bound,
                         sigma=z * float(sensitivity) * actual_noise_scale, t=t, seeded=rng is not None)
    e_without = fsum.exact(w.background, {})
    v = fsum.exact(w.with_parties, w.drop_with) - e_without
    norm = float(np.linalg.norm(v))
    u = v / norm

    def run_once(with_canary: bool, r: np.random.Generator) -> float:
        vals = fsum.noisy(w.with_parties, w.drop_with, r) if with_canary else fsum.noisy(w.background, {}, r)
        return float((vals - e_without) @ u)

    claim = g / z if z > 0 else math.inf
    what = "federated_topq_sum" if q is not None else "federated_nn_vote_sum"
    res = audit_gaussian_release(run_once, base=0.0, shift=norm, claim_mu=claim, trials=trials, rng=rng,
                                 alpha=alpha, mechanism=f"{what} ({level}, z={z:.4g}, t={t}, g={g})")
    res.details.update(group=g, shift=norm, records_per_party=w.per, value_bound=bound)
    return res


# ------------------------------------------------------------------------------------------- Laplace audits


def _llr(y: np.ndarray, base: np.ndarray | float, shift: np.ndarray, scale: float) -> np.ndarray:
    """Σ_i (|y_i − h_i| − |y_i − h_i − s_i|)/b over the last axis: the log-likelihood ratio of "with" (h + s) to
    "without" (h) under Laplace(b) noise."""
    d = np.asarray(y, dtype=np.float64) - base
    return (np.abs(d) - np.abs(d - shift)).sum(axis=-1) / scale


def _laplace_draws(shift: np.ndarray, b: float, noise: float, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """L (at scale b) of ``draws`` Monte Carlo releases with and without the shift, under Laplace(``noise``):
    public randomness (fixed seed), in chunks."""
    gen = np.random.default_rng(seed)
    w, o = [], []
    chunk = max(1, 4_000_000 // max(len(shift), 1))
    for k in range(0, draws, chunk):
        m = min(chunk, draws - k)
        w.append(_llr(shift + gen.laplace(0.0, noise, size=(m, len(shift))), 0.0, shift, b))
        o.append(_llr(gen.laplace(0.0, noise, size=(m, len(shift))), 0.0, shift, b))
    return np.concatenate(w), np.concatenate(o)


def plan_laplace(shift: np.ndarray, claim_epsilon: float, *, alpha: float, power: float = POWER,
                 noise_scale: float = 0.5, draws: int = 100_000, seed: int = 0,
                 limit: int = 5_000) -> tuple[float, int, dict[str, float]]:
    """(threshold, trials, predicted rates) for the likelihood-ratio test L ≥ t of a Laplace release whose canary
    moves it by ``shift``, claimed ``claim_epsilon``-DP for that pair. L is computed at the scale the claim
    implies, b = Σ|s|/ε (:func:`_llr`; so L ≤ ε). The threshold is the t of a grid over (−ε, ε] with which a
    mechanism drawing ``noise_scale`` × b is caught with probability ≥ ``power`` in the fewest trials: the rates
    at each t from ``draws`` Monte Carlo draws of that mechanism (public randomness, fixed seed), each at its 99.9%
    Clopper-Pearson bound in the conservative direction; the thresholds ranked by a normal approximation of
    log(TPR/FPR), the best three searched with the exact binomial power
    (:func:`privtext.audit.stats.power_epsilon`); the trial count raised by 10%. Raises :class:`ConfigError` when
    more than ``limit`` trials would be needed (a release whose shift is spread thin over many coordinates)."""
    s = np.asarray(shift, dtype=np.float64)
    b = float(np.abs(s).sum()) / float(claim_epsilon)
    l_with, l_without = _laplace_draws(s, b, b * noise_scale, draws, seed)
    z = float(ndtri(1 - alpha / 4) + ndtri(power))
    ranked = []
    for t in [*np.linspace(-claim_epsilon, claim_epsilon, 24)[1:-1], claim_epsilon * (1 - 1e-9)]:
        tpr = clopper_pearson(int((l_with >= t).sum()), draws, 1e-3)[0]
        fpr = clopper_pearson(int((l_without >= t).sum()), draws, 1e-3)[1]
        gap = math.log(tpr / fpr) - claim_epsilon if tpr > 0 and fpr > 0 else -1.0
        if gap <= 0:
            continue
        n_approx = z * z * ((1 - tpr) / tpr + (1 - fpr) / fpr) / gap ** 2
        ranked.append((n_approx, float(t), tpr, fpr))
    best: tuple[float, int, dict[str, float]] | None = None
    for n_approx, t, tpr, fpr in sorted(ranked)[:3]:
        if n_approx > 4 * limit:
            continue
        def power_at(m: int, tpr: float = tpr, fpr: float = fpr) -> float:
            return power_epsilon(m, claim_epsilon, tpr, fpr, alpha)

        try:
            n = min_trials(power_at, power=power, start=max(10, int(n_approx / 4)), limit=limit)
        except ConfigError:
            continue
        if best is None or n < best[1]:
            best = (t, n, {"tpr_halved": tpr, "fpr_halved": fpr})
    if best is None:
        raise ConfigError(f"no likelihood-ratio threshold catches {noise_scale:g}× the noise of this Laplace "
                          f"release against claim ε = {claim_epsilon:g} within {limit} trials")
    t, n, rates = best
    return t, math.ceil(n * 1.1), rates


def audit_laplace_release(
    run_once: Callable[[bool, np.random.Generator], np.ndarray],
    *,
    base: np.ndarray,
    claim_epsilon: float,
    trials: int | None,
    rng: np.random.Generator | None,
    alpha: float = 0.05,
    mechanism: str = "laplace release",
    shift: np.ndarray | None = None,
    threshold: float | None = None,
) -> AuditResult:
    """Audit a release claimed to be pure ``claim_epsilon``-DP for the pair (without, with) the canary.

    ``run_once(with_canary, rng)`` returns the noisy values of the coordinates the canary moves: ``base`` without
    it, ``base + shift`` with it (default: +1 each). The test rejects "without" when the log-likelihood ratio
    L(y) = Σ(|y − base| − |y − base − shift|)/b at the scale the claim implies (b = Σ|shift|/ε, so L ≤ ε) reaches
    ``threshold``. The default threshold is L's maximum ε, i.e. the event E = {every coordinate past its shift}:
    with Laplace(b) noise the likelihood ratio is e^ε on E, the largest it can be, so the test reaches the true ε
    — the worst case of pure DP (no δ to hide in). ``trials=None``: threshold and trials from
    :func:`plan_laplace`. The estimate is log(TPR_lo / FPR_hi)."""
    base = np.asarray(base, dtype=np.float64)
    s = np.ones_like(base) if shift is None else np.asarray(shift, dtype=np.float64)
    b = float(np.abs(s).sum()) / float(claim_epsilon)
    details: dict[str, Any] = {}
    if trials is None:
        threshold, trials, rates = plan_laplace(s, claim_epsilon, alpha=alpha)
        details.update(rates, trials_planned=True)
    if trials < 10:
        raise ConfigError(f"an audit needs at least 10 trials per side, got {trials}")
    t = float(claim_epsilon) * (1 - 1e-9) if threshold is None else float(threshold)
    g = _noise(rng)
    fp = sum(bool(_llr(run_once(False, g), base, s, b) >= t) for _ in range(trials))
    tp = sum(bool(_llr(run_once(True, g), base, s, b) >= t) for _ in range(trials))
    lo, point, hi = epsilon_bounds(int(tp), int(fp), trials, alpha)
    details.update(true_positives=int(tp), false_positives=int(fp), epsilon_point=point, threshold=t)
    return AuditResult(mechanism=mechanism, quantity="epsilon", claim=float(claim_epsilon), estimate=lo,
                       interval=(lo, hi), trials=trials, alpha=alpha, details=details)


def _reference_mu(shift: np.ndarray, b_claim: float, noise: float, draws: int, seed: int
                  ) -> tuple[float, float, int, int]:
    """The test L > 0 (L at scale ``b_claim``) on Laplace(``noise``) releases: (μ upper 99.9% bound, μ point,
    false positives, false negatives) over ``draws`` Monte Carlo draws per side."""
    l_with, l_without = _laplace_draws(shift, b_claim, noise, draws, seed)
    fp, fn = int((l_without > 0).sum()), int((l_with <= 0).sum())
    return (gdp_mu(clopper_pearson(fp, draws, 1e-3)[0], clopper_pearson(fn, draws, 1e-3)[0]),
            gdp_mu(max(fp, 0.5) / draws, max(fn, 0.5) / draws), fp, fn)


def audit_laplace_reference(
    run_once: Callable[[bool, np.random.Generator], np.ndarray],
    *,
    base: np.ndarray,
    shift: np.ndarray,
    claim_epsilon: float,
    trials: int | None,
    rng: np.random.Generator | None,
    alpha: float = 0.05,
    mechanism: str = "laplace release",
    draws: int | None = None,
) -> AuditResult:
    """Audit a Laplace release against **the Laplace mechanism its claim implies**, where no feasible test reaches
    the pure-ε claim itself (a shift spread over many coordinates: the RFF sketch, a vocabulary of r terms under
    replace-one). The claim-implied mechanism adds Laplace(b) with b = Σ|shift|/ε to the exact release; the test
    is its log-likelihood ratio L > 0 (the midpoint of L's two distributions, which are mirror images under that
    mechanism); the claim is that mechanism's μ at this test, by Monte Carlo (``draws`` per side, public
    randomness), at its upper 99.9% bound. The audit fails when the release is more distinguishable than that:
    less noise than the claim implies, or a larger shift (sensitivity) than the claim accounts for. It is an
    implementation check, not a refutation of ε-DP (quantity ``mu_vs_laplace``); trials: the fewest that catch
    halved noise with probability ≥ 0.95."""
    s = np.asarray(shift, dtype=np.float64)
    b = float(np.abs(s).sum()) / float(claim_epsilon)
    draws = draws or int(min(100_000, max(20_000, 2e7 // max(len(s), 1))))
    claim_hi, claim_point, _, _ = _reference_mu(s, b, b, draws, 11)
    details: dict[str, Any] = {"claim_mu_point": claim_point, "laplace_scale_claim": b,
                               "epsilon_claim": float(claim_epsilon)}
    if trials is None:
        _, _, fp, fn = _reference_mu(s, b, b / 2, draws, 12)
        fpr_a, fnr_a = clopper_pearson(fp, draws, 1e-3)[1], clopper_pearson(fn, draws, 1e-3)[1]
        trials = math.ceil(1.1 * min_trials(lambda n: power_mu(n, claim_hi, fpr_a, fnr_a, alpha), power=POWER))
        details["trials_planned"] = True
    base = np.asarray(base, dtype=np.float64)
    res = audit_gaussian_release(lambda w, r: float(_llr(run_once(w, r), base, s, b)), base=0.0, shift=0.0,
                                 claim_mu=claim_hi, trials=trials, rng=rng, alpha=alpha, mechanism=mechanism)
    return AuditResult(mechanism=mechanism, quantity="mu_vs_laplace", claim=res.claim, estimate=res.estimate,
                       interval=res.interval, trials=res.trials, alpha=alpha, details={**res.details, **details})


Canary = tuple[Callable[[bool, np.random.Generator], np.ndarray], np.ndarray, np.ndarray]


def _audit_laplace(build: Callable[[int], Canary], *, epsilon: float, group: int | str | None, trials: int | None,
                   rng: np.random.Generator | None, alpha: float, name: str, reference: bool = False
                   ) -> AuditResult:
    """A Laplace release's audit from its canary builder ``build(g) → (run_once, base, shift)`` for g neighbours
    with claim ε per neighbour: the pure-ε refutation (:func:`audit_laplace_release`) when a feasible number of
    trials catches halved noise, else (or with ``reference``) the comparison with the claim-implied Laplace
    mechanism (:func:`audit_laplace_reference`), with g chosen so that its μ is ≈ 1.5."""
    if not reference:
        g = _resolve_group(group, float(epsilon))
        run_once, base, shift = build(g)
        try:
            res = audit_laplace_release(run_once, base=base, shift=shift, claim_epsilon=g * float(epsilon),
                                        trials=trials, rng=rng, alpha=alpha, mechanism=f"{name}, g={g})")
            res.details["group"] = g
            return res
        except ConfigError:
            if trials is not None:
                raise
    if group == "auto" or group is None:
        _, _base1, shift1 = build(1)
        s1 = np.asarray(shift1, dtype=np.float64)
        mu1 = _reference_mu(s1, float(np.abs(s1).sum()) / float(epsilon), float(np.abs(s1).sum()) / float(epsilon),
                            20_000, 13)[1]
        g = max(1, round(TARGET_CLAIM / mu1)) if group == "auto" and mu1 > 0 else 1
    else:
        g = _resolve_group(group, 1.0)
    run_once, base, shift = build(g)
    res = audit_laplace_reference(run_once, base=base, shift=shift, claim_epsilon=g * float(epsilon), trials=trials,
                                  rng=rng, alpha=alpha, mechanism=f"{name}, g={g}) vs Laplace")
    res.details["group"] = g
    return res


def audit_dp_vocabulary(epsilon: float, *, r: int = 2, scale: float | None = None, relation: str = "add_remove",
                        records: int = 1, group: int | str | None = None, trials: int | None = 5000,
                        rng: np.random.Generator | None = None, alpha: float = 0.05,
                        actual_noise_scale: float = 1.0) -> AuditResult:
    """DP-KPS's DP vocabulary (App A.1, ``privtext.mechanisms.vocabulary.dp_vocabulary``) run with the recorded
    Laplace scale b (default: the correct one, records·r/ε, twice that under replace-one) — the mechanism is called
    with ε' = r/b so that it draws exactly b. One neighbour is ``records`` documents (k of a secret group) each holding the same r fresh terms
    (add/remove: the canary adds them; ``relation="replace_one"``: each replaces a document holding r other fresh
    terms); the canary is g neighbours; claim g·ε. The whole noisy histogram is read (``size`` = |V|), so the
    audit sees the Laplace release before the top-V post-processing."""
    from ..data.vocabulary import PublicVocabulary
    from ..mechanisms import vocabulary as vocab_mod

    replace = relation == "replace_one"
    b = (2.0 if replace else 1.0) * r * records / float(epsilon) if scale is None else float(scale)
    terms = tuple(f"term{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(2 * r + 4))
    vocab = PublicVocabulary(terms=terms, source="audit")
    other = terms[2 * r:]
    docs = [f"{other[0]} {other[1]}", other[2], f"{other[3]} {other[0]}"]  # background documents
    canary_in = " ".join(terms[:r])  # terms held by no other document
    canary_out = " ".join(terms[r:2 * r])
    idx = list(range(2 * r)) if replace else list(range(r))

    def build(g: int) -> Canary:
        n_docs = g * int(records)
        base = np.zeros(len(idx))
        shift = np.zeros(len(idx))
        shift[:r] = n_docs
        if replace:
            base[r:] = n_docs  # without: the replaced documents hold terms r..2r−1
            shift[r:] = -n_docs

        def run_once(with_canary: bool, gen: np.random.Generator) -> np.ndarray:
            if replace:
                texts = [*docs, *([canary_in if with_canary else canary_out] * n_docs)]
            else:
                texts = [*docs, *([canary_in] * n_docs)] if with_canary else docs
            rel, _ = vocab_mod.dp_vocabulary(texts, vocab, r=r, epsilon=float(r) / (b * actual_noise_scale),
                                             size=len(terms), rng=gen)
            noisy = dict(zip(rel.indices.tolist(), rel.noisy_counts.tolist(), strict=True))
            return np.array([noisy[i] for i in idx])

        return run_once, base, shift

    res = _audit_laplace(build, epsilon=epsilon, group=group, trials=trials, rng=rng, alpha=alpha,
                         name=f"dp_vocabulary (ε={epsilon:.4g}, r={r}, b={b:.4g}, {relation}")
    res.details.update(relation=relation, records_per_neighbour=records)
    return res


def audit_dp_term_histogram(epsilon: float, *, scale: float | None = None, relation: str = "add_remove",
                            records: int = 1, group: int | str | None = None, trials: int | None = 5000,
                            rng: np.random.Generator | None = None, alpha: float = 0.05,
                            actual_noise_scale: float = 1.0) -> AuditResult:
    """DP-KPS's per-class DP term histogram (``privtext.mechanisms.kde.dp_term_histogram``, weighting "mean",
    Δ₁ = 1) run at the recorded scale b (default: the correct one, records/ε, twice that under replace-one): a
    canary document of class 0 holding one term puts its whole unit of mass on one bin, the worst case of the
    sensitivity bound (replace-one: it was a class-1 document on another term); g neighbours of ``records``
    documents; claim g·ε."""
    from ..mechanisms import kde

    replace = relation == "replace_one"
    b = (2.0 if replace else 1.0) * records / float(epsilon) if scale is None else float(scale)
    docs = [[0], [0, 1], [1, 2], [2], [0, 2]]
    classes = [0, 0, 1, 1, 0]

    def build(g: int) -> Canary:
        n_docs = g * int(records)
        base0 = 1.0 + 0.5 + 0.5  # class 0's exact mass on term 0 without the canary
        base = np.array([base0, 0.5 + n_docs]) if replace else np.array([base0])
        shift = np.array([float(n_docs), -float(n_docs)]) if replace else np.array([float(n_docs)])

        def run_once(with_canary: bool, gen: np.random.Generator) -> np.ndarray:
            if replace:
                extra = ([[0]] * n_docs, [0] * n_docs) if with_canary else ([[1]] * n_docs, [1] * n_docs)
                d, c = [*docs, *extra[0]], [*classes, *extra[1]]
            else:
                d, c = ([*docs, *[[0]] * n_docs], [*classes, *[0] * n_docs]) if with_canary else (docs, classes)
            rel, _ = kde.dp_term_histogram(kde.TermRecords(d, c, 2), n_terms=3,
                                           epsilon=1.0 / (b * actual_noise_scale), rng=gen)
            noisy = np.asarray(rel.noisy, dtype=np.float64)
            return np.array([noisy[0, 0], noisy[1, 1]]) if replace else noisy[0, :1]

        return run_once, base, shift

    res = _audit_laplace(build, epsilon=epsilon, group=group, trials=trials, rng=rng, alpha=alpha,
                         name=f"dp_term_histogram (ε={epsilon:.4g}, b={b:.4g}, {relation}")
    res.details.update(relation=relation)
    return res


def audit_laplace_label_histogram(epsilon: float, *, scale: float | None = None, relation: str = "add_remove",
                                  records: int = 1, group: int | str | None = None, trials: int | None = 5000,
                                  rng: np.random.Generator | None = None, alpha: float = 0.05,
                                  actual_noise_scale: float = 1.0) -> AuditResult:
    """The pure-DP label histogram (``privtext.mechanisms.labels.laplace_label_histogram``) run at the recorded
    scale b (default: the correct one, records/ε, twice that under replace-one; the mechanism is called with
    ε' = 1/b): a canary of g neighbours of ``records`` records with label 0 (replace-one: each was a record of
    label 1), claim g·ε. Under replace-one the pair moves two bins by ∓1 per record: with Δ₁ recorded as 1 the
    release is 2ε-DP, which this catches (issue 21, item 2)."""
    from ..mechanisms import labels

    replace = relation == "replace_one"
    b = (2.0 if replace else 1.0) * records / float(epsilon) if scale is None else float(scale)
    groups = np.repeat(np.arange(3), 5)

    def build(g: int) -> Canary:
        n = g * int(records)
        base = np.array([5.0, 5.0 + n]) if replace else np.array([5.0])
        shift = np.array([float(n), -float(n)]) if replace else np.array([float(n)])

        def run_once(with_canary: bool, gen: np.random.Generator) -> np.ndarray:
            if replace:
                x = np.concatenate([groups, np.full(n, 0 if with_canary else 1)])
            else:
                x = np.concatenate([groups, np.zeros(n, dtype=np.int64)]) if with_canary else groups
            noisy, _ = labels.laplace_label_histogram(x, 3, epsilon=1.0 / (b * actual_noise_scale), rng=gen)
            noisy = np.asarray(noisy, dtype=np.float64)
            return noisy[:2] if replace else noisy[:1]

        return run_once, base, shift

    res = _audit_laplace(build, epsilon=epsilon, group=group, trials=trials, rng=rng, alpha=alpha,
                         name=f"laplace_label_histogram (ε={epsilon:.4g}, b={b:.4g}, {relation}")
    res.details.update(relation=relation)
    return res


def audit_rff_sketch(epsilon: float, *, n_features: int, scale: float | None = None, derived: float | None = None,
                     relation: str = "add_remove", bandwidth: float = 0.3, group: int | str | None = "auto",
                     trials: int | None = None, rng: np.random.Generator | None = None, alpha: float = 0.05,
                     actual_noise_scale: float = 1.0) -> AuditResult:
    """DP-KPS's random-Fourier-feature DP-KDE sketch (``privtext.mechanisms.kde.dp_kde_sketch``, noise "sum",
    weighting "mean") run at the recorded scale b (default Δ₁/ε with the derived Δ₁ = √2·I, 2√2·I under
    replace-one): the mechanism is called with ε' = √2·I/b so that it draws exactly b.

    The canary is g records holding one point x of class 0 (replace-one: each was a class-1 record at x), which
    moves row 0 of the sketch by g·z(x), z the public features. No feasible test reaches its pure-ε claim (the
    event needs all I coordinates past their shifts), so it is audited against the claim-implied Laplace
    mechanism (:func:`audit_laplace_reference`) — with the derived Δ₁, the claim-implied scale is Δ₁/ε, while the
    canary's own shift ‖g·z(x)‖₁ is below g·Δ₁ (|z_t| = √2 only where cos = ±1); the reference mechanism is
    scaled to the canary's shift at the claimed ε per unit of the derived Δ₁."""
    from ..mechanisms import kde

    i = int(n_features)
    replace = relation == "replace_one"
    d1 = math.sqrt(2.0) * i * (2.0 if replace else 1.0) if derived is None else float(derived)
    b = d1 / float(epsilon) if scale is None else float(scale)
    gen = np.random.default_rng(97531)  # public features and inputs
    dim = 8
    feats = kde.RandomFourierFeatures.draw(dim, i, bandwidth=bandwidth, rng=gen)
    x = gen.standard_normal((1, dim))
    x /= np.linalg.norm(x)
    zx = feats.transform(x)[0]
    background = [p / np.linalg.norm(p, axis=1, keepdims=True)
                  for p in (gen.standard_normal((2, dim)) for _ in range(6))]
    bclasses = [0, 1, 0, 1, 0, 1]
    h0 = np.zeros((2, i))
    for p, c in zip(background, bclasses, strict=True):
        h0[c] += feats.transform(p).mean(axis=0)
    eps_param = math.sqrt(2.0) * i / (b * actual_noise_scale)

    def build(g: int) -> Canary:
        base = h0.copy()
        if replace:
            base[1] += g * zx
        with_ = h0.copy()
        with_[0] += g * zx
        shift = (with_ - base).ravel()
        nz = np.flatnonzero(shift)

        def run_once(with_canary: bool, r: np.random.Generator) -> np.ndarray:
            pts, cls = list(background), list(bclasses)
            if replace or with_canary:
                pts += [x.copy()] * g
                cls += [0 if with_canary else 1] * g
            sk, _ = kde.dp_kde_sketch(pts, cls, n_classes=2, features=feats, epsilon=eps_param, rng=r)
            return np.asarray(sk.noisy, dtype=np.float64).ravel()[nz]

        return run_once, base.ravel()[nz], shift[nz]

    # the claimed ε is per neighbour of Δ₁ = d1; the canary's own L1 shift per record is ‖z(x)‖₁ (·2 replace-one),
    # so the ε the claim allows for THIS pair is ε·‖shift‖₁/d1 per record
    per_record = float(np.abs(build(1)[2]).sum())
    eps_pair = float(epsilon) * per_record / d1
    res = _audit_laplace(build, epsilon=eps_pair, group=group, trials=trials, rng=rng, alpha=alpha,
                         name=f"dp_kde_sketch (RFF, ε={epsilon:.4g}, I={i}, b={b:.4g}, {relation}", reference=True)
    res.details.update(relation=relation, laplace_scale_recorded=b, derived_sensitivity=d1)
    return res


# --------------------------------------------------------------------------------------- secret protection


def _secret_threshold(q: np.ndarray, prior: float, alpha: float, q_model: str, trials: int) -> tuple[float, float]:
    """(threshold, upper bound of its false-positive rate) on the no-secret statistics ``q``."""
    if q_model == "gaussian":
        # Q (no secret) is public statistics plus the mechanism's Gaussian noise: estimate its location and scale
        # with upper confidence bounds (t for the mean, χ² for the standard deviation) and put the threshold where
        # the false-positive rate of that worst-case Gaussian is exactly p' — far tighter than counting rare tail
        # events, and still conservative (the noise could only be larger than estimated with prob. ≤ alpha/2)
        n = len(q)
        sd_hi = float(q.std(ddof=1) * math.sqrt((n - 1) / chi2.ppf(alpha / 4, n - 1)))
        mean_hi = float(q.mean() + t_dist.ppf(1 - alpha / 4, n - 1) * q.std(ddof=1) / math.sqrt(n))
        return mean_hi + sd_hi * float(ndtri(1 - prior)), prior
    if q_model == "empirical":
        qs = np.sort(q)
        tau = float(qs[math.ceil((1 - prior) * trials) - 1])  # empirical (1 − p') quantile
        return tau, clopper_pearson(int((qs > tau).sum()), trials, alpha / 2)[1]
    raise ConfigError(f"q_model must be gaussian or empirical, got {q_model!r}")


def _secret_claim(rho: float, sigma: float, sample: str, at: float) -> float:
    """B(p') of ONE clustering's events for a holder sampled with probability ρ, at σ."""
    from ..mechanisms.clustering import clustering_plan, clustering_secret_events
    from ..privacy import blowup_of, secret_noise

    plan = clustering_plan(1, sample)
    noise = secret_noise(np.ones((1, 1)), p=1e-4, r=0.5, compositions=plan.compositions,
                         sampling="max", release_sensitivity=plan.release_sensitivity)
    noise = _with_rho(noise, rho)
    (se,) = clustering_secret_events(noise, sigma, sample).values()
    return float(blowup_of([se.event], min(at, 0.5)))


def audit_secret_clustering(
    *,
    rho: float,
    sigma: float,
    sample: str = "independent",
    claim_sample: str | None = None,
    trials: int = 20000,
    prior: float = 1e-3,
    rng: np.random.Generator | None = None,
    alpha: float = 0.05,
    actual_noise_scale: float = 1.0,
    n_public: int = 200,
    q_model: str = "gaussian",
) -> AuditResult:
    """SecPE's Eq 7 release (``privtext.mechanisms.clustering.secret_clustering``) for one secret held by one
    record sampled with probability ``rho``, noise ``sigma``, drawing its sample(s) as ``sample``.

    The pair is the data with and without one secret holder placed where it moves its cluster most (antipodal to
    the public centre); the attack thresholds the standardised count shift plus the standardised centre shift
    along the holder's direction so that its false-positive rate is at most p' = ``prior``. The claim is the
    blow-up the accountant gives for the events of ``claim_sample`` (default: ``sample``) at this σ —
    ``clustering_secret_events`` composed once. Passing ``sample="shared", claim_sample="independent"``
    re-introduces the first review's bug (one draw, accounted as two independent releases): the audit must fail.
    """
    from ..mechanisms import clustering

    if not 0 < rho <= 1:
        raise ConfigError(f"rho must lie in (0, 1], got {rho}")
    if not 0 < prior < 0.5:
        raise ConfigError(f"the audited prior must lie in (0, 0.5), got {prior}")
    g = _noise(rng)
    d = 4
    e1 = np.zeros((1, d), dtype=np.float32)
    e1[0, 0] = 1.0
    cl = clustering.PublicClusters(centres=e1, sizes=np.array([n_public]), group=np.zeros(1, dtype=np.int64))
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
        rel, _ = clustering.secret_clustering(x, groups[: len(x)], cl, rho=rho_a[: len(x)],
                                              sigma=sigma * actual_noise_scale, rng=r, sample=sample)
        return stat(rel)

    q = np.asarray([run_once(False, g) for _ in range(trials)])
    tau, fpr_hi = _secret_threshold(q, prior, alpha, q_model, trials)
    hits = sum(run_once(True, g) > tau for _ in range(trials))
    lo, hi = clopper_pearson(int(hits), trials, alpha / 2)
    cs = claim_sample or sample
    claim = _secret_claim(rho, sigma, cs, fpr_hi)
    return AuditResult(
        mechanism=f"secret_clustering ({sample} sample, ρ={rho:g}, σ={sigma:.4g})"
                  + (f", claimed as {cs}" if cs != sample else ""),
        quantity="posterior", claim=claim, estimate=lo, interval=(lo, hi), trials=trials, alpha=alpha,
        details={"prior_audited": prior, "false_positive_rate_upper": fpr_hi, "successes": int(hits),
                 "claim_at": min(fpr_hi, 0.5), "q_model": q_model})


class _Releases:
    """The audit's release path: describe, compute, check the event — nothing recorded or kept (each trial draws
    afresh), as :class:`privtext.privacy.release.ReleaseKeeper` does on a run's first draw."""

    def release(self, release: Any, compute: Callable[[], tuple[dict[str, np.ndarray], Any]]
                ) -> dict[str, np.ndarray]:
        from ..privacy.release import check_spent

        release.validate()
        values, spent = compute()
        check_spent(release, spent)
        return values


def audit_secpe_hybrid(*, rho: float, sigma: float, sample: str = "independent", trials: int = 4000,
                       prior: float = 1e-3, rng: np.random.Generator | None = None, alpha: float = 0.05,
                       n_public: int = 200, scorer_factory: Callable[..., Any] | None = None) -> AuditResult:
    """SecPE's hybrid votes as its scorer computes them (``privtext.methods.secpe.ClusterScorer`` with secret-free
    records voting directly): the secret-free records vote exactly (they are public under secret protection), the
    secret holders only through the noisy clustering. The pair: with and without one secret holder placed exactly
    on a candidate c* that no public record and no public centre is nearest to. The statistic is the released vote
    of c*: a function of released values (the noisy clustering) and public votes only when the holder votes
    through the clusters; a holder that also votes exactly (issue 21's mutant) adds 1 to it in every trial. The
    threshold is the empirical (1 − p') quantile of the no-secret runs; the claim the blow-up B(p') of one
    clustering's events at the audited rate. ``scorer_factory`` (tests) replaces the scorer class."""
    from ..data.population import Population
    from ..mechanisms import clustering
    from ..methods.secpe import ClusterScorer, SecPEOptions
    from ..privacy.relation import NeighbouringRelation

    g = _noise(rng)
    d = 4
    e = np.eye(d, dtype=np.float32)
    cl = clustering.PublicClusters(centres=e[:1].copy(), sizes=np.array([n_public]), group=np.zeros(1, dtype=np.int64))
    holder = e[1:2].copy()  # the holder's nearest candidate is c* = e₂; the centre's is c₀ = e₁
    cand = np.stack([e[0], e[1], e[2]]).astype(np.float32)
    pop = Population(ids=["c0", "c*", "c2"], texts=["", "", ""], group=np.zeros(3, dtype=np.int64),
                     origin=["random"] * 3, parent=[None] * 3, generator=["audit"] * 3, emb=cand)
    direct = np.repeat(e[2:3], 5, axis=0)  # secret-free records: all nearest to c₂
    noise_res = _secret_noise_for(rho, sample)
    factory = scorer_factory or ClusterScorer
    opts = SecPEOptions(voting="hybrid", sample=cast(Any, sample), clip_radius=1.0)

    def run_once(with_secret: bool, r: np.random.Generator) -> float:
        priv = holder if with_secret else np.zeros((0, d), dtype=np.float32)
        scorer = factory(clusters=cl, private_emb=priv, private_groups=np.zeros(len(priv), dtype=np.int64),
                         rho=np.full(len(priv), rho), sigma=sigma, noise=noise_res, options=opts, metric="l2",
                         center="none", threshold=0.0, relation=NeighbouringRelation.secret_holders(),
                         keeper=cast(Any, _Releases()), noise_rng=lambda key: r,
                         direct_emb=direct, direct_groups=np.zeros(len(direct), dtype=np.int64))
        return float(scorer.score(iteration=0, population=pop, vote_emb=cand).histogram[1])

    q = np.asarray([run_once(False, g) for _ in range(trials)])
    tau, fpr_hi = _secret_threshold(q, prior, alpha, "empirical", trials)
    hits = sum(run_once(True, g) > tau for _ in range(trials))
    lo, hi = clopper_pearson(int(hits), trials, alpha / 2)
    claim = _secret_claim(rho, sigma, sample, fpr_hi)
    return AuditResult(mechanism=f"secpe_hybrid_votes ({sample} sample, ρ={rho:g}, σ={sigma:.4g})",
                       quantity="posterior", claim=claim, estimate=lo, interval=(lo, hi), trials=trials, alpha=alpha,
                       details={"prior_audited": prior, "false_positive_rate_upper": fpr_hi, "successes": int(hits),
                                "threshold": tau})


def _secret_noise_for(rho: float, sample: str) -> Any:
    from ..mechanisms.clustering import clustering_plan
    from ..privacy import secret_noise

    plan = clustering_plan(1, sample)
    noise = secret_noise(np.ones((1, 1)), p=1e-4, r=0.5, compositions=plan.compositions,
                         sampling="max", release_sensitivity=plan.release_sensitivity)
    return _with_rho(noise, rho)


def _with_rho(noise: Any, rho: float) -> Any:
    """A SecretNoiseResult for one holder with sampling probability ``rho`` (the group's ρ replaced)."""
    from dataclasses import replace

    (gid, grp), = noise.group_info.items()
    return replace(noise, group_info={gid: replace(grp, rho=(float(rho),))})


__all__ = [
    "POWER",
    "TARGET_CLAIM",
    "AuditResult",
    "audit_dp_term_histogram",
    "audit_dp_vocabulary",
    "audit_federated_sum",
    "audit_gaussian_release",
    "audit_label_histogram",
    "audit_laplace_label_histogram",
    "audit_laplace_reference",
    "audit_laplace_release",
    "audit_rff_sketch",
    "audit_secpe_hybrid",
    "audit_secret_clustering",
    "audit_topq_histograms",
    "audit_vote_histogram",
    "group_size",
    "plan_laplace",
]
