"""The one-run audit of DP-SGD (privtext.audit.dpsgd; Steinke, Nasr & Jagielski 2023): canary gradients through
the library's own DP-SGD step, scored from the final parameters.

* the canary model is exact: without noise every included canary ends at C·(times it was sampled) and every
  excluded one at 0;
* at the noise the budget gives, the lower bound stays under the claim; with the noise removed or the clipping
  removed (the planted faults of privtext.testing.audit_faults) it exceeds it;
* on whole dpft runs (issue 36): ``privtext audit`` passes a correct run, and fails a run made and audited with
  the DP-SGD noise removed or the clipping removed — runs whose privacy.json says ``private: true`` — and a run
  whose ledger claims twice the DP-SGD noise it drew.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("opacus")

from privtext.audit import audit_run  # noqa: E402
from privtext.audit.dpsgd import CANARY_NORM, audit_dpsgd_run, canary_run, dpsgd_curve, plan_canaries  # noqa: E402
from privtext.testing.audit_faults import (  # noqa: E402
    dpsgd_clipping_removed,
    dpsgd_noise_removed,
    plant_noise_claim,
)

pytestmark = pytest.mark.audit

#: a DP-SGD at (ε = 2, δ = 1e-5): q = 1/16, one epoch of 16 steps, σ from the budget (audit.calibrate)
SIGMA, Q, STEPS, EPOCHS = 1.053, 1 / 16, 16, 1


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_canary_model_moves_each_included_canary_by_c_per_sample_and_nothing_else() -> None:
    """Without noise, θ_T,i = C·nᵢ exactly: a whole multiple of C for an included canary (its gradient, 1000·C,
    clipped to C in every step that sampled it), 0 for an excluded one — and with the clipping removed too, a
    multiple of 1000·C. With noise, the excluded canaries' θ is N(0, T(σC)²): a χ² test with its tolerance from
    the count."""
    rng = np.random.default_rng(3)
    inclusion = rng.integers(0, 2, 400).astype(bool)
    C = 0.5
    with dpsgd_noise_removed():
        theta = canary_run(inclusion, sigma=1.0, sampling_rate=0.25, steps_per_epoch=4, epochs=2, max_grad_norm=C,
                           noise_rng=np.random.default_rng(4))
    n = theta / C
    assert np.all(theta[~inclusion] == 0) and np.allclose(n, np.round(n), atol=1e-9)
    assert 0.5 < np.mean(n[inclusion]) / (0.25 * 8) < 1.5 and np.all(n >= 0)
    with dpsgd_noise_removed(), dpsgd_clipping_removed():
        theta = canary_run(inclusion, sigma=1.0, sampling_rate=0.25, steps_per_epoch=4, epochs=2, max_grad_norm=C,
                           noise_rng=np.random.default_rng(4))
    assert np.allclose(theta / (CANARY_NORM * C), np.round(theta / (CANARY_NORM * C)), atol=1e-9)
    assert theta[inclusion].max() >= CANARY_NORM * C
    sigma = 1.3
    theta = canary_run(inclusion, sigma=sigma, sampling_rate=0.25, steps_per_epoch=4, epochs=2, max_grad_norm=C,
                       noise_rng=np.random.default_rng(5))
    out = theta[~inclusion]
    stat = float(np.sum(out ** 2) / (8 * (sigma * C) ** 2))
    from scipy.stats import chi2

    assert chi2.ppf(1e-6, len(out)) < stat < chi2.ppf(1 - 1e-6, len(out)), stat


def test_the_plan_picks_enough_canaries_for_a_perfect_attack_to_beat_the_claim() -> None:
    """All-correct guesses with the planned m would exceed the claim ε(δ') by the margin; at the run's δ = 1e-5
    and confidence 0.999 a default dpft run (ε = 4) needs a smaller δ' (the δ term caps the bound near 3)."""
    from privtext.audit.dpsgd import MARGIN, _best_bound, guesses

    curve = dpsgd_curve(SIGMA, Q, STEPS * EPOCHS)
    m, d, claim = plan_canaries(curve, 1e-5, 0.999, Q * STEPS * EPOCHS)
    assert claim == pytest.approx(curve(d)) and claim == pytest.approx(2.0, rel=0.02)
    assert _best_bound(m, guesses(m, Q * STEPS), d, 0.999) > (1 + MARGIN) * claim
    assert m < 1000
    curve4 = dpsgd_curve(0.907, Q, 48)  # the default: ε = 4, 3 epochs
    m4, d4, claim4 = plan_canaries(curve4, 1e-5, 0.999, 3.0)
    assert d4 < 1e-5 and claim4 > curve4(1e-5) and _best_bound(m4, guesses(m4, 3.0), d4, 0.999) > claim4


@pytest.mark.parametrize(("fault", "passes"), [(None, True), ("noise", False), ("clipping", False)])
def test_the_one_run_audit_stays_under_the_claim_and_catches_both_faults(fault: str | None, passes: bool) -> None:
    ctx = {None: contextlib.nullcontext(), "noise": dpsgd_noise_removed(), "clipping": dpsgd_clipping_removed()}
    with ctx[fault]:
        r = audit_dpsgd_run(sigma=SIGMA, sampling_rate=Q, steps_per_epoch=STEPS, epochs=EPOCHS, max_grad_norm=1.0,
                            delta=1e-5, rng=np.random.default_rng(11))
    assert r.passed is passes, r.line()
    assert r.details["informative"]
    if not passes:  # every guess right: the bound is the plan's best
        assert r.details["correct"] == r.details["guesses"] and r.estimate > r.claim
    else:
        assert r.estimate < r.claim


# ------------------------------------------------------------------------------------------------ dpft runs


TINY_LM = {"size": "tiny", "max_length": 48, "epochs": 2.0, "train_tokens": None, "validation": 0,
           "precision": "fp32"}


@pytest.fixture(scope="module")
def dpft_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from privtext.config import config_from_dict
    from privtext.data import write_corpus
    from privtext.runner import run_config
    from privtext.testing.tinyrun import toy_corpora

    root = tmp_path_factory.mktemp("audit-dpsgd")
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=47, n_pool=160)
    write_corpus(priv, root / "private.csv")
    write_corpus(pub, root / "public.csv")

    done: dict[str, tuple[Path, list[Any]]] = {}

    def run(name: str, fault: str | None = None) -> tuple[Path, list[Any]]:
        if name in done:
            return done[name]
        raw = {"method": "dpft", "seed": 3,
               "data": {"private": str(root / "private.csv"), "public": str(root / "public.csv"),
                        "label_columns": ["category", "mood"]},
               "evolution": {"num_samples": 6},
               "privacy": {"epsilon": 2.0, "delta": 1e-5},
               # dpft's defaults (q = 1/16, C = 1, AdamW), one epoch, the tiny public LM
               "dpft": {"epochs": EPOCHS, "max_new_tokens": 16, "torch_threads": 1,
                        "lm": {**TINY_LM, "cache_dir": str(root / "lm")}},
               "output": str(root / name)}
        ctx = {None: contextlib.nullcontext(), "noise": dpsgd_noise_removed(),
               "clipping": dpsgd_clipping_removed()}[fault]
        with ctx:
            out = run_config(config_from_dict(raw))
            res = audit_run(out, rng=np.random.default_rng(7))
        done[name] = (out, res)
        return done[name]

    return run


def _one_run(res: list[Any]) -> Any:
    (r,) = [a for a in res if a.mechanism.startswith("dpsgd_one_run")]
    return r


def test_privtext_audit_passes_a_correct_dpft_run_and_fails_the_two_broken_ones(dpft_run: Any) -> None:
    _, res = dpft_run("ok")
    assert all(r.passed for r in res), [r.line() for r in res if not r.passed]
    assert {r.check for r in res} == {"derivation", "calibration", "attack"}
    assert _one_run(res).estimate < _one_run(res).claim
    for fault in ("noise", "clipping"):
        root, res = dpft_run(fault, fault)
        st = json.loads((root / "privacy.json").read_text())
        assert st["private"] is True  # the run itself cannot tell
        bad = [r for r in res if not r.passed]
        assert [r.mechanism.split(" ")[0] for r in bad] == ["dpsgd_one_run"], [r.line() for r in res]
        assert bad[0].estimate > bad[0].claim > 1.9


def test_a_dpft_ledger_claiming_twice_the_noise_fails_the_calibration(dpft_run: Any, tmp_path: Path) -> None:
    ok, _ = dpft_run("ok")
    run = tmp_path / "run"
    shutil.copytree(ok, run)
    assert plant_noise_claim(run, 2.0, lambda e: e["key"].startswith("dpsgd/")) == EPOCHS
    res = audit_run(run, attack=False)
    bad = [r for r in res if not r.passed]
    assert [r.check for r in bad] == ["calibration"], [r.line() for r in res]
    assert bad[0].estimate == pytest.approx(2 * bad[0].claim, rel=0.02) and math.isfinite(bad[0].claim)
