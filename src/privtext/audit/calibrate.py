"""The audit's own calibration: the noise every release must carry, derived from the run's configuration and its
budget — never read from the ledger.

:mod:`privtext.audit.derive` re-derives each release's sensitivity Δ; an audit that then re-runs the mechanism at
the noise multiplier the ledger records passes a ledger that claims more noise than the code drew (issue 36: a
ledger claiming twice the vote noise gave "recorded noise gives μ 0.5, claim 0.5: pass"). So the audit also
solves, from the configuration and the budget alone, for the noise of every release — a second, small
calibration, written here from the papers' formulas and dp_accounting, not through the methods' code
(:mod:`privtext.privacy.calibration`, the methods' ``calibrate``) — and fails any ledger entry whose noise differs.

What is derived, per method (T = ``evolution.iterations``; f = ``label_distribution.budget_fraction``; μ(ε, δ)
the GDP level whose Gaussian curve meets (ε, δ), Dong, Roth & Su 2019 Cor 2.13, solved here by bisection; μ of a
secret budget (p, r) is Φ⁻¹(1−p) − Φ⁻¹(1−r), SecPE Eq 4):

* **Aug-PE** — T vote releases at z and, with DP labels, one label histogram at z_L. All Gaussian: they compose
  exactly as μ² = T/z² + 1/z_L² (GDP), and the label histogram takes the share f of μ², so z = √(T/(1−f))/μ and
  z_L = 1/(√f·μ) for a μ, secret or (ε, δ) budget (the PLD calibration of the method is this up to its
  discretisation). With the DP vocabulary (``vocabulary_prompts``): a Laplace release at ε_v = share·ε, and z is
  solved on dp_accounting's PLD of [Laplace(ε_v), Gaussian(z_L), T × Gaussian(z)] so that ε(δ) = ε.
  ``privacy.noise_multiplier``: z as given, z_L = z·√((1−f)/(f·T)).
* **WASP** — n = T (``output: nearest``) or T − 1 releases (0 without feedback) at z = √n/μ; ``calibration:
  paper``: WASP's σ = 4·√(2 ln(1.25/δ))·√n/ε (Alg 1 line 2) over the exact Δ_Q, z = σ/Δ_Q.
* **DP-KPS** — pure ε: ε_labels = f·ε; ε_vocab and ε_kde as configured, else share·(ε − ε_labels) and the rest;
  the term histogram at ε_kde, or the K sketches of the ledger at ε_kde/K each.
* **SecPE** — σ depends on which records hold which secret (SecretNoise, Alg 1): from the per-secret sampling
  mixtures the ledger records (the statement's stated assumption), σ must be the smallest noise whose every
  secret's blow-up B(p) stays ≤ r over the run's releases — checked by bisection on σ with the library's
  blow-up accountant (:func:`privtext.privacy.accounting.blowup_of`; the one check here that shares code with the
  method: the accountant, not its LP, sampling or search).
* **dpft** — q = ``dpft.sampling_rate`` (public), round(1/q) steps per epoch; with DP labels z_L = 1/(√f·μ); z
  solved on dp_accounting's PLD of [Gaussian(z_L), SelfComposed(PoissonSampled(q, Gaussian(z)), epochs·round(1/q))]
  so that ε(δ) = ε (Abadi et al. 2016; the PLD of the sampled Gaussian).

Agreement: closed forms must match the ledger to :data:`RTOL_EXACT`; PLD solutions to :data:`RTOL_PLD` (the two
accountants discretise differently); anything else — twice the noise, half of it — fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr, ndtri

from ..errors import ConfigError
from .derive import release_kind, topq_record_sensitivity

#: closed forms (GDP composition, pure-ε sums, configured noise): the ledger's value within this relative error
RTOL_EXACT = 1e-4
#: solutions on a discretised PLD (dp_accounting's here, the library's in the method)
RTOL_PLD = 1e-2
#: the PLD discretisation the audit solves on (dp_accounting's pessimistic PLD: at 1e-3, ε of dpft's default
#: DP-SGD agrees with 1e-4 to 1e-5, ten times faster)
PLD_INTERVAL = 1e-3


# ------------------------------------------------------------------------------------------------ primitives


def gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of the μ-GDP pair N(0,1) vs N(μ,1): Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2) (Dong et al. 2019, Cor 2.13)."""
    if mu <= 0:
        return 0.0
    a = float(ndtr(-epsilon / mu + mu / 2))
    b = math.exp(epsilon + float(log_ndtr(-epsilon / mu - mu / 2)))
    return max(a - b, 0.0)


def mu_for_dp(epsilon: float, delta: float) -> float:
    """The μ whose Gaussian pair meets (ε, δ) exactly: δ(ε) = δ (increasing in μ; bisection)."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ConfigError(f"need ε > 0 and 0 < δ < 1, got ε={epsilon!r}, δ={delta!r}")
    hi = 1.0
    while gaussian_delta(hi, epsilon) < delta:
        hi *= 2
        if hi > 1e6:
            raise ConfigError(f"no Gaussian level meets (ε={epsilon}, δ={delta})")
    return float(brentq(lambda m: gaussian_delta(m, epsilon) - delta, 1e-9, hi, xtol=1e-14, rtol=1e-13))


def mu_for_secret(p: float, r: float) -> float:
    """SecPE Eq 4: μ = Φ⁻¹(1−p) − Φ⁻¹(1−r)."""
    return float(ndtri(1 - p) - ndtri(1 - r))


def pld_epsilon(events: Sequence[Any], delta: float) -> float:
    """ε(δ) of the composition of dp_accounting ``events`` on dp_accounting's own PLD accountant (pessimistic)."""
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(value_discretization_interval=PLD_INTERVAL)
    for e in events:
        acc.compose(e)
    return float(acc.get_epsilon(delta))


def smallest(meets: Callable[[float], bool], guess: float, rtol: float = 1e-5) -> float:
    """The smallest s > 0 with ``meets(s)`` (monotone: more noise, more privacy), by bisection in log s from a
    bracket of ±0.1 % around ``guess``, grown by factors of 2 when the answer lies outside it (any positive
    starting point gives the same answer; a good one saves evaluations)."""
    g = max(float(guess), 1e-6)
    lo, hi = g / 1.001, g * 1.001
    if meets(hi):
        while meets(lo):
            hi, lo = lo, lo / 2
            if lo < 1e-9:
                return hi
    else:
        lo, hi = hi, hi * 2
        while not meets(hi):
            lo, hi = hi, hi * 2
            if hi > 1e9:
                raise ConfigError("no noise level meets the budget")
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ------------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Slot:
    """The noise one kind of release must carry: ``gaussian`` (noise multiplier z = std/Δ), ``laplace`` (ε per
    release: scale Δ₁/ε), ``dpsgd`` (z, with the sampling rate and steps of each release), ``secret`` (the noise
    std σ itself)."""

    what: str
    value: float
    why: str
    rtol: float = RTOL_EXACT
    planned: int | None = None  # how many such releases the configuration implies (None: not checked)
    extra: dict[str, Any] = field(default_factory=dict)  # dpsgd: sampling_rate, steps


@dataclass(frozen=True)
class NoiseCheck:
    """A ledger entry's noise against the audit's calibration."""

    key: str
    kind: str
    slot: Slot
    recorded: float
    passed: bool
    note: str = ""

    @property
    def derived(self) -> float:
        return self.slot.value


def _opts(config: Any, section: str) -> Any:
    """The method section with its defaults (the configuration schema, :attr:`MethodRun.Options`)."""
    from ..methods import METHODS

    sec = getattr(config, section, None)
    return METHODS.get(section).Options(**(dict(sec.options()) if sec is not None else {}))


def _labels_dp(config: Any) -> tuple[bool, float]:
    ld = config.synthesis.label_distribution
    return ld.kind == "dp" and bool(config.data.label_columns), float(ld.budget_fraction)


def _gdp_level(config: Any) -> tuple[float | None, str]:
    """μ of the run's budget (None for a fixed noise multiplier), and its origin in words."""
    p = config.privacy
    if p.kind == "noise":
        return None, f"privacy.noise_multiplier = {p.noise_multiplier:g}"
    if p.kind == "gdp":
        return float(p.mu), f"μ = {p.mu:g}"
    if p.kind == "secret":
        s = p.secret
        return mu_for_secret(s.p, s.r), f"(p={s.p:g}, r={s.r:g}) → μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (SecPE Eq 4)"
    if p.kind == "dp":
        mu = mu_for_dp(float(p.epsilon), float(p.delta))
        return mu, f"(ε={p.epsilon:g}, δ={p.delta:g}) → μ = {mu:.6g} (the Gaussian curve through it)"
    raise ConfigError(f"the audit has no Gaussian calibration for a {p.kind!r} budget")


def _augpe(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    import dp_accounting

    o = _opts(config, "augpe")
    T = int(config.evolution.iterations)
    labels, f = _labels_dp(config)
    p = config.privacy
    out: dict[str, Slot] = {}
    if p.kind == "noise":
        z = float(p.noise_multiplier)
        out["votes"] = Slot("gaussian", z, "privacy.noise_multiplier as configured", planned=T)
        if labels:
            out["labels_gaussian"] = Slot("gaussian", z * math.sqrt((1 - f) / (f * T)),
                                          f"z·√((1−f)/(f·T)), f = {f:g}: the label share of the implicit budget",
                                          planned=1)
        return out
    mu, origin = _gdp_level(config)
    assert mu is not None
    share = float(o.vocabulary_epsilon_fraction)
    vocab = bool(o.vocabulary_prompts) and p.kind == "dp"
    ff = f if labels else 0.0
    z = math.sqrt(T / (1 - ff)) / mu
    why = f"{T} Gaussian vote releases" + (f" and a label histogram taking f = {f:g} of μ²" if labels else "")
    rtol = RTOL_EXACT
    if vocab:
        eps_v = share * float(p.epsilon)
        out["vocabulary"] = Slot("laplace", eps_v, f"ε_v = {share:.6g}·ε", planned=1)
        ratio = math.sqrt((1 - f) / (f * T)) if labels else None

        def meets(s: float) -> bool:
            ev = [dp_accounting.LaplaceDpEvent(1 / eps_v),
                  dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(s), T)]
            if ratio is not None:
                ev.append(dp_accounting.GaussianDpEvent(s * ratio))
            return pld_epsilon(ev, float(p.delta)) <= float(p.epsilon)

        z = smallest(meets, z, rtol=1e-4)
        why += f" composed with the Laplace vocabulary (ε_v = {eps_v:.4g}) on dp_accounting's PLD"
        rtol = RTOL_PLD
    else:
        why += f": GDP composition, z = √(T/(1−f))/μ, {origin}"
    out["votes"] = Slot("gaussian", z, why, rtol=rtol, planned=T)
    if labels:
        out["labels_gaussian"] = Slot("gaussian", z * math.sqrt((1 - f) / (f * T)),
                                      f"z_L = 1/(√f·μ): the label share f = {f:g} of μ²", rtol=rtol, planned=1)
    return out


def _wasp(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    o = _opts(config, "wasp")
    T = int(config.evolution.iterations)
    if o.feedback == "none":
        n = 0
    else:
        n = T if o.output == "nearest" else max(T - 1, 0)
    p = config.privacy
    if p.kind == "noise":
        return {"topq": Slot("gaussian", float(p.noise_multiplier), "privacy.noise_multiplier as configured",
                             planned=n)}
    if n == 0:
        return {"topq": Slot("gaussian", 0.0, "no private release", planned=0)}
    if p.calibration == "paper":
        q = int(o.q)
        std = 4.0 * math.sqrt(2 * math.log(1.25 / float(p.delta))) * math.sqrt(n) / float(p.epsilon)
        return {"topq": Slot("gaussian", std / topq_record_sensitivity(q),
                             f"WASP Alg 1: σ = 4·√(2 ln(1.25/δ))·√{n}/ε over Δ_Q = {topq_record_sensitivity(q):.6g}",
                             planned=n)}
    mu, origin = _gdp_level(config)
    assert mu is not None
    return {"topq": Slot("gaussian", math.sqrt(n) / mu, f"{n} Gaussian releases: z = √n/μ, {origin}", planned=n)}


def _dpkps(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    o = _opts(config, "dpkps")
    total = float(config.privacy.epsilon)
    labels, f = _labels_dp(config)
    eps_l = f * total if labels else 0.0
    rest = total - eps_l
    ev, ek = o.epsilon_vocab, o.epsilon_kde
    share = float(o.vocab_share)
    if ev is None or ek is None:
        ev, ek, how = share * rest, (1 - share) * rest, f"share {share:.6g} of ε − ε_labels"
    else:
        how = "as configured"
    out = {"vocabulary": Slot("laplace", float(ev), f"ε_vocab {how}", planned=1),
           "term_histogram": Slot("laplace", float(ek), f"ε_kde {how}", planned=1)}
    k = sum(1 for r in ledger if release_kind(r.mechanism, r.key) == "rff_sketch")
    if k:
        out["rff_sketch"] = Slot("laplace", float(ek) / k, f"ε_kde {how}, split over the ledger's {k} sketches")
    if labels:
        out["labels_laplace"] = Slot("laplace", eps_l, f"ε_labels = f·ε, f = {f:g}", planned=1)
    return out


def _dpft(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    import dp_accounting

    o = _opts(config, "dpft")
    q = float(o.sampling_rate)
    per_epoch = max(1, round(1 / q))
    epochs = int(o.epochs)
    labels, f = _labels_dp(config)
    p = config.privacy
    sampling = {"sampling_rate": q, "steps": per_epoch}
    out: dict[str, Slot] = {}
    if p.kind == "noise":
        s = float(p.noise_multiplier)
        out["dpsgd"] = Slot("dpsgd", s, "privacy.noise_multiplier as configured", planned=epochs, extra=sampling)
        if labels:
            out["labels_gaussian"] = Slot("gaussian", s, "privacy.noise_multiplier as configured", planned=1)
        return out
    if p.kind != "dp":
        raise ConfigError(f"dpft needs an (ε, δ) budget, the run has {p.kind!r}")
    eps, delta = float(p.epsilon), float(p.delta)
    mu = mu_for_dp(eps, delta)
    z_l = 1 / (math.sqrt(f) * mu) if labels else None
    if z_l is not None:
        out["labels_gaussian"] = Slot("gaussian", z_l, f"z_L = 1/(√f·μ), f = {f:g}, μ = {mu:.6g}", planned=1)
    if epochs:
        steps = per_epoch * epochs

        def meets(s: float) -> bool:
            ev: list[Any] = [dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), steps)]
            if z_l is not None:
                ev.append(dp_accounting.GaussianDpEvent(z_l))
            return pld_epsilon(ev, delta) <= eps

        guess = next((float(r.noise_std / r.sensitivity) for r in ledger if r.mechanism == "dpsgd"), 1.0)
        z = smallest(meets, guess, rtol=1e-4)
        out["dpsgd"] = Slot("dpsgd", z, f"q = {q:g} (dpft.sampling_rate), {epochs} × {per_epoch} steps"
                            + (", with the label histogram" if z_l is not None else "")
                            + f": dp_accounting's PLD meets (ε={eps:g}, δ={delta:g})", rtol=RTOL_PLD,
                            planned=epochs, extra=sampling)
    return out


def _secpe(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    """σ from the recorded per-secret mixtures (module docstring)."""
    from ..privacy.accounting import blowup_of
    from ..privacy.events import event_from_dict, event_to_dict

    s = config.privacy.secret
    rel = [r for r in ledger if r.mechanism == "secret_clustering"]
    groups: dict[str, list[Any]] = {}
    for r in rel:
        for g, se in (r.secret_events or {}).items():
            groups.setdefault(g, []).append(se.event)
    recorded = max((float(r.noise_std) for r in rel), default=0.0)
    if not groups or recorded <= 0:
        return {"clustering": Slot("secret", 0.0, "no declared secret found: nothing private is released")}

    def rescaled(d: Any, factor: float) -> Any:
        if isinstance(d, dict):
            return {k: (v * factor if k in ("noise_multiplier", "standard_deviation") else rescaled(v, factor))
                    for k, v in d.items()}
        if isinstance(d, list):
            return [rescaled(v, factor) for v in d]
        return d

    base = {g: [event_to_dict(e) for e in evs] for g, evs in groups.items()}
    p, r_target = float(s.p), float(s.r)

    def meets(sigma: float) -> bool:  # every secret's composition over the releases keeps B(p) ≤ r
        f = sigma / recorded
        return all(blowup_of([event_from_dict(rescaled(d, f)) for d in ds], p) <= r_target * (1 + 1e-9)
                   for ds in base.values())

    return {"clustering": Slot("secret", smallest(meets, recorded, rtol=1e-4),
                               f"the smallest σ keeping every recorded secret's blow-up B(p={p:g}) ≤ r = {r_target:g} "
                               f"over {len(rel)} releases (SecPE Alg 1 line 6; the recorded sampling mixtures)",
                               rtol=RTOL_PLD)}


_METHODS: dict[str, Callable[[Any, list[Any]], dict[str, Slot]]] = {
    "augpe": _augpe, "wasp": _wasp, "dpkps": _dpkps, "dpft": _dpft, "secpe": _secpe}


def noise_plan(config: Any, ledger: list[Any]) -> dict[str, Slot]:
    """The noise each kind of release of the run must carry (module docstring), keyed by release kind
    (:func:`privtext.audit.derive.release_kind`)."""
    fn = _METHODS.get(config.method)
    if fn is None:
        raise ConfigError(f"the audit has no calibration for method {config.method!r}")
    return fn(config, ledger)


def recorded_noise(release: Any, slot: Slot) -> float:
    """The ledger entry's value of what ``slot`` derives: z = std/Δ (both the event's and the recorded std's must
    agree), the Laplace ε, or SecPE's σ."""
    from .derive import claim_of, noise_of

    if slot.what == "secret":
        return float(release.noise_std)
    if slot.what == "laplace":
        c = claim_of(release)
        scale = noise_of(release)
        implied = release.sensitivity / scale if scale > 0 else math.inf
        return c if math.isclose(c, implied, rel_tol=1e-9) else math.nan  # the event and the scale disagree
    z_event = 1 / claim_of(release) if claim_of(release) > 0 else math.inf
    z_std = float(release.noise_std) / float(release.sensitivity) if release.sensitivity > 0 else math.nan
    return z_event if math.isclose(z_event, z_std, rel_tol=1e-9) else math.nan


def check_noise(config: Any, releases: list[Any], plan: dict[str, Slot] | None = None) -> list[NoiseCheck]:
    """Every ledger entry's noise against :func:`noise_plan` (``plan``, when already made); a kind with more
    releases than the configuration implies fails too."""
    plan = noise_plan(config, releases) if plan is None else plan
    out: list[NoiseCheck] = []
    counts: dict[str, int] = {}
    for r in releases:
        kind = release_kind(r.mechanism, r.key)
        if kind is None:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        slot = plan.get(kind)
        if slot is None:
            out.append(NoiseCheck(r.key, kind, Slot("none", math.nan, "the configuration implies no such release"),
                                  math.nan, False, "the configuration implies no such release"))
            continue
        got = recorded_noise(r, slot)
        note = ""
        ok = bool(np.isfinite(got)) and math.isclose(got, slot.value, rel_tol=slot.rtol, abs_tol=1e-12)
        if not np.isfinite(got):
            note = "the entry's event and its recorded noise disagree"
        if slot.what == "dpsgd":
            q, steps = slot.extra["sampling_rate"], slot.extra["steps"]
            rq, rs = r.meta.get("sampling_rate"), r.meta.get("steps")
            ev_q, ev_s = _sampled(r.event)
            if not (rq == ev_q == q and rs == ev_s == steps):
                ok = False
                note = (f"sampling rate {rq} and {rs} steps recorded (event: {ev_q}, {ev_s}); the configuration "
                        f"gives q = {q:g} and {steps} steps")
        if slot.planned is not None and counts[kind] > slot.planned:
            ok = False
            note = f"release {counts[kind]} of this kind; the configuration implies {slot.planned}"
        out.append(NoiseCheck(r.key, kind, slot, got, ok, note))
    return out


def _sampled(event: Any) -> tuple[float | None, int | None]:
    count = getattr(event, "count", None)
    inner = getattr(event, "event", None)
    q = getattr(inner, "sampling_probability", None)
    return (float(q) if q is not None else None), (int(count) if count is not None else None)


__all__ = ["PLD_INTERVAL", "RTOL_EXACT", "RTOL_PLD", "NoiseCheck", "Slot", "check_noise", "gaussian_delta",
           "mu_for_dp", "mu_for_secret", "noise_plan", "pld_epsilon", "recorded_noise", "smallest"]
