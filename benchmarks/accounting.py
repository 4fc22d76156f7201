"""ε of long Poisson-subsampled Gaussian compositions (DP-SGD): privtext before and after issue 36, against
dp_accounting's PLD and Opacus' PRV accountant, with the seconds each takes; then dpft's calibrated σ against
Opacus' ``get_noise_multiplier``.

    python benchmarks/accounting.py [--delta 1e-5] [--no-opacus] [--no-sigma] [--points issue|all]

Columns, for each (σ, q, T):

* ``before``: the rule of main before issue 36 (reproduced here with dp_accounting): one interval for the whole
  composition, max(1e-3, T·(1/σ² + 24/σ)/5e6), as if every step spanned an unsampled Gaussian's loss;
  ``from_gaussian_mechanism(σ, sampling_prob=q).self_compose(T)``;
* ``after``: :func:`privtext.privacy.accounting.epsilon_for_delta` of ``dpsgd_event(σ, q, T)`` (caches cleared),
  with the interval :func:`~privtext.privacy.accounting.pld_interval` chose;
* ``dpa 1e-4``: dp_accounting's ``from_gaussian_mechanism(..., value_discretization_interval=1e-4)``,
  self-composed (what the issue names as the reference);
* ``dpa fine``: the same at a quarter of privtext's interval (or 1e-4 if that is finer): at q = 1e-4 the 1e-4
  grid itself overstates ε by up to 80 %, so this is the reference the tests use;
* ``opacus``: Opacus' ``PRVAccountant`` with its defaults (eps_error 0.01): the upper bound it returns, and its
  point estimate (not run above ε = 200, where its domain no longer fits in memory).

Every privtext and dp_accounting figure is a pessimistic estimate (an upper bound on the true ε).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

from dp_accounting.pld import privacy_loss_distribution as pld

from privtext.privacy import accounting as acc
from privtext.privacy.events import dpsgd_event

ISSUE = [(1.0, 0.01, 5000), (0.8, 0.01, 5000), (2.0, 0.004, 10000)]
MORE = [(1.0, 0.01, 100), (0.5, 1e-4, 100000), (1.0, 1e-4, 100000), (5.0, 1e-4, 100000), (1.0, 1e-3, 100000),
        (2.0, 0.01, 100000), (5.0, 0.25, 10000), (0.5, 0.25, 100000)]


#: Opacus' PRV domain grows with ε: at σ = 0.5, q = 0.25, T = 10⁵ (ε ≈ 24 700) it asks for a 43 GiB array
OPACUS_MAX_EPSILON = 200.0


def before_epsilon(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    r = 1.0 / sigma
    h = max(1e-3, (r * r + 24.0 * r) * steps / 5e6)
    p = pld.from_gaussian_mechanism(sigma, value_discretization_interval=h, sampling_prob=q)
    return float(p.self_compose(steps).get_epsilon_for_delta(delta)), h


def dpa_epsilon(sigma: float, q: float, steps: int, delta: float, h: float) -> float:
    p = pld.from_gaussian_mechanism(sigma, value_discretization_interval=h, sampling_prob=q)
    return float(p.self_compose(steps).get_epsilon_for_delta(delta))


def clear_caches() -> None:
    acc._base_pld_cached.cache_clear()
    acc._sampled_base_cached.cache_clear()


def after_epsilon(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    clear_caches()
    ev = dpsgd_event(sigma, q, steps)
    eps = acc.epsilon_for_delta(ev, delta)
    return eps, acc.pld_interval(acc.flatten(ev))


def opacus_epsilon(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    from opacus.accountants import PRVAccountant

    a = PRVAccountant()
    a.history = [(sigma, q, steps)]
    eps_error, delta_error = 0.01, delta / 1000
    dprv = a._get_dprv(eps_error=eps_error, delta_error=delta_error)
    _, est, upper = dprv.compute_epsilon(delta, delta_error, eps_error)
    return float(upper), float(est)


def timed(f, *a, **k):
    t = time.perf_counter()
    out = f(*a, **k)
    return out, time.perf_counter() - t


def before_sigma(eps: float, delta: float, q: float, steps: int) -> float:
    """The smallest σ (bisection to 1e-6) whose ε under the rule before issue 36 is at most ``eps``."""
    lo, hi = 0.05, 50.0
    while hi / lo > 1 + 1e-6:
        mid = math.sqrt(lo * hi)
        if before_epsilon(mid, q, steps, delta)[0] <= eps:
            hi = mid
        else:
            lo = mid
    return hi


def sigma_table(delta: float, opacus: bool) -> None:
    from privtext.config import config_from_dict
    from privtext.methods.dpft import DPFTOptions, dpft_plan

    cfg = config_from_dict({"method": "dpft", "data": {"private": "private.csv"},
                            "privacy": {"epsilon": 4.0, "delta": delta}, "output": "out"})
    print(f"\ndpft's σ for (ε = 4, δ = {delta:g}), no DP label histogram: privtext (dpft_plan) before/after vs Opacus "
          "get_noise_multiplier(accountant='prv', defaults)")
    print(f"{'q':>9} {'T':>6} | {'before':>9} {'after':>9} {'s':>6} | {'opacus':>9} {'s':>6} | after/opacus − 1")
    for label, opts in [("N = 100k, B = 64", DPFTOptions(sampling_rate=64 / 100_000, batch_size=64)),
                        ("dpft default", DPFTOptions())]:
        clear_caches()
        plan, t_after = timed(dpft_plan, cfg, opts)
        q, steps = plan.sampling_rate, plan.steps
        s_before = before_sigma(4.0, delta, q, steps)
        row = f"{q:9.4g} {steps:6d} | {s_before:9.5f} {plan.noise_multiplier:9.5f} {t_after:6.2f} |"
        if opacus:
            from opacus.accountants.utils import get_noise_multiplier

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s_op, t_op = timed(get_noise_multiplier, target_epsilon=4.0, target_delta=delta, sample_rate=q,
                                   steps=steps, accountant="prv")
            row += f" {s_op:9.5f} {t_op:6.2f} | {100 * (plan.noise_multiplier / s_op - 1):+.3f} %"
        print(row + f"   ({label}; before/opacus − 1 = "
              + (f"{100 * (s_before / s_op - 1):+.2f} %)" if opacus else "n/a)"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--no-opacus", action="store_true")
    ap.add_argument("--no-sigma", action="store_true")
    ap.add_argument("--points", choices=["issue", "all"], default="all")
    a = ap.parse_args()
    points = ISSUE + (MORE if a.points == "all" else [])
    print(f"ε at δ = {a.delta:g}; seconds in brackets")
    print(f"{'σ':>4} {'q':>7} {'T':>6} | {'before':>16} | {'after':>16} {'interval':>8} | {'dpa 1e-4':>16} | "
          f"{'dpa fine':>16} | {'opacus up/est':>24} | after/fine − 1")
    for s, q, t in points:
        (b, _), tb = timed(before_epsilon, s, q, t, a.delta)
        (e, h), te = timed(after_epsilon, s, q, t, a.delta)
        r4, t4 = timed(dpa_epsilon, s, q, t, a.delta, 1e-4)
        hf = min(1e-4, h / 4)
        rf, tf = (r4, t4) if hf == 1e-4 else timed(dpa_epsilon, s, q, t, a.delta, hf)
        row = (f"{s:4g} {q:7g} {t:6d} | {b:9.5g} ({tb:4.2f}) | {e:9.5g} ({te:4.2f}) {h:8.2g} | {r4:9.5g} ({t4:4.2f}) | "
               f"{rf:9.5g} ({tf:4.2f}) |")
        if a.no_opacus:
            row += f" {'-':>24} |"
        elif e > OPACUS_MAX_EPSILON:
            row += f" {'(domain too large)':>24} |"
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (ou, oe), to = timed(opacus_epsilon, s, q, t, a.delta)
            row += f" {ou:8.5g}/{oe:<8.5g} ({to:4.1f}) |"
        print(row + f" {100 * (e / rf - 1):+.3f} %", flush=True)
    if not a.no_sigma:
        sigma_table(a.delta, not a.no_opacus)


if __name__ == "__main__":
    main()
