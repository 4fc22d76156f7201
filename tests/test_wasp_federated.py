"""WASP with several data holders (wasp.parties; WASP §4.7, Alg 2) and WASP's resume after a kill.

Real tiny runs (scripted generators, hashing embedder) on the path users run:

* plain aggregation (default suite): released − exact sum over the parties' records, χ² against the ledger's
  noise std; the ledger's event equals the calibration; drop-outs: with t = 2 of L = 3 the round with all three
  carries σ√(3/2), a round with party 2 dropped carries σ over parties 0 and 1 only, and too few survivors
  release nothing; user level (cap m: Δ = m·Δ_Q; normalised votes: Δ = 1); privacy.json says "NOT SECURELY
  AGGREGATED";
* SecAgg+ on loopback, 3 parties (one run in the default suite; the plain = SecAgg+ equality under
  reproducible noise and a drop-out under ``-m slow``);
* resume: SIGKILL after round 1's value reached disk, or between recording round 2's event and drawing it;
  ``privtext resume`` reuses every released value byte for byte, adds no ledger line twice and ends with the
  synthetic set of an uninterrupted run (reproducible noise).

Mutations checked by hand (each made a test here fail): party noise std σ/√t → σ/√L in noise.py (drop-out χ²);
``m * topq_sensitivity`` → ``topq_sensitivity`` at user level (event test); ``normalise`` ignored in
``party_topq`` (normalised χ²). (The resume test runs with reproducible noise, so a redrawn value would equal
the saved one; that values are never redrawn under CSPRNG noise is tests/test_faults.py's job for the keeper.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import stats

from privtext.data import Corpus, write_corpus
from privtext.errors import AggregationError
from privtext.federated import dirichlet_split
from privtext.mechanisms.topq import topq_histograms, topq_sensitivity
from privtext.rundir import RunDir
from privtext.testing.tinyrun import run_private_side, tiny_run, toy_corpora

P_TAIL = 1e-4
Q = 3
GENS = [{"backend": "scripted", "name": "topical", "vocabulary": ["pizza", "room", "store", "great", "menu"]},
        {"backend": "scripted", "name": "filler", "vocabulary": ["thing", "stuff", "went", "okay"]}]


def _corpora(seed: int = 0) -> tuple[Corpus, Corpus]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(seed), n_private=60, n_pool=200,
                               topics=("food", "hotel", "shop"))
    return priv, pub


def _run(tmp: Path, name: str, parties: dict[str, Any], iterations: int = 4, num_samples: int = 90,
         **kw: Any) -> Path:
    priv, pub = _corpora()
    kw.setdefault("privacy", {"epsilon": 4.0, "delta": 1e-5})
    return tiny_run(tmp / name, private=priv, public=pub, method="wasp", num_samples=num_samples, iterations=iterations,
                    generators=GENS, wasp={"q": Q, "in_context": 4, "parties": parties}, **kw)


def _ledger(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in RunDir(run).ledger.read_text().splitlines() if x.strip()]


def _party_exact(run: Path, *, parties: list[int] | None = None, cap: int | None = None,
                 normalise: bool = False) -> dict[str, np.ndarray]:
    """Σ over ``parties`` (all by default) of the exact party vectors [Hⁿ_l, Hᶠ_l] of every release, recomputed
    from the checkpoints, the private data and the public split parameters."""
    rd, cfg, pe, pg = run_private_side(run)
    pt = cfg["wasp"]["parties"]
    split = dirichlet_split([str(g) for g in pg], pt["count"], alpha=pt.get("alpha", 1.0), seed=cfg["seed"])
    assert cap is None or all(len(ix) <= cap for ix in split), "the test's split must not need capping"
    out = {}
    for rec in _ledger(run):
        pop, _ = rd.iteration(rec["iteration"]).load_population()
        total = np.zeros(2 * len(pop))
        for k in (range(len(split)) if parties is None else parties):
            ix = split[k]
            hn, hf = topq_histograms(pe[ix], pop.emb, q=Q, private_groups=pg[ix], candidate_groups=pop.group)
            v = np.concatenate([hn, hf])
            if normalise and np.linalg.norm(v) > 0:
                v = v / np.linalg.norm(v)
            total += v
        out[rec["key"]] = total
    return out


def _chi2_ok(run: Path, exact: dict[str, np.ndarray], std_factor: float = 1.0) -> float:
    """Two-sided χ² of (released − exact)/(ledger std · std_factor) over every bin of every release."""
    rd = RunDir(run)
    z = []
    for rec in _ledger(run):
        with np.load(rd.release_path(rec["key"], rec["iteration"])) as v:
            rel = np.concatenate([v["nearest"], v["furthest"]])
        z.append((rel - exact[rec["key"]]) / (rec["noise_std"] * std_factor))
    zz = np.concatenate(z)
    lo, hi = stats.chi2.ppf([P_TAIL / 2, 1 - P_TAIL / 2], zz.size)
    ratio = float((zz**2).mean())
    assert lo <= float((zz**2).sum()) <= hi, f"variance ratio {ratio:.3f} over {zz.size} bins"
    return ratio


def _expected_z(releases: int) -> float:
    from privtext.privacy import Budget, gaussian_noise_multiplier

    return gaussian_noise_multiplier(Budget.dp(4.0, 1e-5), compositions=releases)


# ------------------------------------------------------------------------------------------- plain aggregation


def test_plain_parties_release_the_sum_with_the_recorded_noise_and_event(tmp_path: Path) -> None:
    run = _run(tmp_path, "plain", {"count": 3, "aggregation": "plain"})
    recs = _ledger(run)
    assert [r["key"] for r in recs] == ["votes/round_000", "votes/round_001", "votes/round_002"]
    z = _expected_z(3)
    for rec in recs:  # the event of the central Gaussian mechanism on the union, recorded before computing
        assert rec["event"] == {"type": "GaussianDpEvent", "noise_multiplier": pytest.approx(z, rel=1e-12)}
        assert rec["sensitivity"] == topq_sensitivity(Q)
        assert rec["noise_std"] == pytest.approx(z * topq_sensitivity(Q), rel=1e-12)
        assert rec["mechanism"] == "federated_topq_sum"
    _chi2_ok(run, _party_exact(run))
    st = json.loads(RunDir(run).privacy.read_text())
    assert st["parameters"]["parties"]["securely_aggregated"] is False
    assert "NOT SECURELY AGGREGATED" in " ".join(st["coverage"]) and "NOT securely" in st["headline"]
    assert st["guarantee"]["spent"]["epsilon"] <= 4.0
    rounds = st["released"]["wasp"]["rounds"]
    assert all(r["survivors"] == [0, 1, 2] for r in rounds[:-1])
    assert len(json.loads(RunDir(run).diagnostics.read_text())["party_sizes"]) == 3  # private/ only
    assert "party_sizes" not in RunDir(run).privacy.read_text()


def test_dropouts_keep_the_noise_at_least_sigma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """t = 2 of L = 3: each party adds σ/√2. All three answer: std σ√(3/2). Party 2 drops out: std σ over parties
    0 and 1 only. Both are ≥ σ, so the recorded GaussianDpEvent(σ/Δ) (the same in both runs) is valid."""
    parties = {"count": 3, "aggregation": "plain", "min_survivors": 2}
    # 400 samples: 3 releases over 100/200/300 candidates, 1200 bins. The variance ratio against σ√(3/2) then
    # has sd √(2/1200) = 0.041, so the threshold 1/1.2 sits 4 sd below 1 (a false failure ~3e-5) and 6 sd
    # above the 2/3 that a σ-std noise would give
    full = _run(tmp_path, "t2", parties, num_samples=400)
    ratio = _chi2_ok(full, _party_exact(full), std_factor=np.sqrt(3 / 2))
    assert ratio > 1 / 1.2  # not σ: a σ-std noise gives a ratio of 2/3 here
    monkeypatch.setenv("PRIVTEXT_WASP_DROP", "2:collect_masked_vectors")
    drop = _run(tmp_path, "t2drop", parties)
    _chi2_ok(drop, _party_exact(drop, parties=[0, 1]))
    z = _expected_z(3)
    for rec in _ledger(full) + _ledger(drop):
        assert rec["event"]["noise_multiplier"] == pytest.approx(z, rel=1e-12)
    rounds = json.loads(RunDir(drop).privacy.read_text())["released"]["wasp"]["rounds"]
    std = z * topq_sensitivity(Q)
    assert all(r["survivors"] == [0, 1] and r["sum_noise_std"] == pytest.approx(std, rel=1e-3) for r in rounds[:-1])
    # too few survivors (t = L = 3, one dropped): the round is refused, its value never exists
    with pytest.raises(AggregationError, match="min_survivors=3"):
        _run(tmp_path, "t3drop", {"count": 3, "aggregation": "plain"})
    recs = _ledger(tmp_path / "t3drop")
    assert [r["key"] for r in recs] == ["votes/round_000"]  # recorded before any party computed
    assert not RunDir(tmp_path / "t3drop").release_path("votes/round_000", 0).exists()


def test_user_level_sensitivities(tmp_path: Path) -> None:
    """Cap m: Δ = m·Δ_Q (App E.4, with the exact Δ_Q); normalised votes: Δ = 1, and the released sum is the sum
    of the parties' unit vectors plus noise of the recorded std."""
    capped = _run(tmp_path, "cap", {"count": 3, "aggregation": "plain", "level": "user", "max_records": 60})
    for rec in _ledger(capped):
        assert rec["sensitivity"] == pytest.approx(60 * topq_sensitivity(Q), rel=1e-12)
    st = json.loads(RunDir(capped).privacy.read_text())
    assert "one data party" in st["guarantee"]["neighbouring_relation"] and "60 records" in st["headline"]
    assert st["parameters"]["sensitivity"] == "user"
    _chi2_ok(capped, _party_exact(capped, cap=60))
    norm = _run(tmp_path, "norm", {"count": 3, "aggregation": "plain", "level": "user", "normalise": True})
    z = _expected_z(3)
    for rec in _ledger(norm):
        assert rec["sensitivity"] == 1.0 and rec["noise_std"] == pytest.approx(z, rel=1e-12)
    _chi2_ok(norm, _party_exact(norm, normalise=True))


def test_bad_party_configs_name_the_key(tmp_path: Path) -> None:
    from privtext.errors import ConfigError

    with pytest.raises(ConfigError, match="count"):
        _run(tmp_path, "neither", {"aggregation": "plain"})
    with pytest.raises(ConfigError, match="min_survivors"):
        _run(tmp_path, "t4", {"count": 3, "min_survivors": 4, "aggregation": "plain"})
    with pytest.raises(ConfigError, match="min_survivors"):
        _run(tmp_path, "t1", {"count": 3, "min_survivors": 1, "aggregation": "secagg"})
    with pytest.raises(ConfigError, match="max_records"):
        _run(tmp_path, "user", {"count": 3, "level": "user", "aggregation": "plain"})
    with pytest.raises(ConfigError, match="level: user"):
        _run(tmp_path, "norm", {"count": 3, "normalise": True, "aggregation": "plain"})


def test_party_files(tmp_path: Path) -> None:
    """wasp.parties.files: one private file per party; data.private is not read."""
    priv, _ = _corpora()
    files = []
    for k, ix in enumerate(np.array_split(np.arange(len(priv)), 3)):
        f = tmp_path / f"party{k}.csv"
        write_corpus(priv.subset(ix), f)
        files.append(str(f))
    run = _run(tmp_path, "files", {"files": files, "aggregation": "plain"}, iterations=2)
    st = json.loads(RunDir(run).privacy.read_text())
    assert st["parameters"]["parties"]["count"] == 3 and st["parameters"]["parties"]["from_files"] is True
    assert json.loads(RunDir(run).diagnostics.read_text())["party_sizes"] == [20, 20, 20]


# ----------------------------------------------------------------------------------------------------- SecAgg+


def test_secagg_parties_run_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("flwr")
    run = _run(tmp_path, "secagg", {"count": 3, "aggregation": "secagg"}, iterations=3)
    recs = _ledger(run)
    assert [r["key"] for r in recs] == ["votes/round_000", "votes/round_001"]
    z = _expected_z(2)
    assert all(r["event"]["noise_multiplier"] == pytest.approx(z, rel=1e-12) for r in recs)
    _chi2_ok(run, _party_exact(run))
    st = json.loads(RunDir(run).privacy.read_text())
    assert st["parameters"]["parties"]["securely_aggregated"] is True and "NOT" not in st["headline"]
    assert "SecAgg+" in " ".join(st["coverage"])


@pytest.mark.slow
def test_secagg_equals_plain_under_reproducible_noise_and_survives_a_dropout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same seeded party noise: SecAgg+ returns exactly the plain quantised sum, so the runs are identical. A
    party crashing in collect-masked-vectors (t = 2) is left out, and the sum has std σ over the other two."""
    pytest.importorskip("flwr")
    privacy = {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True}
    a = _run(tmp_path, "plain", {"count": 3, "aggregation": "plain"}, iterations=3, privacy=privacy)
    b = _run(tmp_path, "secagg", {"count": 3, "aggregation": "secagg"}, iterations=3, privacy=privacy)
    for rec in _ledger(a):
        with np.load(RunDir(a).release_path(rec["key"], rec["iteration"])) as x, \
                np.load(RunDir(b).release_path(rec["key"], rec["iteration"])) as y:
            assert np.array_equal(x["nearest"], y["nearest"]) and np.array_equal(x["furthest"], y["furthest"])
    assert RunDir(a).synthetic.read_bytes() == RunDir(b).synthetic.read_bytes()
    monkeypatch.setenv("PRIVTEXT_WASP_DROP", "2:collect_masked_vectors")
    c = _run(tmp_path, "drop", {"count": 3, "aggregation": "secagg", "min_survivors": 2, "timeout": 30},
             iterations=3)
    rounds = json.loads(RunDir(c).privacy.read_text())["released"]["wasp"]["rounds"]
    assert all(r["survivors"] == [0, 1] for r in rounds[:-1])
    _chi2_ok(c, _party_exact(c, parties=[0, 1]))


# ------------------------------------------------------------------------------------------------------ resume


def _cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "PRIVTEXT_QUIET": "1", **(env or {})}
    r = subprocess.run([sys.executable, "-m", "privtext", *args], capture_output=True, text=True, env=e)
    if check and r.returncode != 0:
        raise AssertionError(f"privtext {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def _config(tmp: Path, out: str, wasp: dict[str, Any]) -> Path:
    priv, pub = _corpora()
    write_corpus(priv, tmp / "private.csv")
    write_corpus(pub, tmp / "public.csv")
    words = sorted({w.strip(".,").lower() for t in pub.texts for w in t.split()} - {""})
    cfg = {"method": "wasp", "seed": 3, "name": out,
           "data": {"private": str(tmp / "private.csv"), "public": str(tmp / "public.csv"),
                    "label_columns": list(priv.label_columns)},
           "generator": {"backend": "scripted", "vocabulary": words},
           "generators": GENS, "embedder": {"backend": "hashing", "dim": 64, "cache": False},
           # reproducible noise (NOT private): the resumed run can be compared byte for byte
           "privacy": {"epsilon": 4.0, "delta": 1e-5, "reproducible_noise": True},
           "evolution": {"num_samples": 90, "iterations": 4}, "wasp": {"q": Q, "in_context": 4, **wasp},
           "output": str(tmp / out)}
    p = tmp / f"{out}.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return p


def _release_bytes(run: Path) -> dict[str, bytes]:
    rd = RunDir(run)
    return {r["key"]: rd.release_path(r["key"], r["iteration"]).read_bytes()
            for r in _ledger(run) if rd.release_path(r["key"], r["iteration"]).exists()}


@pytest.mark.parametrize("parties", [None, {"count": 3, "aggregation": "plain"}], ids=["single", "parties"])
def test_wasp_resume_after_a_kill_reuses_releases_and_matches_an_uninterrupted_run(
        tmp_path: Path, parties: dict[str, Any] | None) -> None:
    wasp = {} if parties is None else {"parties": parties}
    ref_cfg = _config(tmp_path, "ref", wasp)
    _cli("run", str(ref_cfg))
    ref = tmp_path / "ref"
    keys = [f"votes/round_{t:03d}" for t in range(3)]
    assert [r["key"] for r in _ledger(ref)] == keys
    for fault, saved in (("after_save:votes/round_001", keys[:2]), ("after_record:votes/round_002", keys[:2])):
        name = "run-" + fault.split(":")[0]
        cfg = _config(tmp_path, name, wasp)
        run = tmp_path / name
        r = _cli("run", str(cfg), env={"PRIVTEXT_FAULT": fault}, check=False)
        assert r.returncode == -signal.SIGKILL, r.stderr
        assert not RunDir(run).synthetic.exists()
        before = _release_bytes(run)
        assert sorted(before) == saved
        recorded = [x["key"] for x in _ledger(run)]
        assert recorded == (keys[:2] if fault.startswith("after_save") else keys)
        _cli("resume", str(run))
        after = _release_bytes(run)
        for k, b in before.items():
            assert after[k] == b, f"released value {k} changed on resume"
        got = [x["key"] for x in _ledger(run)]
        assert got == keys and all(c == 1 for c in Counter(got).values())
        assert RunDir(run).synthetic.read_bytes() == RunDir(ref).synthetic.read_bytes()
        assert after == _release_bytes(ref)  # reproducible noise: the same values as the uninterrupted run
