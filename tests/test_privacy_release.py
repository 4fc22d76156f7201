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


# ------------------------------------------------------------------ redraw after a crash (issue 21, bug 6)


def _party_sum(key: str, sigma: float, **kw: object) -> Release:
    return Release(key=key, mechanism="federated_nn_vote_sum", event=gaussian_event(sigma), noise_std=sigma,
                   sensitivity=1.0, meta={"parties": 3, "aggregation": "secagg", "min_survivors": 3}, **kw)


def test_a_federated_release_recorded_but_not_saved_is_not_redrawn_under_one_entry(tmp_path: Path) -> None:
    """The aggregator saw the first draw (the SecAgg+ sum) before the process died: drawing again under the
    single ledger entry would release two independent noisy sums for one event. A party sum records a second
    event for the redraw (budget permitting)."""
    keeper, led = _keeper(tmp_path, Budget.gdp(3.0))
    led.record(_party_sum("votes/iter_001", 2.0))  # recorded; the process died before the value was saved
    out = keeper.release(_party_sum("votes/iter_001", 2.0), lambda: ({"x": np.array([3.0])}, gaussian_event(2.0)))
    assert out["x"].tolist() == [3.0]
    keys = [e.key for e in led.entries]
    assert keys == ["votes/iter_001", "votes/iter_001#redraw-1"], keys
    assert led.get("votes/iter_001#redraw-1").release.meta["redraw_of"] == "votes/iter_001"
    assert led.spent()["mu"] == pytest.approx(np.sqrt(2) / 2.0)  # both draws are accounted
    # a resumed process reads the saved value back: no third event
    again = ReleaseKeeper(Ledger.load(tmp_path / "ledger.jsonl", Budget.gdp(3.0)), keeper.path_for)
    assert again.release(_party_sum("votes/iter_001", 2.0), lambda: ({"x": np.zeros(1)}, gaussian_event(2.0)))[
        "x"].tolist() == [3.0]
    assert len(again.ledger) == 2


def test_redraw_refused_or_over_budget_draws_nothing(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute():
        calls.append(1)
        return {"x": np.zeros(1)}, gaussian_event(1.0)

    keeper, led = _keeper(tmp_path, Budget.gdp(1.2))
    led.record(_party_sum("a", 1.0))
    with pytest.raises(BudgetExceededError):  # the second event would exceed μ = 1.2
        keeper.release(_party_sum("a", 1.0), compute)
    keeper2, led2 = _keeper(tmp_path / "r", Budget.gdp(5.0))
    led2.record(_release("b", 1.0))
    from privtext.errors import ResumeError

    with pytest.raises(ResumeError, match="refuse"):
        keeper2.release(Release(key="b", mechanism="test", event=gaussian_event(1.0), noise_std=1.0,
                                sensitivity=1.0, redraw="refuse"), compute)
    assert calls == [] and len(led) == 1 and len(led2) == 1


def test_redraw_policy_defaults_and_round_trip() -> None:
    assert _release("a", 1.0).redraw_policy == "same_event"
    assert _party_sum("a", 1.0).redraw_policy == "new_event"
    plain = Release(key="a", mechanism="t", event=gaussian_event(1.0), noise_std=1.0, sensitivity=1.0,
                    meta={"parties": 3, "aggregation": "plain"})
    assert plain.redraw_policy == "same_event"  # one process: no aggregator saw the first draw
    r = _party_sum("a", 1.0, redraw="refuse")
    assert r.redraw_policy == "refuse" and Release.from_dict(r.to_dict()).redraw == "refuse"
    with pytest.raises(PrivacyError, match="redraw"):
        Release(key="a", mechanism="t", event=gaussian_event(1.0), noise_std=1.0, sensitivity=1.0,
                redraw="sometimes").validate()
