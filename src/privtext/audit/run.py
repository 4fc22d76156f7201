"""``privtext audit RUN_DIR``: check every release a run recorded against an independent derivation, then attack
each kind of release at the run's recorded noise.

For each ledger entry (``private/ledger.jsonl``) the audit

1. **derives** the sensitivity the entry must have from the run's configuration and its neighbouring relation
   (:mod:`privtext.audit.derive`) and compares it with the recorded one — a difference fails the audit, whichever
   way it goes and however the mechanism then behaves;
2. **calibrates** the noise the entry must carry from the configuration and the budget alone
   (:mod:`privtext.audit.calibrate`: the noise multiplier, the Laplace ε, DP-SGD's q and steps, SecPE's σ) and
   compares it with the recorded one — a ledger that claims more (or less) noise than the budget gives fails;
3. **attacks** the release as the method runs it (:mod:`privtext.audit.mechanisms`): the mechanism function at
   the *derived* noise, a canary of g neighbours of the *derived* relation, and a trial count chosen from the
   claim so that halved noise is caught with probability ≥ 0.95. DP-SGD (dpft) is attacked with a one-run audit
   (:mod:`privtext.audit.dpsgd`: canary gradients through the library's DP-SGD step at the run's q, steps, C
   and derived σ, scored from the final parameters; Steinke, Nasr & Jagielski 2023).

It reads the run's public configuration, its statement and its ledger (the event parameters: no private value);
the attacks run on synthetic worst-case inputs, never on the run's private data.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .calibrate import NoiseCheck, Slot, check_noise, noise_plan
from .derive import (
    Derivation,
    Relation,
    check_release,
    claim_of,
    expected,
    noise_of,
    relation_of,
    release_kind,
)
from .mechanisms import (
    AuditResult,
    audit_dp_term_histogram,
    audit_dp_vocabulary,
    audit_federated_sum,
    audit_label_histogram,
    audit_laplace_label_histogram,
    audit_rff_sketch,
    audit_secpe_hybrid,
    audit_secret_clustering,
    audit_topq_histograms,
    audit_vote_histogram,
)


def _derivation_result(d: Derivation, keys: list[str]) -> AuditResult:
    shown = keys[0] if len(keys) == 1 else f"{keys[0]} … {keys[-1]} ({len(keys)})"
    return AuditResult(
        mechanism=f"{d.kind} [{shown}]", quantity="sensitivity", claim=d.derived, estimate=d.recorded,
        interval=(d.recorded, d.recorded), trials=0, alpha=0.0, check="derivation", ok=d.passed,
        details={"norm": d.norm, "why": d.why, "implied": d.implied, "claim": d.claim, "quantity": d.quantity,
                 "relation": d.relation, "keys": keys, "mechanism": d.mechanism})


def _unknown(release: Any) -> AuditResult:
    return AuditResult(mechanism=f"{release.mechanism} [{release.key}]", quantity="sensitivity", claim=math.nan,
                       estimate=float(release.sensitivity), interval=(math.nan, math.nan), trials=0, alpha=0.0,
                       check="derivation", ok=False,
                       details={"norm": "?", "why": "the audit has no independent derivation for this release kind",
                                "implied": math.nan, "claim": math.nan, "quantity": "?", "relation": "",
                                "keys": [release.key], "mechanism": release.mechanism})


def _calibration_result(c: NoiseCheck, keys: list[str]) -> AuditResult:
    shown = keys[0] if len(keys) == 1 else f"{keys[0]} … {keys[-1]} ({len(keys)})"
    quantity = {"gaussian": "noise multiplier", "dpsgd": "noise multiplier", "laplace": "epsilon per release",
                "secret": "noise std"}.get(c.slot.what, "noise")
    return AuditResult(
        mechanism=f"{c.kind} [{shown}]", quantity=quantity, claim=c.derived, estimate=c.recorded,
        interval=(c.recorded, c.recorded), trials=0, alpha=0.0, check="calibration", ok=c.passed,
        details={"why": c.slot.why, "note": c.note, "rtol": c.slot.rtol, "keys": keys, **c.slot.extra})


def _failed(what: str, err: Exception) -> AuditResult:
    return AuditResult(mechanism=what, quantity="error", claim=math.nan, estimate=math.nan,
                       interval=(math.nan, math.nan), trials=0, alpha=0.0, check="attack", ok=False,
                       details={"error": str(err)})


def _opts(config: Any) -> dict[str, Any]:
    """The options of the run's method as its resolved configuration holds them (the section its description
    names): every release kind's attack reads the options of the method that made the release."""
    from ..methods import describe

    return config.section(describe(config.method).section)


def audit_run(run_dir: Any, *, trials: int | None = None, secret_trials: int = 20000, alpha: float = 1e-3,
              rng: np.random.Generator | None = None, group: int | str | None = "auto",
              attack: bool = True, dpsgd_canaries: int | None = None) -> list[AuditResult]:
    """The derivation checks and the attacks of a run (module docstring), in ledger order of first appearance.

    ``alpha``: each attack's bound holds with probability ≥ 1 − alpha (default 1e-3: a correct mechanism fails an
    attack with probability below 0.1%); ``trials`` overrides the planned trial counts of the DP attacks;
    ``group`` the canary size (``"auto"``: g ≈ 1.5 / claim per neighbour; 1: one neighbour); ``rng`` seeds the
    audit's draws from the privacy noise source (reproducible audits); ``attack=False`` runs the derivation checks
    only (a second or so); ``dpsgd_canaries`` the canary count of the DP-SGD one-run audit (default: planned
    from the claim, :func:`privtext.audit.dpsgd.plan_canaries`)."""
    from ..privacy.release import Release
    from ..rundir import RunDir
    from ..runner import load_run_config

    run = RunDir(run_dir).require()
    config = load_run_config(run.root)
    statement = json.loads(run.privacy.read_text(encoding="utf-8")) if run.privacy.exists() else None
    releases = [Release.from_dict(json.loads(x)) for x in run.ledger.read_text(encoding="utf-8").splitlines()
                if x.strip()]
    relation = relation_of(config, statement)
    out: list[AuditResult] = []

    # 1. the derivation of every entry, grouped by what it found
    groups: dict[tuple[Any, ...], tuple[Derivation, list[str]]] = {}
    for r in releases:
        d = check_release(r, config, relation)
        if d is None:
            out.append(_unknown(r))
            continue
        k = (d.kind, d.mechanism, round(d.recorded, 12), round(d.derived, 12), round(d.implied, 9),
             round(d.claim, 9))
        groups.setdefault(k, (d, []))[1].append(r.key)
    out.extend(_derivation_result(d, keys) for d, keys in groups.values())

    # 2. the noise of every entry against the audit's own calibration from the configuration and the budget
    plan: dict[str, Slot] = {}
    try:
        plan = noise_plan(config, releases)
        cal: dict[tuple[Any, ...], tuple[NoiseCheck, list[str]]] = {}
        for c in check_noise(config, releases, plan):
            k = (c.kind, round(c.recorded, 9) if math.isfinite(c.recorded) else "nan", round(c.derived, 9),
                 c.passed, c.note)
            cal.setdefault(k, (c, []))[1].append(c.key)
        out.extend(_calibration_result(c, keys) for c, keys in cal.values())
    except ConfigError as e:
        out.append(_failed("calibration", e))
    if not attack:
        return out

    # 3. one attack per kind of release and noise level, at the derived noise
    seen: dict[tuple[Any, ...], Any] = {}
    dpsgd = [r for r in releases if release_kind(r.mechanism, r.key) == "dpsgd"]
    if dpsgd:  # every epoch together: one training run of the canary model (audit.dpsgd)
        try:
            out.append(_attack_dpsgd(dpsgd, config, plan.get("dpsgd"), releases, alpha=alpha, rng=rng,
                                     canaries=dpsgd_canaries))
        except ConfigError as e:
            out.append(_failed(f"dpsgd [{dpsgd[0].key}]", e))
    for r in releases:
        kind = release_kind(r.mechanism, r.key)
        if kind is None or kind == "dpsgd" or r.noise_std <= 0:
            continue
        key = (kind, r.mechanism, round(noise_of(r), 12), round(float(r.sensitivity), 12),
               r.meta.get("sample"), _largest_single_holder_rho(r) if kind == "clustering" else None)
        seen.setdefault(key, r)
    for r in seen.values():
        kind = release_kind(r.mechanism, r.key)
        assert kind is not None
        try:
            out.extend(_attack(kind, r, config, relation, trials=trials, secret_trials=secret_trials, alpha=alpha,
                               rng=rng, group=group, slot=plan.get(kind)))
        except ConfigError as e:
            out.append(_failed(f"{r.mechanism} [{r.key}]", e))
    return out


def _attack(kind: str, r: Any, config: Any, relation: Relation, *, trials: int | None, secret_trials: int,
            alpha: float, rng: np.random.Generator | None, group: int | str | None,
            slot: Slot | None = None) -> list[AuditResult]:
    """One release kind's attack at the noise the audit derived (``slot``; the ledger's only where the audit has
    no calibration for it, which the calibration check has already failed)."""
    exp = expected(kind, config, relation, meta=r.meta)
    rec = float(r.sensitivity)
    records = relation.records if relation.kind in ("secret_group", "user") else 1
    derived = slot.value if (slot is not None and math.isfinite(slot.value) and slot.value > 0) else None
    if kind in ("votes", "topq", "labels_gaussian"):
        z = derived if derived is not None else 1.0 / claim_of(r)
        if r.mechanism in ("federated_nn_vote_sum", "federated_topq_sum"):
            o = _opts(config)
            pt = o.get("parties") or {}
            level = pt.get("level", "record")
            return [audit_federated_sum(
                z, sensitivity=rec, level=level, cap=pt.get("max_records"), normalise=bool(pt.get("normalise")),
                min_survivors=int(r.meta.get("min_survivors") or pt.get("min_survivors") or 2),
                value_bound=pt.get("value_bound"), q=exp.params.get("q") if kind == "topq" else None, group=group,
                trials=trials, rng=rng, alpha=alpha)]
        if kind == "votes":
            return [audit_vote_histogram(z, sensitivity=rec, derived=exp.sensitivity, group=group, trials=trials,
                                         rng=rng, alpha=alpha)]
        if kind == "labels_gaussian":
            return [audit_label_histogram(z, sensitivity=rec, derived=exp.sensitivity, group=group, trials=trials,
                                          rng=rng, alpha=alpha)]
        q = int(exp.params["q"])
        if relation.kind != "add_remove":
            raise ConfigError(f"the single-holder Top-Q audit covers add/remove one sample, not {relation.words()}")
        return [audit_topq_histograms(z, q=q, sensitivity=rec, group=group, trials=trials, rng=rng, alpha=alpha)]
    rel_name = "replace_one" if relation.kind == "replace_one" else "add_remove"
    eps = derived if (derived is not None and slot is not None and slot.what == "laplace") else claim_of(r)
    scale = rec / eps if (derived is not None and slot is not None and slot.what == "laplace") else noise_of(r)
    if kind == "labels_laplace":
        return [audit_laplace_label_histogram(eps, scale=scale, relation=rel_name, records=records,
                                              group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "vocabulary":
        return [audit_dp_vocabulary(eps, r=int(exp.params["r"]), scale=scale, relation=rel_name,
                                    records=records, group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "term_histogram":
        if exp.params.get("c_w", 1) != 1:
            raise ConfigError("the term-histogram attack covers weighting 'mean' (c_w = 1); the derivation check "
                              "still applies")
        return [audit_dp_term_histogram(eps, scale=scale, relation=rel_name, records=records,
                                        group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "rff_sketch":
        if exp.params.get("noise") == "paper" or exp.params.get("c_w", 1) != 1:
            raise ConfigError("the RFF attack covers noise 'sum' with weighting 'mean'; the derivation check still "
                              "applies")
        bw = float(_opts(config).get("bandwidth", 0.3)) * math.sqrt(_blocks(r.key))
        return [audit_rff_sketch(eps, n_features=int(exp.params["n_features"]), scale=scale,
                                 derived=exp.sensitivity, relation=rel_name, bandwidth=bw, group=group,
                                 trials=trials, rng=rng, alpha=alpha)]
    if kind == "clustering":
        rho = _largest_single_holder_rho(r)
        sample = str(r.meta.get("sample") or "independent")
        sigma = derived if derived is not None else r.noise_std
        out = [audit_secret_clustering(rho=rho, sigma=sigma, sample=sample, trials=secret_trials, rng=rng,
                                       alpha=alpha)]
        if _opts(config).get("voting", "hybrid") == "hybrid":
            out.append(audit_secpe_hybrid(rho=rho, sigma=sigma, sample=sample,
                                          trials=max(secret_trials // 5, 2000), rng=rng, alpha=alpha))
        return out
    raise ConfigError(f"no attack for release kind {kind!r}")


def _attack_dpsgd(releases: list[Any], config: Any, slot: Slot | None, ledger: list[Any], *, alpha: float,
                  rng: np.random.Generator | None, canaries: int | None) -> AuditResult:
    """The one-run canary audit of the run's DP-SGD (:func:`privtext.audit.dpsgd.audit_dpsgd_run`) at the
    derived σ, q and steps, its claim the ε of the DP-SGD releases alone at the run's δ."""
    from .dpsgd import audit_dpsgd_run

    o = _opts(config)
    if slot is not None and slot.what == "dpsgd" and math.isfinite(slot.value):
        sigma, q, per_epoch = slot.value, slot.extra["sampling_rate"], slot.extra["steps"]
    else:  # no calibration (it failed above): the ledger's own parameters
        r = releases[0]
        sigma, q, per_epoch = 1.0 / claim_of(r), float(r.meta["sampling_rate"]), int(r.meta["steps"])
    p = config.privacy
    delta = float(p.delta) if p.kind == "dp" else 1e-5
    return audit_dpsgd_run(
        sigma=sigma, sampling_rate=q, steps_per_epoch=per_epoch, epochs=len(releases),
        max_grad_norm=float(o.get("max_grad_norm", 1.0)), delta=delta, noise_source=o.get("noise_source", "csprng"),
        canaries=canaries, alpha=alpha, rng=rng, keys=[r.key for r in releases])


def _blocks(key: str) -> int:
    try:
        return int(key.rsplit("m=", 1)[1])
    except (IndexError, ValueError):
        return 1


def _largest_single_holder_rho(release: Any) -> float:
    """ρ of the worst single-holder secret group of a clustering release (a group whose mixture has two
    components, [1 − ρ, ρ]); without one, the probability that the group's holders are sampled at all."""
    best = 0.0
    fallback = 0.0
    for se in (release.secret_events or {}).values():
        ev = se.event
        while hasattr(ev, "event"):  # SelfComposedDpEvent(mixture, 2)
            ev = ev.event
        probs = list(getattr(ev, "sampling_probs", []))
        if len(probs) == 2:
            best = max(best, float(probs[1]))
        elif probs:
            fallback = max(fallback, 1.0 - float(probs[0]))
    return best or fallback or 1.0


def write_audit(results: list[AuditResult], path: str | Path) -> Path:
    """The audit's results as JSON (for CI artefacts)."""
    from ..atomicio import atomic_write_json

    atomic_write_json(Path(path), {"audits": [r.to_dict() for r in results], "passed": all(r.passed for r in results)})
    return Path(path)


__all__ = ["audit_run", "write_audit"]
