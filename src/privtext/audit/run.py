"""``privtext audit RUN_DIR``: check every release a run recorded against an independent derivation, then attack
each kind of release at the run's recorded noise.

For each ledger entry (``private/ledger.jsonl``) the audit

1. **derives** the sensitivity the entry must have from the run's configuration and its neighbouring relation
   (:mod:`privtext.audit.derive`) and compares it with the recorded one — a difference fails the audit, whichever
   way it goes and however the mechanism then behaves;
2. **attacks** the release as the method runs it (:mod:`privtext.audit.mechanisms`): the mechanism function at
   the recorded noise (noise multiplier and Δ, or Laplace scale), a canary of g neighbours of the *derived*
   relation, and a trial count chosen from the claim so that halved noise is caught with probability ≥ 0.95.

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


def _failed(what: str, err: Exception) -> AuditResult:
    return AuditResult(mechanism=what, quantity="error", claim=math.nan, estimate=math.nan,
                       interval=(math.nan, math.nan), trials=0, alpha=0.0, check="attack", ok=False,
                       details={"error": str(err)})


def _opts(config: Any, section: str) -> dict[str, Any]:
    sec = getattr(config, section, None)
    return dict(sec.options()) if sec is not None else {}


def audit_run(run_dir: Any, *, trials: int | None = None, secret_trials: int = 20000, alpha: float = 1e-3,
              rng: np.random.Generator | None = None, group: int | str | None = "auto",
              attack: bool = True) -> list[AuditResult]:
    """The derivation checks and the attacks of a run (module docstring), in ledger order of first appearance.

    ``alpha``: each attack's bound holds with probability ≥ 1 − alpha (default 1e-3: a correct mechanism fails an
    attack with probability below 0.1%); ``trials`` overrides the planned trial counts of the DP attacks;
    ``group`` the canary size (``"auto"``: g ≈ 1.5 / claim per neighbour; 1: one neighbour); ``rng`` seeds the
    audit's draws from the privacy noise source (reproducible audits); ``attack=False`` runs the derivation checks
    only (a second or so)."""
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
    if not attack:
        return out

    # 2. one attack per kind of release and noise level
    seen: dict[tuple[Any, ...], Any] = {}
    for r in releases:
        kind = release_kind(r.mechanism, r.key)
        # DP-SGD has the derivation check only: attacking it means training a model per trial (a canary-gradient
        # audit of the step is Opacus' and the tests' business: tests/test_dpft.py plants clipping/noise faults)
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
                               rng=rng, group=group))
        except ConfigError as e:
            out.append(_failed(f"{r.mechanism} [{r.key}]", e))
    return out


def _attack(kind: str, r: Any, config: Any, relation: Relation, *, trials: int | None, secret_trials: int,
            alpha: float, rng: np.random.Generator | None, group: int | str | None) -> list[AuditResult]:
    exp = expected(kind, config, relation, meta=r.meta)
    rec = float(r.sensitivity)
    records = relation.records if relation.kind in ("secret_group", "user") else 1
    if kind in ("votes", "topq", "labels_gaussian"):
        z = 1.0 / claim_of(r)
        if r.mechanism in ("federated_nn_vote_sum", "federated_topq_sum"):
            o = _opts(config, config.method)
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
    if kind == "labels_laplace":
        return [audit_laplace_label_histogram(claim_of(r), scale=noise_of(r), relation=rel_name, records=records,
                                              group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "vocabulary":
        return [audit_dp_vocabulary(claim_of(r), r=int(exp.params["r"]), scale=noise_of(r), relation=rel_name,
                                    records=records, group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "term_histogram":
        if exp.params.get("c_w", 1) != 1:
            raise ConfigError("the term-histogram attack covers weighting 'mean' (c_w = 1); the derivation check "
                              "still applies")
        return [audit_dp_term_histogram(claim_of(r), scale=noise_of(r), relation=rel_name, records=records,
                                        group=group, trials=trials, rng=rng, alpha=alpha)]
    if kind == "rff_sketch":
        if exp.params.get("noise") == "paper" or exp.params.get("c_w", 1) != 1:
            raise ConfigError("the RFF attack covers noise 'sum' with weighting 'mean'; the derivation check still "
                              "applies")
        bw = float(_opts(config, "dpkps").get("bandwidth", 0.3)) * math.sqrt(_blocks(r.key))
        return [audit_rff_sketch(claim_of(r), n_features=int(exp.params["n_features"]), scale=noise_of(r),
                                 derived=exp.sensitivity, relation=rel_name, bandwidth=bw, group=group,
                                 trials=trials, rng=rng, alpha=alpha)]
    if kind == "clustering":
        rho = _largest_single_holder_rho(r)
        sample = str(r.meta.get("sample") or "independent")
        out = [audit_secret_clustering(rho=rho, sigma=r.noise_std, sample=sample, trials=secret_trials, rng=rng,
                                       alpha=alpha)]
        if _opts(config, "secpe").get("voting", "hybrid") == "hybrid":
            out.append(audit_secpe_hybrid(rho=rho, sigma=r.noise_std, sample=sample,
                                          trials=max(secret_trials // 5, 2000), rng=rng, alpha=alpha))
        return out
    raise ConfigError(f"no attack for release kind {kind!r}")


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
