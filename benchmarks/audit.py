"""Mechanism audits at the noise levels runs use: each mechanism as built, and broken variants the audit must
catch — halved noise, a sensitivity recorded below the derived one (issue 21's two configurations), the public
WASP code's XOR sensitivity, SecPE's shared sample accounted as independent, secret holders voting exactly.
Canaries of g neighbours and trial counts are planned from each claim (docs/audit.md); every row is one audit.
DP-SGD (dpft) gets the one-run canary audit (privtext.audit.dpsgd) at dpft's default settings (q = 1/16, 3
epochs, C = 1; σ calibrated for ε = 1, 4, 8 at δ = 1e-5 by privtext.audit.calibrate): as built, with the noise
removed, the clipping removed and the noise halved.

    python benchmarks/audit.py [--alpha 1e-3] [--secret-trials 20000] [--seed S] [--no-dpsgd | --dpsgd-only]

``--seed`` seeds the audits' draws from privtext's noise source (reproducible figures); without it they come
from OS entropy, as ``privtext audit`` draws them.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--secret-trials", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--no-dpsgd", action="store_true", help="skip the DP-SGD one-run audits (minutes)")
    ap.add_argument("--dpsgd-only", action="store_true", help="only the DP-SGD one-run audits")
    args = ap.parse_args()
    from privtext.audit import (
        _public_code_topq_sensitivity,
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
        group_size,
        trials_for_halved_gaussian_noise,
    )
    from privtext.audit.derive import topq_record_sensitivity
    from privtext.methods.secpe import ClusterScorer
    from privtext.privacy import secret_noise

    a = args.alpha
    rng = np.random.default_rng(args.seed) if args.seed is not None else None

    class HoldersVoteToo(ClusterScorer):  # issue 21's mutant: secret holders also vote exactly
        def __init__(self, **kw: Any):
            kw["direct_emb"] = np.concatenate([kw["direct_emb"], kw["private_emb"]])
            kw["direct_groups"] = np.concatenate([kw["direct_groups"], kw["private_groups"]])
            super().__init__(**kw)

    def sigma(rho: float) -> float:
        m = sp.csr_matrix(np.ones((1, 1)))
        return secret_noise(m, p=1e-4, r=1e-3, compositions=2, sampling=f"scaled:{rho}").sigma

    auto: dict[str, Any] = {"group": "auto", "trials": None, "alpha": a, "rng": rng}
    cases: list[tuple[str, bool | None, Callable[[], Any]]] = []  # (case, fault? (None: not planned for), audit)
    for z in (2.162, 10.0):
        cases.append((f"votes z={z:g} as built", False, lambda z=z: audit_vote_histogram(z, **auto)))
        cases.append((f"votes z={z:g} noise ×½", True, lambda z=z: _halved(lambda: audit_vote_histogram(z, **auto))))
    cases.append(("votes secret group k=5, Δ recorded 1", True,
                  lambda: audit_vote_histogram(3.0, sensitivity=1.0, derived=5, **auto)))
    cases.append(("votes secret group k=5 as built", False,
                  lambda: audit_vote_histogram(3.0, sensitivity=5.0, derived=5, **auto)))
    cases.append(("labels z=3.4 as built", False, lambda: audit_label_histogram(3.4, **auto)))
    cases.append(("labels z=3.4 noise ×½", True, lambda: _halved(lambda: audit_label_histogram(3.4, **auto))))
    for q in (1, 4):
        cases.append((f"Top-{q} z=1.53 as built", False, lambda q=q: audit_topq_histograms(1.53, q=q, **auto)))
    # the XOR sensitivity noises at 1/Δ_4 ≈ 0.61 of the claim's noise, a smaller fault than halving: its trials
    # are planned for that scale
    xor = _public_code_topq_sensitivity(4) / topq_record_sensitivity(4)
    xor_trials = trials_for_halved_gaussian_noise(group_size(1 / 1.53) / 1.53, alpha=a, noise_scale=xor)
    cases.append(("Top-4 z=1.53, public code's XOR Δ", True, lambda: audit_topq_histograms(
        1.53, q=4, actual_noise_scale=xor, **{**auto, "trials": xor_trials})))
    cases.append(("parties record z=1.53, t=3 as built", False,
                  lambda: audit_federated_sum(1.53, sensitivity=1.0, min_survivors=3, **auto)))
    cases.append(("parties user m=4 z=1.53, t=3 as built", False,
                  lambda: audit_federated_sum(1.53, sensitivity=4.0, level="user", cap=4, min_survivors=3, **auto)))
    cases.append(("parties user m=4 z=1.53 noise ×½", True, lambda: _halved(
        lambda: audit_federated_sum(1.53, sensitivity=4.0, level="user", cap=4, min_survivors=3, **auto))))
    cases.append(("WASP parties normalised Q=2 as built", False, lambda: audit_federated_sum(
        1.53, sensitivity=1.0, level="user", normalise=True, min_survivors=3, q=2, **auto)))
    cases.append(("label shares ε=0.6 replace-one as built", False,
                  lambda: audit_laplace_label_histogram(0.6, relation="replace_one", **auto)))
    cases.append(("label shares ε=0.6 replace-one at Δ₁=1 (issue 21)", True,
                  lambda: audit_laplace_label_histogram(0.6, relation="replace_one", scale=1 / 0.6, **auto)))
    cases.append(("vocabulary ε=1 r=10 as built", False, lambda: audit_dp_vocabulary(1.0, r=10, **auto)))
    cases.append(("vocabulary ε=1 r=10 noise ×½", True,
                  lambda: _halved(lambda: audit_dp_vocabulary(1.0, r=10, **auto))))
    cases.append(("vocabulary ε=1 r=10 replace-one as built", False,
                  lambda: audit_dp_vocabulary(1.0, r=10, relation="replace_one", **auto)))
    cases.append(("vocabulary k=5 r=5 ε=0.667 as built", False,
                  lambda: audit_dp_vocabulary(0.667, r=5, records=5, **auto)))
    cases.append(("vocabulary k=5 r=5 ε=0.667 at Δ₁=r (issue 21)", True,
                  lambda: audit_dp_vocabulary(0.667, r=5, records=5, scale=5 / 0.667, **auto)))
    cases.append(("term histogram ε=4.2 as built", False, lambda: audit_dp_term_histogram(4.2, **auto)))
    cases.append(("term histogram ε=4.2 noise ×½", True,
                  lambda: _halved(lambda: audit_dp_term_histogram(4.2, **auto))))
    cases.append(("RFF sketch ε=2.5 I=256 as built", False,
                  lambda: audit_rff_sketch(2.5, n_features=256, alpha=a, rng=rng)))
    cases.append(("RFF sketch ε=2.5 I=256 noise ×½", True,
                  lambda: _halved(lambda: audit_rff_sketch(2.5, n_features=256, alpha=a, rng=rng))))
    s01 = sigma(0.1)
    cases.append(("SecPE clustering ρ=0.1 as built", False, lambda: audit_secret_clustering(
        rho=0.1, sigma=s01, trials=args.secret_trials, rng=rng, alpha=a)))
    cases.append(("SecPE shared sample accounted independent", True, lambda: audit_secret_clustering(
        rho=0.1, sigma=s01, sample="shared", claim_sample="independent", trials=args.secret_trials, rng=rng,
        alpha=a)))
    cases.append(("SecPE hybrid votes ρ=1 σ=2 as built", False,
                  lambda: audit_secpe_hybrid(rho=1.0, sigma=2.0, trials=2000, rng=rng, alpha=a)))
    cases.append(("SecPE hybrid, holders vote exactly", True, lambda: audit_secpe_hybrid(
        rho=1.0, sigma=2.0, trials=2000, rng=rng, alpha=a, scorer_factory=HoldersVoteToo)))

    if args.dpsgd_only:
        cases = []
    if not args.no_dpsgd:
        cases.extend(_dpsgd_cases(a, rng))

    print(f"{'case':48} {'mechanism':52} {'claim':>16} {'attack (CI)':>24} {'trials':>7} {'s':>5}  verdict")
    ok = True
    t_all = time.perf_counter()
    for case, fault, run in cases:
        t0 = time.perf_counter()
        r = run()
        sec = time.perf_counter() - t0
        lo, hi = r.interval
        if fault is None:  # a fault shown, beyond what the audit is planned to catch
            verdict = "caught" if not r.passed else "not caught (not planned for)"
        else:
            verdict = ("caught" if not r.passed else "MISSED") if fault else ("pass" if r.passed else "FAIL")
            ok &= r.passed != fault
        hi_s = f"{hi:.3g}" if math.isfinite(hi) else "inf"
        print(f"{case:48} {r.mechanism[:52]:52} {r.quantity[:13]:>13}≤{r.claim:<6.3g} {r.estimate:8.3g} "
              f"({lo:.3g}–{hi_s}) {r.trials:>7} {sec:5.1f}  {verdict}", flush=True)
    print(f"\n{len(cases)} audits in {time.perf_counter() - t_all:.0f} s at confidence {1 - a:g}; every mechanism as "
          f"built passed and every fault was caught: {ok}")


def _dpsgd_cases(alpha: float, rng: Any) -> list[tuple[str, bool | None, Callable[[], Any]]]:
    """dpft's DP-SGD at its defaults (q = 1/16, 16 steps an epoch, 3 epochs, C = 1), σ from the audit's own
    calibration for (ε, 1e-5); the one-run audit plans its canaries from the claim."""
    import contextlib

    import dp_accounting

    from privtext.audit.calibrate import pld_epsilon, smallest
    from privtext.audit.dpsgd import audit_dpsgd_run
    from privtext.testing.audit_faults import dpsgd_clipping_removed, dpsgd_noise_removed, scaled_noise

    q, per_epoch, epochs = 1 / 16, 16, 3

    def sigma_for(eps: float) -> float:
        def meets(s: float) -> bool:
            return pld_epsilon([dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
                q, dp_accounting.GaussianDpEvent(s)), per_epoch * epochs)], 1e-5) <= eps
        return smallest(meets, 1.0, rtol=1e-4)

    def audit(sigma: float, fault: Any) -> Any:
        with fault():
            return audit_dpsgd_run(sigma=sigma, sampling_rate=q, steps_per_epoch=per_epoch, epochs=epochs,
                                   max_grad_norm=1.0, delta=1e-5, alpha=alpha, rng=rng)

    out: list[tuple[str, bool | None, Callable[[], Any]]] = []
    # halved noise: shown, but one run's canaries are planned for removed noise or clipping, not for it
    faults: list[tuple[str, bool | None, Any]] = [
        ("as built", False, contextlib.nullcontext), ("noise removed", True, dpsgd_noise_removed),
        ("clipping removed", True, dpsgd_clipping_removed), ("noise ×½", None, lambda: scaled_noise(0.5))]
    for eps in (1.0, 4.0):
        s = sigma_for(eps)
        for name, is_fault, fault in faults if eps == 4.0 else faults[:2]:
            out.append((f"DP-SGD ε={eps:g} (σ={s:.3g}) {name}", is_fault,
                        lambda s=s, fault=fault: audit(s, fault)))
    # where one run cannot refute the claim: the plan's best possible bound with the most canaries
    from privtext.audit.dpsgd import MAX_CANARIES, _best_bound, dpsgd_curve, guesses, plan_canaries

    s8 = sigma_for(8.0)
    m, d, claim = plan_canaries(dpsgd_curve(s8, q, per_epoch * epochs), 1e-5, 1 - alpha, q * per_epoch * epochs)
    print(f"DP-SGD ε=8 (σ={s8:.3g}): claim ε({d:.0e}) = {claim:.3g}; the best bound {MAX_CANARIES} canaries can "
          f"give is {_best_bound(m, guesses(m, 3.0), d, 1 - alpha):.3g}: one run cannot refute it (not run)")
    return out


def _halved(run: Callable[[], Any]) -> Any:
    from privtext.testing.audit_faults import scaled_noise

    with scaled_noise(0.5):
        return run()


if __name__ == "__main__":
    main()
