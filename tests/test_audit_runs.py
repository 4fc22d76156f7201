"""``privtext audit RUN_DIR`` on whole runs (``pytest -m audit``): today's correct runs of every method pass; the
planted faults fail — halved noise at σ = 10, the two broken configurations of issue 21 (their old ledger record
planted back), halved noise in user-level parties' sums, SecPE's secret holders voting exactly — and the trial
counts catch halved noise with probability ≥ 0.95, measured by repetition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom
from typer.testing import CliRunner

from privtext import cli
from privtext.audit import audit_run
from privtext.cli.app import app
from privtext.data.corpus import Corpus
from privtext.testing.audit_faults import scaled_noise
from privtext.testing.tinyrun import tiny_run, toy_corpora

pytestmark = pytest.mark.audit


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


def _cli(run: Path, *extra: str) -> Any:
    cli._mount()
    return CliRunner().invoke(app, ["audit", str(run), "--secret-trials", "3000", *extra])


def test_halved_noise_at_sigma_10_fails_privtext_audit(tmp_path: Path) -> None:
    """σ = 10: one record is a shift of 0.1 noise deviations; the audit's canary is 15 records (claim μ = 1.5), so
    halved noise (true μ = 3) is caught in ~110 trials. The same run and audit without the fault pass."""
    priv, pub = _corpora()
    with scaled_noise(0.5):
        bad = tiny_run(tmp_path / "bad", private=priv, public=pub, iterations=2, privacy={"noise_multiplier": 10.0})
        res = _cli(bad, "--seed", "1", "--json")
    assert res.exit_code == 1, res.output
    (votes,) = [a for a in json.loads(res.output)["audits"] if a["mechanism"].startswith("dp_vote_histogram")]
    assert "z=10" in votes["mechanism"] and votes["details"]["group"] == 15 and not votes["passed"]
    assert votes["trials"] == 111  # planned: catches halved noise w.p. ≥ 0.95 at alpha 1e-3
    ok = tiny_run(tmp_path / "ok", private=priv, public=pub, iterations=2, privacy={"noise_multiplier": 10.0})
    res = _cli(ok, "--seed", "1")
    assert res.exit_code == 0, res.output


def test_issue21_broken_configurations_fail_privtext_audit(tmp_path: Path) -> None:
    """Both broken configurations of issue 21, their old record planted back into the ledger: the derivation
    fails, and so does the attack (a canary of k documents / a replaced record, at the recorded scale)."""
    from privtext.testing.audit_faults import plant_old_label_sensitivity, plant_old_vocabulary_sensitivity

    priv, pub = _corpora(secrets=True)
    sg = tiny_run(tmp_path / "sg", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                  augpe={"sensitivity": "secret_group", "vocabulary_prompts": True, "vocabulary_r": 3})
    assert plant_old_vocabulary_sensitivity(sg) == 1
    res = _cli(sg, "--seed", "2", "--json")
    assert res.exit_code == 1, res.output
    fails = [a["mechanism"].split(" ")[0] for a in json.loads(res.output)["audits"] if not a["passed"]]
    assert sorted(fails) == ["dp_vocabulary", "vocabulary"], fails

    dp = _dpkps(tmp_path / "dpkps", neighbouring="replace_one")
    assert plant_old_label_sensitivity(dp) == 1
    res = _cli(dp, "--seed", "3", "--json")
    assert res.exit_code == 1, res.output
    fails = [a["mechanism"].split(" ")[0] for a in json.loads(res.output)["audits"] if not a["passed"]]
    # the vocabulary (2r) and the term histogram (2) are right
    assert sorted(fails) == ["labels_laplace", "laplace_label_histogram"], fails


def test_todays_correct_runs_pass(tmp_path: Path) -> None:
    """Every method and relation as built: Aug-PE with secret groups and DP labels, WASP, DP-KPS (add/remove,
    replace-one, the RFF sketches), SecPE (hybrid), Aug-PE and WASP parties at user level."""
    priv, pub = _corpora()
    sp, _ = _corpora(secrets=True)
    gens = [{"backend": "scripted", "name": "a", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
            {"backend": "scripted", "name": "b", "vocabulary": ["thing", "stuff", "went", "okay"]}]
    runs = {
        "augpe": tiny_run(tmp_path / "augpe", private=sp, public=pub, iterations=2,
                          privacy={"epsilon": 4.0, "delta": 1e-5}, augpe={"sensitivity": "secret_group"},
                          evolution={"label_distribution": {"kind": "dp"}}),
        "wasp": tiny_run(tmp_path / "wasp", private=priv, public=pub, method="wasp", num_samples=40, iterations=3,
                         generators=gens, privacy={"epsilon": 4.0, "delta": 1e-5}, wasp={"q": 3, "in_context": 4}),
        "dpkps": _dpkps(tmp_path / "dpkps"),
        # replace-one without DP labels (with them, its label histogram is issue 21's bug on main)
        "dpkps-replace": _dpkps(tmp_path / "dpkps-r", labels="uniform", neighbouring="replace_one"),
        "dpkps-rff": _dpkps(tmp_path / "dpkps-rff", sequence="iterative"),
        "secpe": tiny_run(tmp_path / "secpe", private=sp, public=pub, method="secpe", iterations=2),
        "augpe-user": tiny_run(tmp_path / "au", private=priv, public=pub, iterations=2,
                               privacy={"epsilon": 4.0, "delta": 1e-5},
                               augpe={"parties": {"count": 3, "aggregation": "plain", "level": "user",
                                                  "max_records": 4}}),
        "wasp-user": tiny_run(tmp_path / "wu", private=priv, public=pub, method="wasp", num_samples=40,
                              iterations=3, generators=gens[:1], privacy={"epsilon": 4.0, "delta": 1e-5},
                              wasp={"q": 2, "parties": {"count": 3, "aggregation": "plain", "level": "user",
                                                        "normalise": True}}),
    }
    seen: set[str] = set()
    for name, run in runs.items():
        res = audit_run(run, rng=np.random.default_rng(len(name)), secret_trials=3000)
        assert res and all(r.passed for r in res), (name, [r.line() for r in res if not r.passed])
        seen.update(r.mechanism.split(" ")[0] for r in res)
    assert {"dp_vote_histogram", "dp_label_histogram", "dp_topq_histograms", "dp_vocabulary", "dp_term_histogram",
            "dp_kde_sketch", "laplace_label_histogram", "secret_clustering", "secpe_hybrid_votes",
            "federated_nn_vote_sum", "federated_topq_sum"} <= seen, seen


def test_halved_noise_in_user_level_party_sums_fails(tmp_path: Path) -> None:
    """User level (3 parties of ≤ 4 records, t = 3): the canary is g ≤ t parties (each adds its own noise share);
    halved noise in every party's share is caught."""
    priv, pub = _corpora()
    with scaled_noise(0.5):
        run = tiny_run(tmp_path / "au", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5},
                       augpe={"parties": {"count": 3, "aggregation": "plain", "level": "user", "max_records": 4}})
        res = audit_run(run, rng=np.random.default_rng(4))
    bad = [r for r in res if not r.passed]
    assert [r.mechanism.split(" ")[0] for r in bad] == ["federated_nn_vote_sum"], [r.line() for r in res]


def test_secpe_secret_holders_voting_exactly_fails() -> None:
    """Issue 21's mutant: the hybrid scorer lets secret holders vote exactly with the secret-free records."""
    from privtext.audit import audit_secpe_hybrid
    from privtext.methods.secpe import ClusterScorer

    class HoldersVoteToo(ClusterScorer):
        def __init__(self, **kw: Any):
            kw["direct_emb"] = np.concatenate([kw["direct_emb"], kw["private_emb"]])
            kw["direct_groups"] = np.concatenate([kw["direct_groups"], kw["private_groups"]])
            super().__init__(**kw)

    ok = audit_secpe_hybrid(rho=1.0, sigma=2.0, trials=1000, rng=np.random.default_rng(5))
    assert ok.passed, ok.line()
    bad = audit_secpe_hybrid(rho=1.0, sigma=2.0, trials=1000, rng=np.random.default_rng(5),
                             scorer_factory=HoldersVoteToo)
    assert not bad.passed and bad.estimate > 0.9, bad.line()


def _catch_rate(audit: Any, reps: int) -> int:
    with scaled_noise(0.5):
        return sum(not audit().passed for _ in range(reps))


@pytest.mark.parametrize("which", ["votes", "labels_laplace", "rff"])
def test_planned_trials_catch_halved_noise_with_probability_095(which: str) -> None:
    """Repeated audits of a mechanism drawing half its noise (from OS entropy, as in a run): the share caught is
    consistent with ≥ 0.95 (one-sided binomial test at level 1e-3)."""
    from privtext.audit import audit_laplace_label_histogram, audit_rff_sketch, audit_vote_histogram

    audits = {
        "votes": (lambda: audit_vote_histogram(10.0, group="auto", trials=None, alpha=1e-3), 60),
        "labels_laplace": (lambda: audit_laplace_label_histogram(0.6, relation="replace_one", group="auto",
                                                                 trials=None, alpha=1e-3), 60),
        "rff": (lambda: audit_rff_sketch(5.0, n_features=64, alpha=1e-3), 20),
    }
    audit, reps = audits[which]
    caught = _catch_rate(audit, reps)
    assert binom.cdf(caught, reps, 0.95) > 1e-3, (which, caught, reps)


def test_audit_json_and_exit_code(tmp_path: Path) -> None:
    priv, pub = _corpora()
    run = tiny_run(tmp_path / "r", private=priv, public=pub, iterations=2, privacy={"epsilon": 4.0, "delta": 1e-5})
    res = _cli(run, "--json", "--seed", "6")
    out = json.loads(res.output)
    assert res.exit_code == 0 and out["passed"]
    assert {a["check"] for a in out["audits"]} == {"derivation", "calibration", "attack"}
