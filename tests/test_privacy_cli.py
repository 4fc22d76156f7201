"""``privtext budget ... --json`` outputs parse and match the library values."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import privtext.cli as cli
from privtext.methods.wasp import wasp_noise_multiplier
from privtext.privacy import (
    Budget,
    gaussian_noise_multiplier,
    gdp_delta,
    gdp_epsilon,
    mu_from_pr,
)

_MOUNTED = False


def run(*args: str) -> dict:
    global _MOUNTED
    if not _MOUNTED:
        cli._mount()
        _MOUNTED = True
    res = CliRunner().invoke(cli.app, ["budget", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_budget_gdp() -> None:
    d = run("gdp", "--mu", "1", "--delta", "1e-5")
    assert d["epsilon"] == pytest.approx(gdp_epsilon(1e-5, 1.0), rel=1e-12)
    row = next(r for r in d["delta_of_epsilon"] if r["epsilon"] == 1.0)
    assert row["delta"] == pytest.approx(0.126937, abs=5e-7) == gdp_delta(1.0, 1.0)


def test_budget_secret() -> None:
    d = run("secret", "--p", "1e-4", "--r", "2e-4", "--iterations", "10")
    assert d["mu"] == pytest.approx(0.17893, abs=5e-6)
    assert d["sigma"] == pytest.approx(math.sqrt(10) / mu_from_pr(1e-4, 2e-4), rel=1e-12)
    assert d["check_r"] == pytest.approx(2e-4, rel=1e-9)


@pytest.mark.parametrize("method", ["pld", "paper", "wasp"])
def test_budget_gaussian(method: str) -> None:
    d = run("gaussian", "--epsilon", "4", "--delta", "1e-5", "--iterations", "5", "--sensitivity", "2",
            "--method", method)
    if method == "wasp":  # WASP's formula with T − 1 = 5 private rounds (it lives in privtext.methods.wasp)
        z = wasp_noise_multiplier(4.0, 1e-5, iterations=6)
    else:
        z = gaussian_noise_multiplier(Budget.dp(4, 1e-5), compositions=5, method=method)  # type: ignore[arg-type]
    assert d["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    assert d["noise_std"] == pytest.approx(2 * z, rel=1e-12)
    assert d["achieved_epsilon"] <= 4.0


def test_budget_noise_ratio_small() -> None:
    d = run("noise-ratio", "--records", "600", "--secrets", "30", "--rate", "0.02", "--r-over-p", "10",
            "--seed", "1")
    assert d["sigma_gdp_record"] == pytest.approx(1 / mu_from_pr(1e-4, 1e-3), rel=1e-12)
    assert d["sigma_gdp_group"] == pytest.approx(d["holders_max"] * d["sigma_gdp_record"], rel=1e-12)
    assert d["ratio_record_exact"] == pytest.approx(d["sigma_gdp_record"] / d["sigma_secret_exact"], rel=1e-12)
    # the paper's single-Gaussian approximation asks for less noise than the exact mixture
    assert d["sigma_secret_paper"] < d["sigma_secret_exact"]


def test_budget_errors_are_one_line_exit_2() -> None:
    cli._mount() if not _MOUNTED else None
    res = CliRunner().invoke(cli.app, ["budget", "secret", "--p", "1e-4", "--r", "1e-5"])
    assert res.exit_code == 2
    assert "must exceed p=0.0001" in res.output
