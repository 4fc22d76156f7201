"""The audit's second derivation of every release's sensitivity (privtext.audit.derive): its table against
hand-computed values, the relation it reads from a configuration, and the check that fails a ledger entry whose
recorded Δ differs from the derived one — including the two broken configurations of issue 21, planted back into
a run's ledger (the methods are being fixed; the fixture keeps the old wrong record)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from privtext.audit import audit_run
from privtext.audit.derive import (
    Relation,
    check_release,
    expected,
    relation_of,
    release_kind,
    topq_record_sensitivity,
)
from privtext.errors import ConfigError
from privtext.privacy.events import gaussian_event
from privtext.privacy.release import Release

SQ2 = math.sqrt(2.0)


class _Section:
    def __init__(self, **opts: Any):
        self.opts = opts

    def options(self) -> dict[str, Any]:
        return dict(self.opts)


def _config(method: str, **opts: Any) -> Any:
    return SimpleNamespace(method=method, **{method: _Section(**opts)})


ADD, REP = Relation("add_remove"), Relation("replace_one")
K5, USER8, NORM = Relation("secret_group", group=5), Relation("user", cap=8), Relation("user", normalised=True)


@pytest.mark.parametrize(("kind", "config", "relation", "want"), [
    ("votes", _config("augpe"), ADD, 1.0),
    ("votes", _config("augpe"), REP, SQ2),
    ("votes", _config("augpe"), K5, 5.0),
    ("votes", _config("augpe"), USER8, 8.0),
    ("votes", _config("augpe"), NORM, 1.0),
    ("topq", _config("wasp", q=1), ADD, SQ2),
    ("topq", _config("wasp", q=2), ADD, math.sqrt(2.5)),
    ("topq", _config("wasp", q=3), ADD, math.sqrt(2.625)),
    ("topq", _config("wasp", q=4), USER8, 8 * math.sqrt(2 * (1 + 1 / 4 + 1 / 16 + 1 / 64))),
    ("topq", _config("wasp", q=4), NORM, 1.0),
    ("labels_gaussian", _config("augpe"), K5, 5.0),
    # issue 36: normalised votes do not normalise the other releases: m (the cap) for them, not 1
    ("labels_gaussian", _config("augpe"), Relation("user", cap=8, normalised=True), 8.0),
    ("vocabulary", _config("augpe", vocabulary_r=5), Relation("user", cap=8, normalised=True), 40.0),
    ("labels_gaussian", _config("augpe"), REP, SQ2),
    ("labels_laplace", _config("dpkps"), ADD, 1.0),
    ("labels_laplace", _config("dpkps"), REP, 2.0),  # issue 21, item 2: the replace-one label shares
    ("vocabulary", _config("augpe", vocabulary_r=5), K5, 25.0),  # issue 21, item 1: k·r, not r
    ("vocabulary", _config("dpkps", r=10), ADD, 10.0),
    ("vocabulary", _config("dpkps", r=10), REP, 20.0),
    ("term_histogram", _config("dpkps", weighting="mean"), REP, 2.0),
    ("term_histogram", _config("dpkps", weighting="sum", max_points=3), ADD, 3.0),
    ("rff_sketch", _config("dpkps", n_features=256), ADD, SQ2 * 256),
    ("rff_sketch", _config("dpkps", n_features=256), REP, 2 * SQ2 * 256),
    ("rff_sketch", _config("dpkps", n_features=64, noise="paper"), ADD, 2 * SQ2 * 64),
    ("clustering", _config("secpe", sample="independent"), ADD, 1.0),
    ("clustering", _config("secpe", sample="shared"), ADD, SQ2),
    ("dpsgd", _config("dpft", max_grad_norm=0.5), ADD, 0.5),
    ("dpsgd", _config("dpft"), ADD, 1.0),  # DPFTOptions' default C
])
def test_the_derivation_table(kind: str, config: Any, relation: Relation, want: float) -> None:
    assert expected(kind, config, relation).sensitivity == pytest.approx(want, rel=1e-12)


def test_a_release_the_parties_do_not_normalise_needs_the_cap() -> None:
    for kind in ("labels_gaussian", "labels_laplace", "vocabulary"):
        with pytest.raises(ConfigError, match="no record cap"):
            expected(kind, _config("augpe"), NORM)


def test_topq_sensitivity_known_values_and_limit() -> None:
    """Δ_Q = √(2Σ_{j<Q} 4^−j): √2, √2.5, √2.625, …, tending to √(8/3) (WASP Eq 4-5; the paper's Thm D.2 says 4)."""
    assert [topq_record_sensitivity(q) for q in (1, 2, 3)] == pytest.approx([SQ2, math.sqrt(2.5), math.sqrt(2.625)])
    assert topq_record_sensitivity(40) == pytest.approx(math.sqrt(8 / 3), rel=1e-12)
    assert all(topq_record_sensitivity(q) < 4 for q in range(1, 30))


def test_the_relation_comes_from_the_configuration_and_the_stated_group_size() -> None:
    stated = {"assumed_public": [{"name": "secret_group_size", "value": 4, "why": "..."}]}
    assert relation_of(_config("augpe", sensitivity="secret_group"), stated) == Relation("secret_group", group=4)
    with pytest.raises(ConfigError, match="secret_group_size"):
        relation_of(_config("augpe", sensitivity="secret_group"), {"assumed_public": []})
    assert relation_of(_config("dpkps", neighbouring="replace_one")).kind == "replace_one"
    assert relation_of(_config("augpe", parties={"level": "user", "max_records": 6})) == Relation("user", cap=6)
    assert relation_of(_config("wasp", parties={"level": "user", "normalise": True})).normalised
    assert relation_of(_config("wasp")) == ADD
    with pytest.raises(ConfigError):
        Relation("user")  # neither a cap nor normalised votes


def _votes(sensitivity: float, z: float = 2.0, std: float | None = None) -> Release:
    return Release(key="votes/iter_000", mechanism="dp_nn_vote_histogram", event=gaussian_event(z),
                   noise_std=z * sensitivity if std is None else std, sensitivity=sensitivity)


def test_a_recorded_sensitivity_that_differs_fails_whichever_way() -> None:
    cfg = _config("augpe")
    ok = check_release(_votes(5.0), cfg, K5)
    assert ok is not None and ok.passed and ok.implied == pytest.approx(ok.claim)
    low = check_release(_votes(1.0), cfg, K5)  # a group of 5 noised as one record: μ 5× the claim
    assert low is not None and not low.passed and low.implied == pytest.approx(5 * low.claim)
    high = check_release(_votes(10.0), cfg, K5)  # over-noised: privacy holds, but the derivations disagree
    assert high is not None and not high.passed and high.implied < high.claim
    short = check_release(_votes(5.0, std=5.0), cfg, K5)  # Δ right, noise std below z·Δ
    assert short is not None and not short.passed


def test_kinds_and_unknown_mechanisms() -> None:
    assert release_kind("laplace", "dpkps/kde/m=2") == "rff_sketch"
    assert release_kind("dp_vocabulary", "vocabulary") == "vocabulary"
    assert release_kind("federated_topq_sum", "votes/round_000") == "topq"
    assert release_kind("something_new", "x") is None
    assert release_kind("dpsgd", "dpsgd/epoch_000") == "dpsgd"


def test_dpsgd_releases_are_derived_from_the_clipping_norm() -> None:
    """A dpft epoch as dpsgd_release records it passes; a ledger entry whose Δ or noise is not C / σC fails; the
    derivation refuses relations the sampled-Gaussian accounting does not cover."""
    from privtext.mechanisms.dpsgd import dpsgd_contribution
    from privtext.privacy.relation import NeighbouringRelation
    from privtext.privacy.release import dpsgd_release

    cfg = _config("dpft", max_grad_norm=0.7)
    assert relation_of(cfg) == ADD
    r = dpsgd_release("dpsgd/epoch_000", noise_multiplier=0.9, sampling_rate=0.05, steps=20,
                      contribution=dpsgd_contribution(0.7), relation=NeighbouringRelation("add_remove"))
    d = check_release(r, cfg, ADD)
    assert d is not None and d.passed and d.derived == pytest.approx(0.7) and d.claim == pytest.approx(1 / 0.9)
    wrong_c = check_release(r, _config("dpft", max_grad_norm=1.4), ADD)  # clipped at 1.4, recorded as 0.7
    assert wrong_c is not None and not wrong_c.passed and wrong_c.implied == pytest.approx(2 / 0.9)
    half = Release(key=r.key, mechanism=r.mechanism, event=r.event, noise_std=r.noise_std / 2,
                   sensitivity=r.sensitivity, meta=r.meta)
    d2 = check_release(half, cfg, ADD)
    assert d2 is not None and not d2.passed
    with pytest.raises(ConfigError, match="add/remove"):
        expected("dpsgd", cfg, REP)


# ----------------------------------------------------------------------------- planted faults of issue 21


def _corpora() -> tuple[Any, Any]:
    from privtext.data.corpus import Corpus
    from privtext.testing.tinyrun import toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=150)
    texts = [t + (f" Call me at (212) 555-01{i % 5:02d}." if i % 3 == 0 else "") for i, t in enumerate(priv.texts)]
    return Corpus(priv.ids, tuple(texts), priv.labels, name="priv"), pub


def test_issue21_broken_configurations_fail_the_derivation(tmp_path: Path) -> None:
    """The two broken configurations of issue 21, with their old ledger record planted back, fail the
    derivation check whatever the method code now records; the other releases of the same runs pass."""
    from privtext.data.corpus import Corpus
    from privtext.testing.audit_faults import plant_old_label_sensitivity, plant_old_vocabulary_sensitivity
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub = _corpora()
    run = tiny_run(tmp_path / "sg", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                   augpe={"sensitivity": "secret_group", "vocabulary_prompts": True, "vocabulary_r": 3})
    assert plant_old_vocabulary_sensitivity(run) == 1
    res = {r.mechanism.split(" ")[0]: r for r in audit_run(run, attack=False) if r.check == "derivation"}
    assert not res["vocabulary"].passed and res["vocabulary"].claim == pytest.approx(3 * 3)
    assert res["votes"].passed

    p2, pool, _ = toy_corpora(rng=np.random.default_rng(5), n_private=60, n_pool=150)
    run2 = tiny_run(tmp_path / "dpkps", private=p2, public=Corpus(pool.ids, pool.texts, {}, name="pool"),
                    method="dpkps", num_samples=16, privacy={"epsilon": 6.0},
                    data={"label_values": {"category": ["food", "hotel"], "mood": ["good", "bad"]}},
                    evolution={"label_distribution": {"kind": "dp", "budget_fraction": 0.1}},
                    dpkps={"vocab_size": 20, "length": 4, "vocabulary_min_count": 3, "neighbouring": "replace_one"})
    assert plant_old_label_sensitivity(run2) == 1
    res2 = {r.mechanism.split(" ")[0]: r for r in audit_run(run2, attack=False) if r.check == "derivation"}
    assert not res2["labels_laplace"].passed and res2["labels_laplace"].claim == 2.0
    assert res2["vocabulary"].passed and res2["term_histogram"].passed


def test_correct_runs_pass_the_derivation(tmp_path: Path) -> None:
    from privtext.testing.tinyrun import tiny_run

    priv, pub = _corpora()
    run = tiny_run(tmp_path / "a", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                   augpe={"sensitivity": "secret_group"}, evolution={"label_distribution": {"kind": "dp"}})
    res = audit_run(run, attack=False)  # the derivation and the calibration, no attack
    assert {r.mechanism.split(" ")[0] for r in res} == {"votes", "labels_gaussian"} and all(r.passed for r in res)
    assert sorted(r.check for r in res) == ["calibration", "calibration", "derivation", "derivation"]


def test_a_clustering_without_noise_or_secret_records_nothing_to_compare() -> None:
    """SecPE with no declared secret found releases clusterings with σ = 0 that hold no private record: the
    derivation has no recorded Δ to compare (and the statement says the run is not private)."""
    from privtext.mechanisms.clustering import clustering_event

    r = Release(key="clusters/iter_000", mechanism="secret_clustering", event=clustering_event(0.0), noise_std=0.0,
                sensitivity=1.0, secret_events={}, meta={"sample": "independent"})
    d = check_release(r, _config("secpe", sample="independent"), ADD)
    assert d is not None and d.passed and math.isinf(d.claim)
    shared = Release(key="clusters/iter_000", mechanism="secret_clustering", event=clustering_event(2.0, "shared"),
                     noise_std=2.0, sensitivity=1.0, meta={"sample": "shared"})
    d = check_release(shared, _config("secpe", sample="shared"), ADD)
    assert d is not None and d.passed and d.recorded == pytest.approx(SQ2)
