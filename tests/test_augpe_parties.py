"""Aug-PE with several data holders (``augpe.parties``): the PrE-Text setting, WASP §5's federated baseline.

Real tiny runs (scripted generator, hashing embedder) on the path users run:

* the parties' exact counts add up to the single-holder vote histogram (the union property the event rests on);
* plain aggregation: released − Σ_l exact party counts, χ² against the ledger's noise std over every bin of
  every release; the ledger's event is Aug-PE's calibration for T releases; privacy.json says NOT SECURELY
  AGGREGATED and lists the survivors of every release;
* drop-outs (t = 2 of 3): party 2 left out, the sum over parties 0, 1 carries σ√(2/2)=σ;
* user level: a cap m gives Δ = m (noise std m·σ in the ledger); normalised votes Δ = 1, χ² against the sum of
  the parties' unit vectors;
* SecAgg+ on loopback (skipped without flwr): the sum passes the same χ²;
* bad ``augpe.parties`` sections are refused with an error naming the key.

Mutations checked by hand (each made a test here fail): the noise std passed to the parties by
``FederatedVoteScorer`` scaled by 1e-9 (χ² ratio ~0); ``normalise`` ignored in ``party_nn_votes``;
the user-level Δ = m replaced by 1 in ``AugPE.group_sensitivity``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from privtext.data import Corpus
from privtext.errors import ConfigError
from privtext.federated import dirichlet_split
from privtext.federated.topq import PartyVotes
from privtext.federated.votes import federated_nn_votes, party_nn_votes
from privtext.mechanisms.voting import nearest_votes
from privtext.rundir import RunDir
from privtext.testing.tinyrun import run_private_side, tiny_run, toy_corpora

P_TAIL = 1e-4
T = 3


def _corpora(seed: int = 0) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=90, n_pool=200,
                               topics=("food", "hotel", "shop"))
    return priv, pub


def _run(tmp: Path, name: str, parties: dict[str, Any], **kw: Any) -> Path:
    priv, pub = _corpora()
    kw.setdefault("privacy", {"epsilon": 4.0, "delta": 1e-5})
    return tiny_run(tmp / name, private=priv, public=pub, method="augpe", num_samples=40, iterations=T,
                    augpe={"parties": parties}, **kw)


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in RunDir(run).ledger.read_text().splitlines() if x.strip()]


def _setup(run: Path) -> tuple[RunDir, np.ndarray, np.ndarray, list[np.ndarray]]:
    rd, cfg, pe, pg = run_private_side(run)
    pt = cfg["augpe"]["parties"]
    split = dirichlet_split([str(g) for g in pg], pt["count"], alpha=pt.get("alpha", 1.0), seed=cfg["seed"])
    return rd, pe, pg, split


def _exact(run: Path, *, parties: list[int] | None = None, normalise: bool = False) -> dict[str, np.ndarray]:
    """Σ over ``parties`` of each party's exact vote counts for every release, recomputed from the checkpoints."""
    rd, pe, pg, split = _setup(run)
    out = {}
    for rec in _ledger(run):
        pop, vote_emb = rd.iteration(rec["iteration"]).load_population()
        ve = pop.emb if vote_emb is None else vote_emb
        total = np.zeros(len(pop))
        for k in (range(len(split)) if parties is None else parties):
            ix = split[k]
            v = party_nn_votes(PartyVotes(pe[ix], pg[ix]), candidate_emb=ve, candidate_groups=pop.group,
                               center=ve.mean(axis=0), normalise=normalise)
            total += v
        out[rec["key"]] = total
    return out


def _chi2(run: Path, exact: dict[str, np.ndarray], std_factor: float = 1.0) -> float:
    rd = RunDir(run)
    z = []
    for rec in _ledger(run):
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as v:
            z.append((v["raw_noisy"] - exact[rec["key"]]) / (rec["noise_std"] * std_factor))
    zz = np.concatenate(z)
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], zz.size)
    ratio = float((zz**2).mean())
    assert lo <= float((zz**2).sum()) <= hi, f"variance ratio {ratio:.3f} over {zz.size} bins"
    return ratio


def _sigma() -> float:
    from privtext.privacy import Budget, gaussian_noise_multiplier

    return gaussian_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=T)


def test_party_counts_add_up_to_the_single_holder_histogram(any_seed: int) -> None:
    rng = np.random.default_rng(any_seed)
    pe = rng.standard_normal((300, 16)).astype(np.float32)
    pg = rng.integers(0, 3, 300)
    ce = rng.standard_normal((50, 16)).astype(np.float32)
    cg = rng.integers(0, 3, 50)
    center = ce.mean(axis=0)
    whole, _ = nearest_votes(pe, ce, private_groups=pg, candidate_groups=cg, center=center)
    split = dirichlet_split([str(g) for g in pg], 4, alpha=0.5, seed=any_seed)
    total = sum(party_nn_votes(PartyVotes(pe[ix], pg[ix]), candidate_emb=ce, candidate_groups=cg, center=center)
                for ix in split)
    assert np.array_equal(total, whole.astype(np.float64))
    # normalised: every non-empty party contributes a unit vector
    for ix in split:
        v = party_nn_votes(PartyVotes(pe[ix], pg[ix]), candidate_emb=ce, candidate_groups=cg, normalise=True)
        assert np.linalg.norm(v) == pytest.approx(1.0 if len(ix) else 0.0)


def test_federated_votes_sum_is_exact_up_to_quantisation_without_noise() -> None:
    rng = np.random.default_rng(3)
    pe = rng.standard_normal((120, 8)).astype(np.float32)
    pg = np.zeros(120, dtype=np.int64)
    ce = rng.standard_normal((30, 8)).astype(np.float32)
    cg = np.zeros(30, dtype=np.int64)
    split = dirichlet_split(["0"] * 120, 3, alpha=1.0, seed=0)
    parties = [PartyVotes(pe[ix], pg[ix]) for ix in split]
    whole, _ = nearest_votes(pe, ce)
    r = federated_nn_votes(parties, ce, cg, sigma=1e-9, value_bound=1024.0, aggregation="plain", seed=0,
                           reproducible=True)
    assert np.abs(r.values - whole).max() <= r.max_error + 1e-6
    assert r.survivors == [0, 1, 2]
    with pytest.raises(ConfigError, match="at least one candidate"):
        federated_nn_votes(parties, ce[:0], cg[:0], sigma=1.0, value_bound=1024.0, aggregation="plain")


def test_plain_parties_release_the_sum_with_the_recorded_noise_and_event(tmp_path: Path) -> None:
    run = _run(tmp_path, "plain", {"count": 3, "aggregation": "plain"})
    recs = _ledger(run)
    assert [r["key"] for r in recs] == [f"votes/iter_{t:03d}" for t in range(T)]
    sigma = _sigma()
    for rec in recs:
        assert rec["mechanism"] == "federated_nn_vote_sum"
        assert rec["noise_std"] == pytest.approx(sigma)
        assert rec["sensitivity"] == 1.0
    ratio = _chi2(run, _exact(run))
    assert 0.5 < ratio < 2.0
    priv = json.loads(RunDir(run).privacy.read_text())
    assert "NOT SECURELY AGGREGATED" in priv["headline"] or "NOT securely aggregated" in priv["headline"]
    assert priv["parameters"]["parties"]["securely_aggregated"] is False
    rounds = priv["released"]["parties"]["rounds"]
    assert [r["iteration"] for r in rounds] == list(range(T))
    assert all(r["survivors"] == [0, 1, 2] for r in rounds)
    # the party sizes are private: only in private/diagnostics.json
    assert "party_sizes" not in json.dumps(priv)


def test_drop_out_leaves_the_party_out_and_keeps_the_recorded_std(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVTEXT_PARTY_DROP", "2:collect_masked_vectors")
    run = _run(tmp_path, "drop", {"count": 3, "aggregation": "plain", "min_survivors": 2})
    _chi2(run, _exact(run, parties=[0, 1]))
    priv = json.loads(RunDir(run).privacy.read_text())
    assert all(r["survivors"] == [0, 1] for r in priv["released"]["parties"]["rounds"])


def test_user_level_cap_and_normalised_votes(tmp_path: Path) -> None:
    sigma = _sigma()
    capped = _run(tmp_path, "cap", {"count": 3, "aggregation": "plain", "level": "user", "max_records": 40})
    for rec in _ledger(capped):
        assert rec["sensitivity"] == 40.0
        assert rec["noise_std"] == pytest.approx(40 * sigma)
    priv = json.loads(RunDir(capped).privacy.read_text())
    assert "one data party with all its records" in priv["headline"]
    norm = _run(tmp_path, "norm", {"count": 3, "aggregation": "plain", "level": "user", "normalise": True})
    for rec in _ledger(norm):
        assert rec["sensitivity"] == 1.0
    _chi2(norm, _exact(norm, normalise=True))


def test_secagg_parties(tmp_path: Path) -> None:
    pytest.importorskip("flwr")
    priv, pub = _corpora()
    run = tiny_run(tmp_path / "secagg", private=priv, public=pub, method="augpe", num_samples=30, iterations=1,
                   privacy={"epsilon": 4.0, "delta": 1e-5}, augpe={"parties": {"count": 3}})
    recs = _ledger(run)
    assert len(recs) == 1 and recs[0]["meta"]["aggregation"] == "secagg"
    _chi2(run, _exact(run))
    priv_json = json.loads(RunDir(run).privacy.read_text())
    assert priv_json["parameters"]["parties"]["securely_aggregated"] is True
    assert "NOT" not in priv_json["headline"]


@pytest.mark.parametrize(("parties", "extra", "match"), [
    ({"count": 3, "files": ["a.csv"]}, {}, "exactly one of count"),
    ({"count": 3, "level": "user"}, {}, "needs max_records"),
    ({"count": 3, "normalise": True}, {}, "user-level options"),
    ({"count": 3}, {"sensitivity": "secret_group"}, "sensitivity: secret_group"),
    ({"count": 3}, {"vocabulary_prompts": True}, "vocabulary_prompts"),
    ({"count": 3}, {"evolution": {"label_distribution": {"kind": "dp"}}}, "label histogram"),
    ({"count": 3, "aggregation": "secagg", "min_survivors": 1}, {}, "min_survivors must be in"),
])
def test_bad_parties_sections_are_refused_before_anything_is_written(
        tmp_path: Path, parties: dict[str, Any], extra: dict[str, Any], match: str) -> None:
    priv, pub = _corpora()
    evolution = extra.pop("evolution", None)
    kw: dict[str, Any] = {"evolution": {"num_samples": 20, "iterations": 1, **evolution}} if evolution else {}
    with pytest.raises(ConfigError, match=match):
        tiny_run(tmp_path / "bad", private=priv, public=pub, method="augpe", iterations=1,
                 privacy={"epsilon": 4.0, "delta": 1e-5}, augpe={"parties": parties, **extra}, **kw)
    assert not (tmp_path / "bad").exists()


def test_audit_of_a_federated_run_audits_the_central_event(tmp_path: Path) -> None:
    """``privtext audit`` on a parties run checks the recorded Δ against the derived one and attacks the parties'
    sum as the method runs it (each party adding its noise share; privtext.audit.audit_federated_sum)."""
    from privtext.audit import audit_run

    run = _run(tmp_path, "audit", {"count": 3, "aggregation": "plain"})
    res = audit_run(run, trials=400, rng=np.random.default_rng(0), alpha=1e-3)
    assert [r.check for r in res] == ["derivation", "calibration", "attack"] and all(r.passed for r in res), res
    assert res[2].mechanism.split(" ")[0] == "federated_nn_vote_sum"
    rec = _ledger(run)[0]
    assert res[0].estimate == res[0].claim == rec["sensitivity"] == 1.0
