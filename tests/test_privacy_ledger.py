"""The ledger: refuses before data, persists (fsync'd JSONL), reloads, refuses duplicates, survives a torn line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import dp_accounting
import numpy as np
import pytest

from privtext.errors import BudgetExceededError, PrivacyError
from privtext.privacy import (
    Budget,
    DuplicateReleaseError,
    GdpTarget,
    Ledger,
    Release,
    ReleaseKeeper,
    SecretEvent,
    calibrate,
    gaussian_noise_multiplier,
    mixture_event,
)

G = dp_accounting.GaussianDpEvent


def rel(key: str, z: float, **kw) -> Release:
    return Release(key=key, mechanism="test_histogram", event=G(z), noise_std=z, sensitivity=1.0, **kw)


def test_calibrated_sigma_passes_and_one_more_is_refused_before_data(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    budget = Budget.dp(4.0, 1e-5)
    z = gaussian_noise_multiplier(budget, compositions=5)
    led = Ledger.load(path, budget)  # fresh run: no file yet
    for t in range(5):
        e = led.record(rel(f"votes/iter_{t:03d}", z, iteration=t))
        assert e.seq == t
    assert led.spent()["epsilon"] <= 4.0
    before = path.read_bytes()

    touched = []

    def compute() -> None:  # stands for "read private data and draw the noise"
        touched.append(True)
        raise AssertionError("private data was read for a refused release")

    keeper = ReleaseKeeper(led, lambda r: tmp_path / "values" / "v.npz")
    with pytest.raises(BudgetExceededError, match="refused before any private data was read"):
        keeper.release(rel("votes/iter_005", z), compute)
    assert touched == []
    assert path.read_bytes() == before  # nothing written
    assert len(led) == 5


def test_release_records_then_computes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, Budget.gdp(2.0))
    seen = []

    def compute() -> tuple[dict, object]:
        seen.append(led.has("h"))  # the event is on disk before the computation starts
        return {"v": np.array([7.0])}, G(1.0)

    keeper = ReleaseKeeper(led, lambda r: tmp_path / "values" / "h.npz")
    assert keeper.release(rel("h", 1.0), compute)["v"].tolist() == [7.0]
    assert seen == [True]
    assert json.loads(path.read_text().splitlines()[0])["key"] == "h"


def test_reload_reports_the_same_spend(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    budget = Budget.gdp(1.0)
    led = Ledger(path, budget)
    for t in range(3):
        led.record(rel(f"r{t}", 2.0, iteration=t, meta={"k": t}))
    again = Ledger.load(path, budget)
    assert again.spent() == led.spent()
    assert again.spent()["mu"] == pytest.approx(math.sqrt(3) / 2, rel=1e-14)
    assert [e.key for e in again.entries] == ["r0", "r1", "r2"]
    assert again.get("r1").release.meta == {"k": 1}
    assert again.remaining()["mu"] == pytest.approx(math.sqrt(1 - 0.75), rel=1e-12)


def test_duplicate_key_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, Budget.gdp(5.0))
    led.record(rel("a", 1.0))
    before = path.read_bytes()
    with pytest.raises(DuplicateReleaseError, match="exactly one event"):
        led.record(rel("a", 3.0))
    assert path.read_bytes() == before
    # and a reloaded ledger refuses it too
    with pytest.raises(DuplicateReleaseError):
        Ledger.load(path, Budget.gdp(5.0)).record(rel("a", 3.0))


def test_torn_last_line_is_tolerated_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, Budget.gdp(5.0))
    led.record(rel("a", 1.0))
    led.record(rel("b", 1.0))
    good = path.read_bytes()
    path.write_bytes(good + b'{"seq": 2, "key": "c", "mechan')  # crash mid-append
    again = Ledger.load(path, Budget.gdp(5.0))
    assert [e.key for e in again.entries] == ["a", "b"]
    assert path.read_bytes() == good  # the torn fragment is gone, so the next append starts on a fresh line
    again.record(rel("c", 1.0))
    assert [e.key for e in Ledger.load(path, Budget.gdp(5.0)).entries] == ["a", "b", "c"]


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    from privtext.errors import RunError

    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, Budget.gdp(5.0))
    led.record(rel("a", 1.0))
    path.write_text("not json\n" + path.read_text())
    with pytest.raises(RunError, match="corrupt ledger line"):
        Ledger.load(path, Budget.gdp(5.0))


def test_smaller_budget_on_resume_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path, Budget.gdp(1.0))
    led.record(rel("a", 1.2))
    with pytest.raises(BudgetExceededError, match="already exceed"):
        Ledger.load(path, Budget.gdp(0.5))


def test_gdp_ledger_refuses_non_gaussian_events() -> None:
    led = Ledger(None, Budget.gdp(1.0))
    with pytest.raises(PrivacyError, match="Gaussian releases"):
        led.record(Release(key="lap", mechanism="laplace", event=dp_accounting.LaplaceDpEvent(1.0),
                           noise_std=1.0, sensitivity=1.0))
    assert len(led) == 0


def test_gdp_calibration_and_separate_releases_agree_exactly() -> None:
    T = 9
    s = calibrate(lambda z: dp_accounting.SelfComposedDpEvent(G(z), T), GdpTarget(0.8))
    led = Ledger(None, Budget.gdp(0.8))
    for t in range(T):
        led.record(rel(f"t{t}", s))
    assert led.spent()["mu"] <= 0.8
    with pytest.raises(BudgetExceededError):
        led.record(rel("extra", s * 100))


def test_noise_budget_never_refuses_and_reports_epsilon() -> None:
    led = Ledger(None, Budget.noise(1e-5))
    for t in range(3):
        led.record(rel(f"t{t}", 0.5))
    s = led.spent()
    assert not s["exceeded"]
    # an independent computation: three Gaussians with multiplier 0.5 are μ = √3/0.5-GDP; ε at δ from Remark C.1
    from privtext.privacy import gdp_epsilon

    assert s["epsilon_at_report_delta"] == pytest.approx(float(gdp_epsilon(1e-5, math.sqrt(3) / 0.5)), rel=2e-3)
    assert s["epsilon_at_report_delta"] > 10


def test_secret_ledger_checks_groups_independently() -> None:
    budget = Budget.secret(1e-4, 1e-3)
    led = Ledger(None, budget)
    z = 3.0
    ev = mixture_event([0.5, 0.5], z)
    se = {"g0": SecretEvent(event=ev, p=1e-4, r=1e-3, secrets=(0, 1)),
          "g1": SecretEvent(event=G(50.0), p=1e-4, r=1e-3, secrets=(2,))}
    n = 0
    while True:
        try:
            led.record(Release(key=f"c{n}", mechanism="clusters", event=G(z), noise_std=z, sensitivity=1.0,
                               secret_events=se))
        except BudgetExceededError as e:
            assert "g0" in str(e)  # the mixture group runs out first
            break
        n += 1
    assert n >= 1
    # a release that touches only g1 is still allowed: groups not in a release are unaffected
    led.record(Release(key="only-g1", mechanism="clusters", event=G(50.0), noise_std=50.0, sensitivity=1.0,
                       secret_events={"g1": se["g1"]}))
    spent = led.spent()
    assert spent["groups"]["g0"]["releases"] == n and spent["groups"]["g1"]["releases"] == n + 1
    st = led.account()
    assert st["neighbouring_relation"].startswith("the same private data with and without one declared secret")
    assert st["spent"]["worst_group"] == "g0"


def test_secret_group_must_match_the_budget() -> None:
    led = Ledger(None, Budget.secret(1e-4, 1e-3))
    with pytest.raises(PrivacyError, match="not a \\(p, r\\) pair of the budget"):
        led.record(Release(key="x", mechanism="clusters", event=G(1.0), noise_std=1.0, sensitivity=1.0,
                           secret_events={"g": SecretEvent(event=G(5.0), p=1e-4, r=2e-3)}))
    per = Ledger(None, Budget.secret([1e-4, 2e-4], [1e-3, 1e-3]))
    with pytest.raises(PrivacyError, match="differs from the budget"):
        per.record(Release(key="x", mechanism="clusters", event=G(1.0), noise_std=1.0, sensitivity=1.0,
                           secret_events={"g": SecretEvent(event=G(5.0), p=1e-4, r=1e-3, secrets=(0, 1))}))


def test_secret_budget_with_record_level_releases_only() -> None:
    led = Ledger(None, Budget.secret([1e-4, 1e-3], [1e-3, 2e-3]))
    z = gaussian_noise_multiplier(led.budget, compositions=3)
    for t in range(3):
        led.record(rel(f"t{t}", z))
    s = led.spent()
    assert set(s["groups"]) == {"all:0", "all:1"} and not s["exceeded"]
    with pytest.raises(BudgetExceededError):
        led.record(rel("t3", z))


def test_account_is_json(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "ledger.jsonl", Budget.dp(2.0, 1e-6))
    led.record(rel("a", 3.0, iteration=0, description="noisy vote histogram"))
    st = led.account()
    json.dumps(st, allow_nan=False)
    assert st["releases"] == 1 and st["budget"]["epsilon"] == 2.0
    assert st["release_list"][0]["key"] == "a" and st["ledger"].endswith("ledger.jsonl")
    assert st["remaining"]["epsilon"] == pytest.approx(2.0 - st["spent"]["epsilon"])
