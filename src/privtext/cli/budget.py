"""``privtext budget``: privacy calculators (every command takes ``--json``).

* ``budget gdp --mu 1 [--delta 1e-5]`` — ε at δ, and a δ(ε) table (Remark C.1);
* ``budget secret --p 1e-4 --r 2e-4 [--iterations T]`` — μ (Eq 4) and σ for T Gaussian releases (Δ = 1);
* ``budget gaussian --epsilon 4 --delta 1e-5 --iterations 5 --sensitivity 1 [--method pld|paper|wasp]`` — σ;
* ``budget noise-ratio --records 8000 --secrets 400 --rate 0.01 --r-over-p 10`` — SecPE Fig 3's σ_GDP/σ_secret.
"""

from __future__ import annotations

import functools
import math
from typing import Annotated, Any

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, suggest_commands=False,
                  help="Privacy calculators: noise, ε, μ, (p, r).")

JsonOpt = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]
#: T, the number of Gaussian releases composed (``budget secret`` and ``budget gaussian``)
ReleasesOpt = Annotated[int, typer.Option("--iterations", "-T", min=1, help="number T of Gaussian releases")]


def _emit(data: dict[str, Any], as_json: bool, rows: list[tuple[str, Any]], title: str) -> None:
    from .app import out, print_json

    if as_json:
        print_json(data)
        return
    from rich.table import Table

    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column("quantity", style="bold")
    t.add_column("value")
    for k, v in rows:
        t.add_row(k, _fmt(v))
    out.print(t)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isinf(v):
            return "∞"
        return f"{v:.6g}"
    return str(v)


def _handled(fn: Any) -> Any:
    """:func:`privtext.cli.app.handle_errors` around a command, imported when the command runs (the calculators'
    module stays light to import)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .app import handle_errors

        return handle_errors(fn)(*args, **kwargs)

    return wrapper


def command(name: str) -> Any:
    """Register a calculator as ``privtext budget NAME``, its errors handled as every privtext command's."""

    def register(fn: Any) -> Any:
        return app.command(name)(_handled(fn))

    return register


@command("gdp")
def gdp_cmd(
    mu: Annotated[float, typer.Option("--mu", help="μ of μ-GDP")],
    delta: Annotated[float, typer.Option("--delta", help="δ for the ε(δ) conversion")] = 1e-5,
    as_json: JsonOpt = False,
) -> None:
    """ε for a given δ under μ-GDP, and the δ(ε) curve (SecPE Remark C.1)."""

    from ..privacy.conversions import gdp_delta, gdp_epsilon

    eps = float(gdp_epsilon(delta, mu))
    table = [{"epsilon": e, "delta": float(gdp_delta(e, mu))} for e in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)]
    data = {"mu": mu, "delta": delta, "epsilon": eps, "delta_of_epsilon": table}
    rows = [("μ", mu), (f"ε at δ={delta:g}", eps)] + [(f"δ(ε={r['epsilon']:g})", r["delta"]) for r in table]
    _emit(data, as_json, rows, f"{mu:g}-GDP")


@command("secret")
def secret_cmd(
    p: Annotated[float, typer.Option("--p", help="prior p (adversary's chance before seeing the output)")],
    r: Annotated[float, typer.Option("--r", help="posterior bound r > p")],
    iterations: ReleasesOpt = 1,
    delta: Annotated[float, typer.Option("--delta", help="δ for the record-level ε")] = 1e-5,
    as_json: JsonOpt = False,
) -> None:
    """μ of a (p, r) budget (Eq 4) and the Gaussian noise multiplier for T releases at sensitivity 1."""
    from ..privacy.calibration import augpe_noise_multiplier
    from ..privacy.conversions import gdp_epsilon, mu_from_pr, r_from_mu_p

    mu = float(mu_from_pr(p, r))
    sigma = augpe_noise_multiplier(mu, compositions=iterations) if math.isfinite(mu) else 0.0
    data = {"p": p, "r": r, "r_over_p": r / p, "mu": mu, "iterations": iterations, "sigma": sigma,
            "check_r": float(r_from_mu_p(p, mu)) if math.isfinite(mu) else 1.0,
            "epsilon_at_delta": float(gdp_epsilon(delta, mu)) if math.isfinite(mu) else math.inf,
            "delta": delta,
            "note": "σ = √T/μ for a single record's secret (Lemma 3.2); SecretNoise lowers it for sampled records"}
    rows = [("p", p), ("r", r), ("r/p", r / p), ("μ = Φ⁻¹(1−p) − Φ⁻¹(1−r)", mu),
            (f"σ for T={iterations} (Δ=1)", sigma), (f"record-level ε at δ={delta:g}", data["epsilon_at_delta"])]
    _emit(data, as_json, rows, "(p, r)-secret protection")


@command("gaussian")
def gaussian_cmd(
    epsilon: Annotated[float, typer.Option("--epsilon", help="target ε")],
    delta: Annotated[float, typer.Option("--delta", help="target δ")],
    iterations: ReleasesOpt = 1,
    sensitivity: Annotated[float, typer.Option("--sensitivity", help="L2 sensitivity Δ of each release")] = 1.0,
    method: Annotated[str, typer.Option("--method", help="pld | paper | wasp")] = "pld",
    as_json: JsonOpt = False,
) -> None:
    """Noise multiplier σ/Δ and noise std σ for T Gaussian releases meeting (ε, δ)."""

    from ..errors import InvalidPrivacyParameter
    from ..privacy.accounting import epsilon_for_delta
    from ..privacy.budget import Budget
    from ..privacy.calibration import gaussian_noise_multiplier
    from ..privacy.events import gaussian_event, self_composed

    budget = Budget.dp(epsilon, delta)
    if method in ("pld", "paper"):
        z = gaussian_noise_multiplier(budget, compositions=iterations, method=method)  # type: ignore[arg-type]
    else:  # a method's own closed form (WASP's, privtext.methods.wasp.calibration), found by its registered name
        from ..methods import METHODS

        formula = getattr(METHODS.get(method), "paper_formula", None) if method in METHODS else None
        if formula is None:
            raise InvalidPrivacyParameter(f"--method must be one of pld, paper, wasp; got {method!r}")
        z = formula(releases=iterations)(budget)  # T − 1 = iterations private rounds
    achieved = epsilon_for_delta(self_composed(gaussian_event(z), iterations), delta) if z > 0 else math.inf
    data = {"epsilon": epsilon, "delta": delta, "iterations": iterations, "sensitivity": sensitivity,
            "method": method, "noise_multiplier": z, "noise_std": z * sensitivity, "achieved_epsilon": achieved}
    rows = [("target", f"(ε={epsilon:g}, δ={delta:g}) over T={iterations}"), ("method", method),
            ("noise multiplier σ/Δ", z), (f"noise std (Δ={sensitivity:g})", z * sensitivity),
            ("ε achieved (PLD)", achieved)]
    _emit(data, as_json, rows, "Gaussian mechanism")


@command("noise-ratio")
def noise_ratio_cmd(
    records: Annotated[int, typer.Option("--records", min=1, help="N private records")] = 8000,
    secrets: Annotated[int, typer.Option("--secrets", min=1, help="m secrets")] = 400,
    rate: Annotated[float, typer.Option("--rate", help="each record holds each secret w.p. rate")] = 0.01,
    r_over_p: Annotated[float, typer.Option("--r-over-p", help="budget ratio r/p")] = 10.0,
    p: Annotated[float, typer.Option("--p", help="prior p")] = 1e-4,
    iterations: Annotated[int, typer.Option("--iterations", "-T", min=1, help="clusterings / GDP iterations")] = 1,
    sample: Annotated[str, typer.Option("--sample", help="independent | shared (SecPE's Bernoulli sample)")] = "independent",
    sampling: Annotated[str, typer.Option("--sampling", help="sampling rules, comma-separated")] = "paper,auto,all",
    seed: Annotated[int, typer.Option("--seed", min=0, help="seed of the random membership")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """σ_GDP/σ_secret in SecPE's Fig 3 set-up, per sampling rule, with both GDP baselines (record and
    secret-group sensitivity) and the comparison at equal utility (the relative error of the released count)."""
    from ..privacy.noise_ratio import noise_ratio
    from ..rng import make_rng
    from .app import out, print_json

    rules = tuple(x.strip() for x in sampling.split(",") if x.strip())
    d = noise_ratio(records=records, secrets=secrets, rate=rate, r_over_p=r_over_p, p=p, clusterings=iterations,
                    sample=sample, samplings=rules, blowups=("exact", "paper"), rng=make_rng(seed))
    d["seed"] = seed
    if as_json:
        print_json(d)
        return
    from rich.table import Table

    out.print(f"N={records}, m={secrets}, rate={rate:g}, p={p:g}, r={d['r']:g}, μ={d['mu']:.4g}; {iterations} "
              f"clustering(s) = {d['compositions']} releases per secret ({sample} sample, Δ="
              f"{d['release_sensitivity']:.3g}) vs {iterations} GDP histogram(s); at most {d['holders_max']} "
              f"holders per secret; σ_GDP record {d['sigma_gdp_record']:.4g}, group {d['sigma_gdp_group']:.4g} "
              f"(relative error of its count {d['count_error_gdp_group']:.3g})", highlight=False)
    t = Table(title="σ_secret per sampling rule (exact blow-up)", title_justify="left")
    for c in ("rule", "σ_secret", "E\\[sampled]", "σ_GDP/σ record", "σ_GDP/σ group", "count error",
              "error vs GDP group"):
        t.add_column(c, justify="right")
    for rule, per in d["rules"].items():
        r = per["exact"]
        t.add_row(f"{rule} ({r['mode']})", _fmt(r["sigma"]), _fmt(r["expected_sampled"]),
                  _fmt(r["ratio_record"]) if r["sigma"] > 0 else "no noise", _fmt(r["ratio_group"])
                  if r["sigma"] > 0 else "no noise", _fmt(r["count_error"]), _fmt(r["error_ratio"]))
    out.print(t)
    for rule, per in d["rules"].items():
        if per["exact"].get("no_noise"):
            out.print(f"{rule}: {per['exact']['no_noise']}", highlight=False)
