"""SecPE Fig 3 (App B.1): the noise ratio σ_GDP/σ_secret, exact and with the paper's approximation.

    python benchmarks/secret_noise_ratio.py [--out artifacts/fig3] [--seed 0] [--compositions 1]
                                            [--sampling paper] [--quick] [--no-timing] [--no-accuracy]

Set-up (secpe.txt App B.1): N records, m secrets, each record holds each secret independently with probability
0.01; p = 1e-4, μ coupled to (p, r) by Eq 4. Two curves:

* left: N = 8000, m = 400, r/p ∈ [2, 400];
* right: N = 8000, r/p = 10, m ∈ [100, 1000].

σ_secret comes from SecretNoise (Alg 1) with the chosen sampling rule (default ``paper``: Alg 1 line 4 as
written), once with the **exact** blow-up of the Bernoulli-mixture Gaussian (dp_accounting PLD, an upper bound)
and once with the paper's **single-Gaussian approximation** N(E[S]·Δ, σ²) (not a bound). σ_GDP is printed for
both baselines (see docs/privacy.md): **record** sensitivity Δ = 1 (σ = √T/μ; protects one record, not a secret
repeated in k records) and **group** sensitivity Δ = k_max, the most records holding one secret (the record-level
GDP noise that really gives (p, r) for every secret).

Writes ``fig3.csv`` and ``fig3.png`` (two panels, log scale) into ``--out`` and prints the table, then times the
calibration of σ for one secret held by 100 records, and checks the blow-up discretisation (5e-3 against 1e-3).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from privtext.privacy.noise_ratio import noise_ratio  # noqa: E402
from privtext.rng import derive  # noqa: E402

RATIOS = (2, 5, 10, 20, 50, 100, 200, 400)
SECRETS = (100, 200, 400, 600, 800, 1000)
COLUMNS = ("curve", "records", "secrets", "r_over_p", "mu", "holders_max", "sigma_gdp_record", "sigma_gdp_group",
           "sigma_secret_exact", "sigma_secret_paper", "ratio_record_exact", "ratio_record_paper",
           "ratio_group_exact", "ratio_group_paper", "expected_sampled_exact", "groups_exact", "seconds_exact")


def run_curves(args: argparse.Namespace) -> list[dict[str, Any]]:
    ratios = (*RATIOS[::2], RATIOS[-1]) if args.quick else RATIOS
    secrets = SECRETS[::2] if args.quick else SECRETS
    rows = []
    for rp in ratios:
        d = noise_ratio(records=8000, secrets=400, rate=0.01, r_over_p=float(rp), p=1e-4,
                        compositions=args.compositions, sampling=args.sampling,
                        rng=derive(args.seed, "fig3", 8000, 400))
        d["curve"] = "r_over_p"
        rows.append(d)
        _print_row(d)
    for m in secrets:
        d = noise_ratio(records=8000, secrets=m, rate=0.01, r_over_p=10.0, p=1e-4,
                        compositions=args.compositions, sampling=args.sampling,
                        rng=derive(args.seed, "fig3", 8000, m))
        d["curve"] = "secrets"
        rows.append(d)
        _print_row(d)
    return rows


def _g(v: float, spec: str = ".3g") -> str:
    return "∞" if not math.isfinite(v) else format(v, spec)


def _print_row(d: dict[str, Any]) -> None:
    print(f"{d['curve']:9s} m={d['secrets']:5d} r/p={d['r_over_p']:6g} μ={d['mu']:.4f} "
          f"k_max={d['holders_max']:4d} | σ_GDP rec={d['sigma_gdp_record']:.4g} grp={d['sigma_gdp_group']:.4g} | "
          f"σ_sec exact={d['sigma_secret_exact']:.4g} paper={d['sigma_secret_paper']:.4g} "
          f"[{d['mode_exact']}, E[sampled]={d['expected_sampled_exact']:.3g}] | "
          f"ratio rec: exact={_g(d['ratio_record_exact'])} paper={_g(d['ratio_record_paper'])}  "
          f"grp: exact={_g(d['ratio_group_exact'])} paper={_g(d['ratio_group_paper'])}  "
          f"[{d['seconds_exact']:.2f} s, {d['groups_exact']} groups]", flush=True)


def write_outputs(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "fig3.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, curve, xkey, xlabel in ((axes[0], "r_over_p", "r_over_p", "r / p  (N=8000, m=400)"),
                                    (axes[1], "secrets", "secrets", "number of secrets m  (N=8000, r/p=10)")):
        sel = [r for r in rows if r["curve"] == curve]
        x = [r[xkey] for r in sel]
        for key, style, label in (("ratio_record_exact", "o-", "record Δ=1, exact mixture"),
                                  ("ratio_record_paper", "o--", "record Δ=1, paper approx."),
                                  ("ratio_group_exact", "s-", "group Δ=k_max, exact mixture"),
                                  ("ratio_group_paper", "s--", "group Δ=k_max, paper approx.")):
            xs = [xi for xi, r in zip(x, sel, strict=True) if math.isfinite(r[key])]
            ys = [r[key] for r in sel if math.isfinite(r[key])]
            (line,) = ax.plot(xs, ys, style, label=label, ms=4)
            inf_x = [xi for xi, r in zip(x, sel, strict=True) if not math.isfinite(r[key])]
            if inf_x:  # σ_secret = 0: sampling alone gives (p, r) — drawn as arrows at the top
                top = max([v for r in rows for k2 in ("ratio_group_exact", "ratio_group_paper")
                           for v in [r[k2]] if math.isfinite(v)] or [10.0]) * 3
                ax.plot(inf_x, [top * (1.0 if 'record' in key else 2.5)] * len(inf_x), "^", color=line.get_color(),
                        ms=7)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("σ_GDP / σ_secret")
        ax.set_yscale("log")
        if curve == "r_over_p":
            ax.set_xscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle("SecPE Fig 3 set-up: noise ratio (larger = secret protection needs less noise; ▲ = no noise needed)")
    fig.tight_layout()
    fig.savefig(out / "fig3.png", dpi=130)
    plt.close(fig)


def time_calibration() -> None:
    from privtext.privacy.secretnoise import _group_sigma

    print("\ncalibration of σ for one secret held by 100 records (exact mixture blow-up, p=1e-4, r=1e-3):")
    for rho in (0.05, 0.3, 0.9):
        for T in (2, 10, 40):
            _group_sigma.cache_clear()
            t0 = time.perf_counter()
            s = _group_sigma(tuple([rho] * 100), 1e-4, 1e-3, T, "exact")
            dt = time.perf_counter() - t0
            approx = _group_sigma(tuple([rho] * 100), 1e-4, 1e-3, T, "paper")
            print(f"  ρ={rho:<4} T={T:<3} σ_exact={s:9.4f}  σ_paper={approx:9.4f}  "
                  f"(exact/paper = {s / approx:.4f})  {dt:5.2f} s")


def check_accuracy() -> None:
    import dp_accounting

    from privtext.privacy import blowup_of, mixture_event, r_from_mu_p

    print("\nblow-up discretisation: 5e-3 (default for mixtures) against 1e-3, and ρ=1 against the closed form:")
    cases = [((0.05,) * 100, 3.0, 10), ((0.3,) * 100, 30.0, 10), ((0.5, 0.5), 1.0, 4), ((0.9,) * 20, 8.0, 20)]
    for rho, sigma, T in cases:
        ev = dp_accounting.SelfComposedDpEvent(mixture_event(rho, sigma), T)
        fine = blowup_of(ev, 1e-4, value_discretization_interval=1e-3)
        coarse = blowup_of(ev, 1e-4)
        print(f"  holders={len(rho):3d} ρ={rho[0]:<4} σ={sigma:<5} T={T:<3} B(1e-3)={fine:.6g} B(5e-3)={coarse:.6g} "
              f"rel.diff={coarse / fine - 1:+.2e}")
    from privtext.privacy import mixture_pld
    from privtext.privacy.accounting import blowup_from_pld

    for sigma, T in ((2.0, 10), (5.0, 20)):
        pld = mixture_pld(sigma, [1.0], [1.0], both_directions=False, value_discretization_interval=5e-3)
        got = blowup_from_pld(pld.self_compose(T), 1e-4)
        exact = r_from_mu_p(1e-4, T**0.5 / sigma)
        print(f"  ρ=1 σ={sigma} T={T}: PLD(5e-3)={got:.6g} closed form={exact:.6g} rel.diff={got / exact - 1:+.2e}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "fig3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compositions", type=int, default=1, help="releases sharing σ (T); the ratio depends on it")
    ap.add_argument("--sampling", default="paper", help="paper | max | auto | scaled:c")
    ap.add_argument("--quick", action="store_true", help="every other point")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--no-accuracy", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run_curves(args)
    write_outputs(rows, args.out)
    print(f"\nwrote {args.out / 'fig3.csv'} and {args.out / 'fig3.png'} ({time.perf_counter() - t0:.1f} s)")
    if not args.no_timing:
        time_calibration()
    if not args.no_accuracy:
        check_accuracy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
