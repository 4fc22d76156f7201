"""Preference pairs from released values only (issue 38): known values of the ranking rule, the provenance type
that only a kept release can make, the planted fault of a pair builder that reads an exact count (caught), and the
guard check of the pairs' texts (no false alarm on generated Yelp text, a planted private record caught)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from privtext.data.population import Population
from privtext.errors import ConfigError, PrivacyError
from privtext.learn import pairs as pairs_mod
from privtext.learn.options import PairOptions
from privtext.learn.pairs import (
    PreferencePair,
    ReleasedVotes,
    candidate_groups,
    check_pair_texts,
    pair_records,
    preference_pairs,
    reject_position,
    wasp_pairs,
)
from privtext.privacy import Budget, Ledger
from privtext.privacy.events import gaussian_event
from privtext.privacy.relation import ONE_VOTE_L2, NeighbouringRelation
from privtext.privacy.release import ReleaseKeeper, gaussian_release

from .conftest import shared_file


def _keeper(tmp_path: Path) -> ReleaseKeeper:
    led = Ledger(tmp_path / "ledger.jsonl", Budget.noise(noise_multiplier=1.0))
    return ReleaseKeeper(led, lambda r: tmp_path / "values" / f"{r.key.replace('/', '_')}.npz")


def _release(keeper: ReleaseKeeper, key: str, **arrays: np.ndarray) -> None:
    """Keep ``arrays`` as the value of release ``key`` (recorded in the ledger first, as every release is)."""
    r = gaussian_release(key, mechanism="test", noise_multiplier=1.0, contribution=ONE_VOTE_L2,
                         relation=NeighbouringRelation.add_remove(), iteration=0)
    keeper.release(r, lambda: ({k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}, gaussian_event(1.0)))


def _pop(texts: list[str], parents: list[str | None], groups: list[int] | None = None,
         generators: list[str] | None = None) -> Population:
    n = len(texts)
    return Population(ids=[f"c{i}" for i in range(n)], texts=list(texts),
                      group=np.asarray(groups if groups is not None else [0] * n, dtype=np.int64),
                      origin=["variation"] * n, parent=list(parents), generator=generators or ["gen"] * n)


def _kept(tmp_path: Path, values: list[float], key: str = "votes/iter_000") -> ReleasedVotes:
    keeper = _keeper(tmp_path)
    _release(keeper, key, noisy=np.asarray(values))
    return ReleasedVotes.kept(keeper, key, "noisy")


# ------------------------------------------------------------------ the rule, known values

VALUES = [5, 3, 9, 1, 0, 2, 7, 4, 6, 8]  # ranked: idx 2 (9), 9 (8), 6 (7), 8 (6), 0 (5), 7 (4), 1 (3), 5 (2), ...


def test_popri_rule_chosen_is_the_top_rejected_the_fifth_of_ten(tmp_path: Path) -> None:
    pop = _pop([f"text {i}" for i in range(10)], ["p"] * 10)
    votes = _kept(tmp_path, VALUES)
    rng = np.random.default_rng(0)
    (p,) = preference_pairs(pop, votes, PairOptions(reject_rank=0.5), rng=rng)
    assert (p.chosen, p.rejected, p.chosen_votes, p.rejected_votes) == ("text 2", "text 0", 9.0, 5.0)
    (p5,) = preference_pairs(pop, votes, PairOptions(reject_rank=5), rng=rng)
    assert (p5.chosen, p5.rejected) == ("text 2", "text 0")
    (p3,) = preference_pairs(pop, votes, PairOptions(reject_rank=3), rng=rng)
    assert (p3.chosen, p3.rejected) == ("text 2", "text 6")
    two = preference_pairs(pop, votes, PairOptions(reject_rank=5, pairs_per_group=2), rng=rng)
    assert [(q.chosen, q.rejected) for q in two] == [("text 2", "text 0"), ("text 9", "text 7")]
    # a rank past the group's end is clipped to its last member
    (last,) = preference_pairs(pop, votes, PairOptions(reject_rank=40), rng=rng)
    assert (last.chosen, last.rejected) == ("text 2", "text 4")
    assert pair_records([p], lambda q: f"prompt g{q.group}") == [
        {"prompt": "prompt g0", "chosen": "text 2", "rejected": "text 0"}]


def test_reject_position_known_values() -> None:
    assert [reject_position(PairOptions(reject_rank=0.5), n) for n in (2, 3, 10, 11)] == [2, 2, 5, 6]
    assert [reject_position(PairOptions(reject_rank=4), n) for n in (2, 4, 10)] == [2, 4, 4]
    with pytest.raises(ConfigError):
        from privtext.backends import parse_options

        parse_options(PairOptions, {"reject_rank": 1}, where="evolution.learn.pairs")


def test_groups_are_parents_and_prompt_chunks(tmp_path: Path) -> None:
    # 25 completions of label 0's prompt (no parent), cut in chunks of 10; 2 parents with 3 variations each
    texts = [f"r{i}" for i in range(25)] + [f"a{i}" for i in range(3)] + [f"b{i}" for i in range(3)]
    parents: list[str | None] = [None] * 25 + ["pa"] * 3 + ["pb"] * 3
    pop = _pop(texts, parents)
    groups = candidate_groups(pop, 10)
    assert sorted(len(idx) for _, idx in groups) == [3, 3, 5, 10, 10]
    values = np.arange(len(texts), dtype=np.float64)[::-1].copy()  # earlier texts have more votes
    out = preference_pairs(pop, _kept(tmp_path, values.tolist()), PairOptions(reject_rank=2), rng=np.random.default_rng(1))
    assert sorted((p.chosen, p.rejected) for p in out) == sorted(
        [("r0", "r1"), ("r10", "r11"), ("r20", "r21"), ("a0", "a1"), ("b0", "b1")])


def test_equal_counts_identical_texts_and_lone_candidates_make_no_pair(tmp_path: Path) -> None:
    pop = _pop(["x", "y", "z", "w", "same", "same ", "lone"], ["p"] * 4 + ["q"] * 2 + ["r"])
    votes = _kept(tmp_path, [3, 3, 0, 0, 5, 1, 9])
    rng = np.random.default_rng(2)
    assert preference_pairs(pop, votes, PairOptions(reject_rank=2), rng=rng) == []  # 3 vs 3; same text; lone
    got = preference_pairs(pop, votes, PairOptions(reject_rank=3), rng=rng)
    assert [(p.chosen_votes, p.rejected_votes) for p in got] == [(3.0, 0.0)]
    assert preference_pairs(pop, votes, PairOptions(reject_rank=3, min_margin=3.0), rng=rng) == []


def test_wasp_pairs_nearest_against_furthest_per_generator(tmp_path: Path) -> None:
    keeper = _keeper(tmp_path)
    #            A0   A1   A2   B0   B1   A3 (label 1)
    nearest = [4.0, 0.5, 2.0, 1.0, 3.0, 9.0]
    furthest = [0.0, 3.0, 1.0, 2.5, 0.0, 0.0]
    _release(keeper, "votes/round_000", nearest=np.asarray(nearest), furthest=np.asarray(furthest))
    pop = _pop(["A0", "A1", "A2", "B0", "B1", "A3"], [None] * 6, groups=[0, 0, 0, 0, 0, 1],
               generators=["A", "A", "A", "B", "B", "A"])
    hn = ReleasedVotes.kept(keeper, "votes/round_000", "nearest")
    hf = ReleasedVotes.kept(keeper, "votes/round_000", "furthest")
    got = wasp_pairs(pop, hn, hf, PairOptions(pairs_per_group=2), rng=np.random.default_rng(0))
    # A (label 0): better A0 (4), A2 (2); worse among the rest: A1 (3) → one pair A0 > A1 (net 4 vs −2.5);
    # B: better B1 (3), B0 (1); rest of B is empty after both are better → no worse text, no pair for B
    assert [(p.generator, p.chosen, p.rejected, p.chosen_votes, p.rejected_votes) for p in got] == [
        ("A", "A0", "A1", 4.0, -2.5)]
    one = wasp_pairs(pop, hn, hf, PairOptions(pairs_per_group=1), rng=np.random.default_rng(0))
    assert [(p.generator, p.chosen, p.rejected) for p in one] == [("A", "A0", "A1"), ("B", "B1", "B0")]


def test_wasp_pairs_cut_a_large_label_group_into_chunks(tmp_path: Path) -> None:
    """One label group of 25 samples of one generator (an unlabelled corpus): chunks of group_size 10 give a pair
    per chunk (3: 10, 10, 5 samples), each the chunk's top H̃ⁿ against its top H̃ᶠ; without chunks one pair. A
    chunk whose samples all have equal net votes makes none."""
    keeper = _keeper(tmp_path)
    n = 25
    nearest = np.zeros(n)
    furthest = np.zeros(n)
    nearest[[3, 12, 21]] = [5.0, 6.0, 7.0]
    furthest[[7, 15, 24]] = [2.0, 3.0, 4.0]
    _release(keeper, "votes/round_000", nearest=nearest, furthest=furthest)
    pop = _pop([f"t{i}" for i in range(n)], [None] * n, groups=[0] * n, generators=["A"] * n)
    hn = ReleasedVotes.kept(keeper, "votes/round_000", "nearest")
    hf = ReleasedVotes.kept(keeper, "votes/round_000", "furthest")
    got = wasp_pairs(pop, hn, hf, PairOptions(group_size=10), rng=np.random.default_rng(0))
    assert [(p.chosen, p.rejected, p.source) for p in got] == [
        ("t3", "t7", "A/g0/top-q #0"), ("t12", "t15", "A/g0/top-q #1"), ("t21", "t24", "A/g0/top-q #2")]
    whole = wasp_pairs(pop, hn, hf, PairOptions(group_size=None), rng=np.random.default_rng(0))
    assert [(p.chosen, p.rejected, p.source) for p in whole] == [("t21", "t24", "A/g0/top-q")]
    nearest[[3, 12]] = 0.0
    furthest[[7, 15]] = 0.0
    _release(keeper, "votes/round_001", nearest=nearest, furthest=furthest)
    hn = ReleasedVotes.kept(keeper, "votes/round_001", "nearest")
    hf = ReleasedVotes.kept(keeper, "votes/round_001", "furthest")
    assert [p.chosen for p in wasp_pairs(pop, hn, hf, PairOptions(group_size=10), rng=np.random.default_rng(0))] == \
        ["t21"]


# ------------------------------------------------------------------ only released values reach the builder


def test_the_builders_refuse_an_array_and_direct_construction(tmp_path: Path) -> None:
    pop = _pop(["a", "b", "c"], ["p"] * 3)
    with pytest.raises(PrivacyError, match="ReleasedVotes"):
        preference_pairs(pop, np.array([3.0, 1.0, 0.0]), rng=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(PrivacyError, match="never from an array"):
        ReleasedVotes(np.array([3.0, 1.0, 0.0]), ("votes/iter_000",), "kept")
    votes = _kept(tmp_path, [3, 1, 0])
    with pytest.raises(ValueError):
        votes.values[0] = 99.0  # read-only
    with pytest.raises(ConfigError, match="2 released votes for 3"):
        preference_pairs(pop, votes.take([0, 1]), rng=np.random.default_rng(0))


def test_only_a_recorded_and_kept_release_makes_released_votes(tmp_path: Path) -> None:
    keeper = _keeper(tmp_path)
    with pytest.raises(PrivacyError, match="not in the ledger"):
        ReleasedVotes.kept(keeper, "votes/iter_000", "noisy")
    # recorded, but the process died before the value was kept: nothing released to learn from
    r = gaussian_release("votes/iter_001", mechanism="test", noise_multiplier=1.0, contribution=ONE_VOTE_L2,
                         relation=NeighbouringRelation.add_remove(), iteration=1)
    keeper.ledger.record(r)
    with pytest.raises(PrivacyError, match="never kept"):
        ReleasedVotes.kept(keeper, "votes/iter_001", "noisy")
    with pytest.raises(PrivacyError, match="never kept"):
        ReleasedVotes.post_processed(np.zeros(3), keeper, ["votes/iter_001"])
    _release(keeper, "votes/iter_002", noisy=np.array([1.0, 2.0]))
    with pytest.raises(PrivacyError, match="kept no array 'exact'"):
        ReleasedVotes.kept(keeper, "votes/iter_002", "exact")
    assert ReleasedVotes.post_processed([0.5, 1.5], keeper, ["votes/iter_002"]).how == "post_processed"


def _vote_release(tmp_path: Path) -> tuple[Population, ReleaseKeeper, str, np.ndarray]:
    """A real DP nearest-neighbour vote through a ReleaseKeeper: 4 parents × 5 variations; each private record sits
    on a candidate, so the exact counts are known (6, 4, 3, 1, 0 in every group); σ = 2 reorders them."""
    from privtext.mechanisms.voting import dp_vote_histogram

    exact_pattern = [6, 4, 3, 1, 0]
    n_groups, size = 4, 5
    cand = np.eye(n_groups * size, dtype=np.float32)
    private = np.concatenate([np.repeat(cand[g * size + j][None], c, axis=0)
                              for g in range(n_groups) for j, c in enumerate(exact_pattern)])
    texts = [f"variation {j} of parent {g}" for g in range(n_groups) for j in range(size)]
    pop = _pop(texts, [f"p{g}" for g in range(n_groups) for _ in range(size)])
    pop.emb = cand
    keeper = _keeper(tmp_path)
    key = "votes/iter_001"
    r = gaussian_release(key, mechanism="dp_nn_vote_histogram", noise_multiplier=2.0, contribution=ONE_VOTE_L2,
                         relation=NeighbouringRelation.add_remove(), iteration=1)

    def compute():  # the scorer's compute: the only place the exact counts exist
        rel, event = dp_vote_histogram(private, cand, noise_multiplier=2.0, sensitivity=r.sensitivity,
                                       rng=np.random.default_rng(7), backend="numpy")
        return {"noisy": rel.noisy, "raw_noisy": rel.raw_noisy}, event

    keeper.release(r, compute)
    exact = np.tile(np.asarray(exact_pattern, dtype=np.float64), n_groups)
    return pop, keeper, key, exact


def _assert_pairs_follow_the_release(pop: Population, keeper: ReleaseKeeper, key: str) -> None:
    """Each pair's chosen text holds its group's highest KEPT value and the rejected one the R-th highest (by value,
    so ties cannot fool it), and the pair carries exactly those kept values."""
    with np.load(keeper.path_for(keeper.ledger.get(key).release)) as z:
        kept = np.asarray(z["noisy"], dtype=np.float64)
    votes = ReleasedVotes.kept(keeper, key, "noisy")
    opts = PairOptions(reject_rank=3)
    pairs = preference_pairs(pop, votes, opts, rng=np.random.default_rng(3))
    assert pairs, "the release gave no pair: the check would be vacuous"
    index = {t: i for i, t in enumerate(pop.texts)}
    for p in pairs:
        c, r = index[p.chosen], index[p.rejected]
        group = np.sort(kept[[i for i in range(len(pop)) if pop.parent[i] == pop.parent[c]]])[::-1]
        assert (p.chosen_votes, p.rejected_votes) == (kept[c], kept[r])
        assert kept[c] == group[0] and kept[r] == group[reject_position(opts, len(group)) - 1]


def test_pairs_follow_the_kept_release_not_the_exact_counts(tmp_path: Path) -> None:
    pop, keeper, key, exact = _vote_release(tmp_path)
    kept = ReleasedVotes.kept(keeper, key, "noisy").values
    # the precondition that makes the test bite: the noise changed some group's winner
    winners = [(int(np.argmax(exact[s:s + 5])), int(np.argmax(kept[s:s + 5]))) for s in range(0, 20, 5)]
    assert any(a != b for a, b in winners), winners
    _assert_pairs_follow_the_release(pop, keeper, key)
    # the engine's histogram is the kept one: accepted; the exact counts handed over instead: refused
    assert np.array_equal(ReleasedVotes.checked(kept.copy(), keeper, key, "noisy").values, kept)
    with pytest.raises(PrivacyError, match="not the value kept for release 'votes/iter_001'"):
        ReleasedVotes.checked(exact, keeper, key, "noisy")


def test_planted_fault_a_builder_reading_exact_counts_is_caught(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The planted fault: the builder's one read of the votes returns the exact (unreleased) counts. The check of
    the test above must fail on it."""
    pop, keeper, key, exact = _vote_release(tmp_path)
    monkeypatch.setattr(pairs_mod, "released_values", lambda votes, n, what: exact)
    with pytest.raises(AssertionError):
        _assert_pairs_follow_the_release(pop, keeper, key)


# ------------------------------------------------------------------ the guard on the pairs' texts


def _yelp(n_public: int, n_private: int) -> tuple[list[str], list[str]]:
    with shared_file("yelp", "dev.csv").open(encoding="utf-8", newline="") as f:
        texts = [row["text"] for row in csv.DictReader(f)]
    return texts[:n_public], texts[n_public:n_public + n_private]


def test_guard_check_no_false_alarm_on_generated_yelp_and_a_planted_record_caught(tmp_path: Path) -> None:
    from privtext.generate.ngram import NgramGenerator
    from privtext.guard import PrivateGuard

    public, private = _yelp(1500, 300)
    guard = PrivateGuard(private, public)
    gen = NgramGenerator(public=public, guard=guard)
    texts = gen.random(None, 60, rng=np.random.default_rng(0))
    guard.note_generated(texts, 0)  # what the run's prompt-log observer does for every output
    pop = _pop(texts, [f"p{i // 6}" for i in range(60)])
    votes = _kept(tmp_path, np.random.default_rng(1).normal(size=60).tolist())

    def pairs_of(population: Population) -> list[PreferencePair]:
        return preference_pairs(population, votes, PairOptions(reject_rank=2), rng=np.random.default_rng(2))

    pairs = pairs_of(pop)
    assert len(pairs) >= 5
    check_pair_texts(pairs, guard, lines=1)  # generated text: no alarm
    # plant a private review (not in the public reviews) where a candidate was: caught
    planted = next(t for t in private if len(t.split()) >= 20 and t not in public)
    bad = list(texts)
    i = next(j for j, p in enumerate(pairs) if p.chosen in texts)
    bad[texts.index(pairs[i].chosen)] = planted
    with pytest.raises(PrivacyError):
        check_pair_texts(pairs_of(_pop(bad, pop.parent)), guard, lines=1)
