"""The audit's own calibration (privtext.audit.calibrate): the noise every release must carry, derived from the
configuration and the budget, never from the ledger. Its primitives against known values and the library's
accountant; every method's correct runs agree with it; a run whose ledger claims twice (or half) the noise the
code drew fails ``privtext audit`` (issue 36: "recorded noise gives mu 0.5, claim 0.5: pass")."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import brentq
from typer.testing import CliRunner

from privtext import cli
from privtext.audit import audit_run
from privtext.audit.calibrate import gaussian_delta, mu_for_dp, mu_for_secret, pld_epsilon, smallest
from privtext.cli.app import app
from privtext.data.corpus import Corpus
from privtext.testing.audit_faults import plant_noise_claim
from privtext.testing.tinyrun import tiny_run, toy_corpora

pytestmark = pytest.mark.audit


# ----------------------------------------------------------------------------------------------- primitives


def test_mu_for_dp_inverts_the_gaussian_curve_and_agrees_with_the_librarys_conversion() -> None:
    from privtext.privacy.conversions import gdp_mu_for_dp

    for eps, delta in ((1.0, 1e-5), (4.0, 1e-5), (8.0, 1e-6), (0.5, 1e-3)):
        mu = mu_for_dp(eps, delta)
        assert gaussian_delta(mu, eps) == pytest.approx(delta, rel=1e-9)
        assert mu == pytest.approx(float(gdp_mu_for_dp(eps, delta)), rel=1e-6)
    # a known value: 1-GDP gives δ(ε=1) = Φ(−1/2) − e·Φ(−3/2) = 0.126936
    assert gaussian_delta(1.0, 1.0) == pytest.approx(0.1269373, rel=1e-5)
    assert mu_for_secret(1e-3, 2e-2) == pytest.approx(3.090232 - 2.053749, rel=1e-5)


def test_pld_epsilon_of_gaussians_equals_their_exact_gdp_composition() -> None:
    import dp_accounting

    z, T = 3.0, 9  # T Gaussians at z: μ = √T/z = 1
    eps = pld_epsilon([dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), T)], 1e-5)
    exact = float(brentq(lambda e: gaussian_delta(1.0, e) - 1e-5, 0.1, 20))  # 1-GDP: Φ(−3.877) − e^4.377·Φ(−4.877)
    assert exact == pytest.approx(4.3772, abs=1e-3)
    assert exact <= eps <= exact * (1 + 1e-3)  # pessimistic, by less than its discretisation


def test_smallest_finds_the_threshold_from_any_start() -> None:
    for guess in (1e-3, 0.7, 50.0):
        assert smallest(lambda s: s >= 2.5, guess, rtol=1e-6) == pytest.approx(2.5, rel=2e-6)


# ----------------------------------------------------------------------------------------------- runs


def _corpora(secrets: bool = False) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=150)
    if secrets:
        texts = [t + (f" Call me at (212) 555-01{i % 5:02d}." if i % 3 == 0 else "") for i, t in enumerate(priv.texts)]
        priv = Corpus(priv.ids, tuple(texts), priv.labels, name="priv")
    return priv, pub


def _dpkps(root: Path, labels: str = "dp", **dpkps: Any) -> Path:
    p2, pool, _ = toy_corpora(rng=np.random.default_rng(5), n_private=60, n_pool=150)
    return tiny_run(root, private=p2, public=Corpus(pool.ids, pool.texts, {}, name="pool"), method="dpkps",
                    num_samples=16, privacy={"epsilon": 6.0},
                    data={"label_values": {"category": ["food", "hotel"], "mood": ["good", "bad"]}},
                    evolution={"label_distribution": {"kind": labels, "budget_fraction": 0.1}},
                    dpkps={"vocab_size": 20, "length": 4, "n_features": 32, "vocabulary_min_count": 3, **dpkps})


GENS = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]}]
DP = {"epsilon": 4.0, "delta": 1e-5}

#: every method and budget form the audit calibrates (dpft: tests/test_audit_dpsgd.py)
RUNS: dict[str, Any] = {
    "augpe_dp_labels": lambda d, p, q, s: tiny_run(d, private=p, public=q, iterations=3, privacy=DP,
                                                   evolution={"label_distribution": {"kind": "dp"}}),
    "augpe_mu": lambda d, p, q, s: tiny_run(d, private=p, public=q, iterations=2, privacy={"mu": 1.5}),
    "augpe_secret_group": lambda d, p, q, s: tiny_run(d, private=s, public=q, iterations=2,
                                                      privacy={"secret": {"p": 1e-3, "r": 5e-2}},
                                                      augpe={"sensitivity": "secret_group"}),
    "augpe_vocabulary": lambda d, p, q, s: tiny_run(d, private=p, public=q, iterations=2, privacy=DP,
                                                    augpe={"vocabulary_prompts": True, "vocabulary_r": 3},
                                                    evolution={"label_distribution": {"kind": "dp"}}),
    "augpe_noise_labels": lambda d, p, q, s: tiny_run(d, private=p, public=q, iterations=2,
                                                      privacy={"noise_multiplier": 3.0},
                                                      evolution={"label_distribution": {"kind": "dp"}}),
    "augpe_user": lambda d, p, q, s: tiny_run(d, private=p, public=q, iterations=2, privacy=DP,
                                              augpe={"parties": {"count": 3, "aggregation": "plain", "level": "user",
                                                                 "max_records": 4}}),
    "wasp": lambda d, p, q, s: tiny_run(d, private=p, public=q, method="wasp", num_samples=40, iterations=3,
                                        generators=GENS, privacy=DP, wasp={"q": 3, "in_context": 4}),
    "wasp_paper_nearest": lambda d, p, q, s: tiny_run(d, private=p, public=q, method="wasp", num_samples=40,
                                                      iterations=3, generators=GENS,
                                                      privacy={**DP, "calibration": "paper"},
                                                      wasp={"q": 2, "in_context": 4, "output": "nearest"}),
    "dpkps": lambda d, p, q, s: _dpkps(d),
    "dpkps_rff": lambda d, p, q, s: _dpkps(d, labels="uniform", sequence="iterative"),
    "secpe": lambda d, p, q, s: tiny_run(d, private=s, public=q, method="secpe", iterations=2),
}

_MADE: dict[str, Path] = {}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("calibrate")
    priv, pub = _corpora()
    sp, _ = _corpora(secrets=True)

    def get(name: str) -> Path:
        if name not in _MADE:
            _MADE[name] = RUNS[name](root / name, priv, pub, sp)
        return _MADE[name]

    yield get
    _MADE.clear()


def _calibration(run: Path) -> list[Any]:
    return [r for r in audit_run(run, attack=False) if r.check == "calibration" or r.quantity == "error"]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_methods_correct_run_matches_the_audits_calibration(name: str, made: Any) -> None:
    res = _calibration(made(name))
    assert res, "no calibration check ran"
    assert all(r.passed for r in res), [r.line() for r in res if not r.passed]
    for r in res:  # the derived value is the recorded one within the stated tolerance, never a free pass
        assert math.isclose(r.estimate, r.claim, rel_tol=r.details["rtol"]), r.line()


@pytest.mark.parametrize("factor", [2.0, 0.5])
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_ledger_claiming_other_noise_than_drawn_fails(name: str, factor: float, made: Any,
                                                        tmp_path: Path) -> None:
    """The run's ledger rewritten to claim ``factor`` × the noise drawn (event and std together, Δ kept, so the
    sensitivity derivation still passes): every rewritten kind fails the calibration check."""
    import shutil

    if made(name).joinpath("private", "ledger.jsonl").read_text().count("\n") == 0:
        pytest.skip("no release")
    run = tmp_path / "run"
    shutil.copytree(made(name), run)
    assert plant_noise_claim(run, factor) > 0
    res = audit_run(run, attack=False)
    derivation = [r for r in res if r.check == "derivation"]
    assert derivation and all(r.passed for r in derivation), [r.line() for r in derivation if not r.passed]
    cal = [r for r in res if r.check == "calibration"]
    assert cal and not any(r.passed for r in cal), [r.line() for r in cal if r.passed]
    for r in cal:  # z (σ) scales with the noise, a Laplace release's ε inversely
        want = 1 / factor if r.quantity == "epsilon per release" else factor
        assert r.estimate / r.claim == pytest.approx(want, rel=0.02), r.line()


def test_privtext_audit_fails_the_doubled_vote_noise_of_issue_36(made: Any, tmp_path: Path) -> None:
    """The issue's case through the CLI: the ledger claims twice the vote noise; the derivation passes (μ 0.5,
    claim 0.5) but the calibration does not, and ``privtext audit`` exits 1. The untouched run exits 0."""
    import shutil

    ok = made("augpe_dp_labels")
    cli._mount()
    res = CliRunner().invoke(app, ["audit", str(ok), "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    shutil.copytree(ok, run)
    assert plant_noise_claim(run, 2.0, lambda e: e["key"].startswith("votes/")) == 3
    res = CliRunner().invoke(app, ["audit", str(run), "--seed", "1", "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.output)["audits"]
    bad = [a for a in out if not a["passed"]]
    assert {a["check"] for a in bad} == {"calibration"}, bad
    assert all(a["mechanism"].startswith("votes") for a in bad)
    (votes,) = bad
    assert votes["estimate"] == pytest.approx(2 * votes["claim"], rel=1e-6)
