"""The release primitive: describe, record (refused before any private data is read), compute, check the event the
mechanism spent against the recorded one, keep; never drawn twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privtext.errors import BudgetExceededError, PrivacyError
from privtext.privacy import Budget, Ledger
from privtext.privacy.events import gaussian_event
from privtext.privacy.release import Release, ReleaseKeeper


def _keeper(tmp_path: Path, budget: Budget) -> tuple[ReleaseKeeper, Ledger]:
    led = Ledger(tmp_path / "ledger.jsonl", budget)
    return ReleaseKeeper(led, lambda r: tmp_path / "values" / f"{r.key.replace('/', '_')}.npz"), led


def _release(key: str, sigma: float) -> Release:
    return Release(key=key, mechanism="test", event=gaussian_event(sigma), noise_std=sigma, sensitivity=1.0)


def test_over_budget_release_never_reaches_the_mechanism(tmp_path: Path) -> None:
    keeper, led = _keeper(tmp_path, Budget.gdp(0.5))
    calls = []

    def compute():
        calls.append(1)  # stands for "reads private data"
        return {"x": np.zeros(1)}, gaussian_event(1.0)

    with pytest.raises(BudgetExceededError, match="refused before any private data was read"):
        keeper.release(_release("a", 1.0), compute)  # μ = 1 > 0.5
    assert calls == [] and len(led) == 0 and not (tmp_path / "values").exists()


def test_a_value_whose_mechanism_spent_another_event_is_discarded(tmp_path: Path) -> None:
    keeper, led = _keeper(tmp_path, Budget.gdp(2.0))
    with pytest.raises(PrivacyError, match="the value is discarded"):
        keeper.release(_release("a", 2.0), lambda: ({"x": np.ones(1)}, gaussian_event(1.0)))  # noise halved
    assert led.has("a") and not (tmp_path / "values" / "a.npz").exists()


def test_kept_values_are_read_back_not_redrawn(tmp_path: Path) -> None:
    keeper, _ = _keeper(tmp_path, Budget.gdp(2.0))
    draws = iter([np.array([1.5]), np.array([9.9])])
    compute = lambda: ({"x": next(draws)}, gaussian_event(2.0))  # noqa: E731
    first = keeper.release(_release("a", 2.0), compute)
    again_keeper, again_led = _keeper(tmp_path, Budget.gdp(2.0))  # a resumed process
    second = again_keeper.release(_release("a", 2.0), compute)
    assert first["x"].tolist() == second["x"].tolist() == [1.5] and len(again_led) == 1


def test_recorded_but_never_saved_is_drawn_once_under_its_single_event(tmp_path: Path) -> None:
    keeper, led = _keeper(tmp_path, Budget.gdp(2.0))
    led.record(_release("a", 2.0))  # a process died between recording and saving
    out = keeper.release(_release("a", 2.0), lambda: ({"x": np.array([3.0])}, gaussian_event(2.0)))
    assert out["x"].tolist() == [3.0] and len(led) == 1
    # a resumed run that describes the release differently is refused
    with pytest.raises(PrivacyError, match="another event"):
        led2 = Ledger(tmp_path / "l2.jsonl", Budget.gdp(2.0))
        led2.record(_release("b", 2.0))
        ReleaseKeeper(led2, lambda r: tmp_path / "v2" / "b.npz").release(
            _release("b", 3.0), lambda: ({"x": np.zeros(1)}, gaussian_event(3.0)))
