"""The neighbouring relation's one rule (privtext.privacy.relation) against brute force on small instances: the
sensitivity it gives is never exceeded by any pair of neighbouring data sets tried, and it is attained."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtext.errors import ConfigError
from privtext.mechanisms.kde import histogram_contribution, sketch_contribution, sketch_sensitivity
from privtext.mechanisms.topq import topq_contribution
from privtext.mechanisms.vocabulary import vocabulary_contribution, vocabulary_sensitivity
from privtext.privacy.relation import (
    ONE_COUNT_L1,
    ONE_VOTE_L2,
    Contribution,
    NeighbouringRelation,
    party_normalised,
)

R = NeighbouringRelation


def _norm(v: np.ndarray, norm: str) -> float:
    return float(np.abs(v).sum() if norm == "l1" else np.linalg.norm(v))


def _random_contribution(rng: np.random.Generator, c: Contribution, bins: int) -> np.ndarray:
    """A random record contribution with ‖v‖ ≤ c.bound (non-negative when c.nonnegative)."""
    v = rng.random(bins) if c.nonnegative else rng.normal(size=bins)
    v[rng.random(bins) < 0.5] = 0
    if not np.any(v):
        v[rng.integers(bins)] = 1.0
    return v * (c.bound * rng.uniform(0.3, 1.0) / _norm(v, c.norm))


@pytest.mark.parametrize("c", [ONE_VOTE_L2, ONE_COUNT_L1, Contribution(2.5, "l2", False), Contribution(3.0, "l1", False)])
def test_the_rule_is_never_exceeded_and_is_attained(c: Contribution, any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    bins, k = 6, 4
    for rel in (R.add_remove(), R.replace_one(), R.secret_group(k), R.user(k)):
        delta = rel.sensitivity(c)
        worst = 0.0
        for _ in range(300):
            x = _random_contribution(rng, c, bins)
            if rel.kind == "add_remove":
                diff = x
            elif rel.kind == "replace_one":
                diff = x - _random_contribution(rng, c, bins)
            else:  # a group (or a user's records): up to k records removed together
                diff = sum((_random_contribution(rng, c, bins) for _ in range(k)), np.zeros(bins))
            worst = max(worst, _norm(diff, c.norm))
        assert worst <= delta * (1 + 1e-12), (rel.kind, worst, delta)
        # attained: the extreme neighbours the derivation names
        e0, e1 = np.eye(bins)[0] * c.bound, np.eye(bins)[1] * c.bound
        extreme = {"add_remove": e0, "replace_one": (e0 - e1) if c.nonnegative else 2 * e0,
                   "secret_group": k * e0, "user": k * e0}[rel.kind]
        assert _norm(extreme, c.norm) == pytest.approx(delta)


def test_known_values() -> None:
    assert R.replace_one().sensitivity(ONE_VOTE_L2) == pytest.approx(math.sqrt(2))  # one vote moved between bins
    assert R.replace_one().sensitivity(ONE_COUNT_L1) == 2.0  # DP-KPS's label histogram under replace-one (bug 2)
    assert R.secret_group(5).sensitivity(vocabulary_contribution(5)) == 25.0  # Aug-PE's vocabulary, k = r = 5 (bug 1)
    assert vocabulary_sensitivity(10, "replace_one") == 20.0 and vocabulary_sensitivity(10, R.secret_group(3)) == 30.0
    q3 = math.sqrt(2 * (1 + 1 / 4 + 1 / 16))
    assert R.add_remove().sensitivity(topq_contribution(3)) == pytest.approx(q3)
    assert R.user(7).sensitivity(topq_contribution(3)) == pytest.approx(7 * q3)
    assert R.user(normalised=True).sensitivity(party_normalised(topq_contribution(3))) == 1.0
    assert R.replace_one().sensitivity(histogram_contribution()) == 2.0
    assert R.replace_one().sensitivity(sketch_contribution(16)) == pytest.approx(2 * math.sqrt(2) * 16)  # signed
    assert sketch_sensitivity(16, noise="paper", neighbouring="replace_one") == pytest.approx(2 * math.sqrt(2) * 16)


def test_a_papers_own_bound_is_refused_where_it_was_not_stated() -> None:
    with pytest.raises(ConfigError, match="holds for add_remove, replace_one only"):
        R.secret_group(2).sensitivity(sketch_contribution(16, noise="paper"))


def test_bad_relations_name_the_value() -> None:
    with pytest.raises(ConfigError, match="'nope'"):
        R("nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="group size"):
        R("secret_group", group_size=0)
    with pytest.raises(ConfigError, match="cap"):
        R.user()
    with pytest.raises(ConfigError, match="has no group size"):
        R("add_remove", group_size=3)


def test_words_name_the_relation() -> None:
    assert R.add_remove().words() == "adding or removing one private record"
    assert "groups of up to 4 records" in R.secret_group(4).words()
    assert "capped at 9 records" in R.user(9).words()
    assert R.secret_group(4).to_dict() == {"kind": "secret_group", "group_size": 4}


@pytest.mark.parametrize("c", [ONE_COUNT_L1, ONE_VOTE_L2, vocabulary_contribution(5), Contribution(2.5, "l2", False)])
def test_normalised_user_level_is_m_times_the_bound_for_releases_the_parties_do_not_normalise(
        c: Contribution, any_seed: int) -> None:
    """Issue 36: at user level with normalised votes the relation returned Δ = 1 for every release. Only a party's
    normalised vector has norm 1; a label histogram, a vocabulary or any release that sums the party's raw records
    moves by up to m·c (brute force over random parties of m records: never exceeded, attained by m equal
    contributions), and without a cap m it is refused rather than given Δ = 1."""
    rng = np.random.default_rng(any_seed)
    m, bins = 6, 5
    rel = R.user(m, normalised=True)
    delta = rel.sensitivity(c)
    assert delta == pytest.approx(m * c.bound)
    worst = max(_norm(sum((_random_contribution(rng, c, bins) for _ in range(m)), np.zeros(bins)), c.norm)
                for _ in range(300))
    assert worst <= delta * (1 + 1e-12)
    assert _norm(m * np.eye(bins)[0] * c.bound, c.norm) == pytest.approx(delta)  # m records on one bin
    with pytest.raises(ConfigError, match="no record cap"):
        R.user(normalised=True).sensitivity(c)


def test_a_partys_normalised_vote_vector_has_sensitivity_one_whatever_its_records(any_seed: int) -> None:
    """The party sends u/‖u‖₂ of its summed votes: removing it moves the sum by exactly 1, for any number of
    records and any per-record bound (brute force); the bound is refused outside the normalised user relation."""
    rng = np.random.default_rng(any_seed)
    for c in (ONE_VOTE_L2, topq_contribution(3)):
        pc = party_normalised(c)
        for rel in (R.user(normalised=True), R.user(9, normalised=True)):
            assert rel.sensitivity(pc) == 1.0
        for records in (1, 4, 50):
            u = sum((_random_contribution(rng, c, 7) for _ in range(records)), np.zeros(7))
            assert np.linalg.norm(u / np.linalg.norm(u)) == pytest.approx(1.0)
        for rel in (R.add_remove(), R.replace_one(), R.secret_group(3), R.user(9)):
            with pytest.raises(ConfigError, match="normalised votes only"):
                rel.sensitivity(pc)


def test_normalised_relation_keeps_its_cap() -> None:
    assert R.user(4, normalised=True).to_dict() == {"kind": "user", "group_size": 4, "normalised": True}
    assert R.user(normalised=True).to_dict() == {"kind": "user", "normalised": True}
    assert R.user(4).to_dict() == {"kind": "user", "group_size": 4}
    with pytest.raises(ConfigError, match="no record cap"):
        R("add_remove", capped=False)
