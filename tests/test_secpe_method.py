"""SecPE end to end on the demo's clinic notes (offline n-gram generator, hashing embedder), the GDP baselines,
and the real demo."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from privtext.atomicio import read_jsonl
from privtext.config import config_from_dict
from privtext.data import load_corpus, write_corpus
from privtext.demo import make_demo_corpora
from privtext.rundir import RUN_FILES
from privtext.runner import run_config


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("secpe")
    private, public, patients = make_demo_corpora(n_private=150, n_public=300, n_patients=20, seed=5)
    write_corpus(private, tmp / "private.csv")
    write_corpus(public, tmp / "public.csv")
    (tmp / "names.txt").write_text("".join(p["name"] + "\n" for p in patients))
    (tmp / "mrns.txt").write_text("".join(p["mrn"] + "\n" for p in patients))
    secrets = [v for p in patients for k, v in p.items()]
    return {"tmp": tmp, "patients": patients, "secrets": secrets}


def _cfg(d: dict, out: str, **kw: object) -> dict:
    tmp = d["tmp"]
    raw = {
        "method": "secpe", "seed": 1,
        "data": {"private": str(tmp / "private.csv"), "public": str(tmp / "public.csv"),
                 "label_columns": ["department", "visit"]},
        "generator": {"backend": "ngram", "order": 3},
        "embedder": {"backend": "hashing", "dim": 128},
        "privacy": {"secret": {"p": 1e-3, "r": 2e-2}},
        "evolution": {"num_samples": 30, "iterations": 3, "variations": 3, "selection": "sample"},
        "secpe": {"clusters": 12, "sampling": "max",
                  "detector": ["regex",
                               {"name": "explicit", "file": str(tmp / "names.txt"), "type": "PATIENT_NAME"},
                               {"name": "explicit", "file": str(tmp / "mrns.txt"), "type": "MRN"}]},
        "output": str(tmp / out),
    }
    for k, v in kw.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return raw


@pytest.fixture(scope="module")
def secpe_run(demo_data: dict) -> Path:
    return run_config(config_from_dict(_cfg(demo_data, "run")))


def _assumed(priv: dict, name: str) -> object:
    return next(a["value"] for a in priv["assumed_public"] if a["name"] == name)


def test_statement_is_true_and_holds_no_private_counts(secpe_run: Path) -> None:
    priv = json.loads((secpe_run / "privacy.json").read_text())
    st = priv["statement"]
    assert priv["format"] == "privtext.privacy/2" and priv["private"] is True
    assert priv["headline"].startswith("(p=0.001, r=0.02)-secret protection")
    assert "regex" in st and "explicit" in st  # the detectors that decided what is protected
    assert "secret-free" in st and "missed are not protected" in st and "not differential privacy" in st
    assert "ChaCha20" in st
    assert _assumed(priv, "noise_std") > 0 and priv["guarantee"]["spent"]["every_secret_within_r"] is True
    # exact private statistics are private diagnostics, not part of the release
    assert "secrets" not in priv and "records_with_secrets" not in json.dumps(priv)
    diag = json.loads((secpe_run / "private" / "diagnostics.json").read_text())
    for t in ("PATIENT_NAME", "MRN", "PHONE", "EMAIL", "DATE_OF_BIRTH"):
        assert diag["secrets"]["by_type"][t]["secrets"] > 0, t
    assert diag["secret_noise"]["compositions"] == 6 and diag["secret_noise"]["noise_std"] == _assumed(priv, "noise_std")
    # every group's posterior bound is within its r (kept with the ledger, in private diagnostics)
    groups = diag["ledger"]["spent"]["groups"]
    assert groups and all(g["posterior"] <= g["r"] * (1 + 1e-9) for g in groups.values())
    assert (secpe_run / "private").stat().st_mode & 0o777 == 0o700


def test_one_release_per_clustering_carries_both_events(secpe_run: Path) -> None:
    """Counts and centres are one release; with independent samples it spends two mixture compositions per
    secret group (SelfComposedDpEvent(mixture, 2)), planned for T clusterings."""
    recs = read_jsonl(secpe_run / "private" / "ledger.jsonl")
    assert [r["key"] for r in recs] == [f"clusters/iter_{t:03d}" for t in range(3)]
    for rec in recs:
        assert rec["secret_events"], "each release carries the per-secret-group events"
        for se in rec["secret_events"].values():
            assert se["event"]["type"] == "SelfComposedDpEvent" and se["event"]["count"] == 2
            assert se["event"]["event"]["type"] == "MixtureOfGaussiansDpEvent"
            assert se["planned"] == 3
        assert rec["event"] == {"type": "SelfComposedDpEvent", "count": 2,
                                "event": {"type": "GaussianDpEvent", "noise_multiplier": rec["noise_std"]}}


def test_no_secret_reaches_a_prompt_or_the_output(secpe_run: Path, demo_data: dict) -> None:
    prompts = (secpe_run / "prompts.jsonl").read_text(encoding="utf-8").lower()
    synthetic = (secpe_run / "synthetic.jsonl").read_text(encoding="utf-8").lower()
    for s in demo_data["secrets"]:
        assert s.lower() not in prompts, s
        assert s.lower() not in synthetic, s
    assert json.loads((secpe_run / "privacy.json").read_text())["prompt_audit"]["passed"]


def test_clusters_released_once(demo_data: dict, secpe_run: Path) -> None:
    run = run_config(config_from_dict(_cfg(demo_data, "once", secpe={"recluster_each_iteration": False})))
    keys = [r["key"] for r in read_jsonl(run / "private" / "ledger.jsonl")]
    assert keys == ["clusters/iter_000"]
    priv = json.loads((run / "privacy.json").read_text())
    assert json.loads((run / "private" / "diagnostics.json").read_text())["secret_noise"]["compositions"] == 2
    # fewer compositions, same budget: less noise than re-clustering every iteration
    again = json.loads((secpe_run / "privacy.json").read_text())
    assert _assumed(priv, "noise_std") < _assumed(again, "noise_std")


def test_a_run_searches_the_private_set_once_for_all_its_clusterings(demo_data: dict,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The public clusters are fixed for a run, so each private record's cluster is too: three re-clusterings
    search once, and the run (seeded noise, for the comparison) releases and writes exactly what a run that
    searches the private set at every release does."""
    import privtext.mechanisms.clustering as C
    import privtext.methods.secpe.scorer as S

    calls: list[int] = []
    real = S.assign_records

    def counting(*a: object, **kw: object):  # type: ignore[no-untyped-def]
        out = real(*a, **kw)  # type: ignore[arg-type]
        calls.append(int(out.searched.sum()))
        return out

    seeded = {"secret": {"p": 1e-3, "r": 2e-2}, "reproducible_noise": True}
    monkeypatch.setattr(S, "assign_records", counting)
    monkeypatch.setattr(C, "assign_records", counting)
    once = run_config(config_from_dict(_cfg(demo_data, "search-once", privacy=seeded)))
    assert len(calls) == 1 and calls[0] > 0
    monkeypatch.setattr(S.ClusterScorer, "assignment", lambda self: None)  # a search per release
    each = run_config(config_from_dict(_cfg(demo_data, "search-each", privacy=seeded)))
    assert len(calls) == 4  # 3 more: secret_clustering searched at each release
    assert [r["key"] for r in read_jsonl(once / "private" / "ledger.jsonl")] == [
        f"clusters/iter_{t:03d}" for t in range(3)]
    saved = sorted(p.relative_to(once) for p in (once / "private").rglob("releases/*.npz"))
    assert len(saved) == 3
    for rel in saved:
        with np.load(once / rel) as a, np.load(each / rel) as b:
            assert sorted(a.files) == sorted(b.files) == ["centres", "counts"]
            assert all(np.array_equal(a[k], b[k]) for k in a.files), rel
    assert (once / "synthetic.jsonl").read_bytes() == (each / "synthetic.jsonl").read_bytes()


def test_approximate_assignment_and_sampled_kmeans_keep_the_events(demo_data: dict, secpe_run: Path) -> None:
    """secpe.assign_backend (which centre a private record joins) and kmeans_sample_per_centre (public data) change
    no sensitivity: the ledger's releases and events equal the default run's."""
    run = run_config(config_from_dict(_cfg(demo_data, "approx", secpe={
        "assign_backend": "ivf-gemm", "assign_nprobe": 1, "kmeans_sample_per_centre": 8})))
    got = [(r["key"], r["event"], r["noise_std"]) for r in read_jsonl(run / "private" / "ledger.jsonl")]
    ref = [(r["key"], r["event"], r["noise_std"]) for r in read_jsonl(secpe_run / "private" / "ledger.jsonl")]
    assert got == ref and len(got) == 3
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["secpe"]["assign_backend"] == "ivf-gemm" and cfg["secpe"]["kmeans_sample_per_centre"] == 8
    from privtext.errors import ConfigError

    with pytest.raises(ConfigError, match="assign_backend"):
        run_config(config_from_dict(_cfg(demo_data, "bad", secpe={"assign_backend": "annoy"})))


def test_crash_between_record_and_save_resumes_cleanly(demo_data: dict) -> None:
    tmp = demo_data["tmp"]
    raw = _cfg(demo_data, "crash")
    p = tmp / "crash.yaml"
    p.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PRIVTEXT_QUIET": "1", "PRIVTEXT_FAULT": "after_record:clusters/iter_001"}
    r = subprocess.run([sys.executable, "-m", "privtext", "run", str(p)], env=env, capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL, r.stderr
    env.pop("PRIVTEXT_FAULT")
    r = subprocess.run([sys.executable, "-m", "privtext", "resume", str(tmp / "crash")], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    keys = [x["key"] for x in read_jsonl(tmp / "crash" / "private" / "ledger.jsonl")]
    assert Counter(keys) == Counter({f"clusters/iter_{t:03d}": 1 for t in range(3)})
    assert len(load_corpus(tmp / "crash" / "synthetic.jsonl")) == 30


def test_gdp_baselines_record_and_group_sensitivity(demo_data: dict) -> None:
    base = _cfg(demo_data, "gdp-record", method="augpe")
    base["evolution"]["selection"] = "rank"
    rec = run_config(config_from_dict(base))
    grp_raw = _cfg(demo_data, "gdp-group", method="augpe", augpe={"sensitivity": "secret_group",
                                                                  "detector": base["secpe"]["detector"]})
    grp_raw["evolution"]["selection"] = "rank"
    grp = run_config(config_from_dict(grp_raw))
    pr, pg = (json.loads((r / "privacy.json").read_text()) for r in (rec, grp))
    from privtext.privacy import mu_from_pr

    mu = float(mu_from_pr(1e-3, 2e-2))
    sigma = pr["parameters"]["noise_multiplier"]
    assert sigma == pytest.approx(np.sqrt(3) / mu, rel=1e-3)  # σ = √T/μ (exact GDP)
    assert "ONE record" in pr["statement"] and not pr["assumed_public"]  # record mode: (p, r) only for single holders
    k = _assumed(pg, "secret_group_size")
    # independently: the most records any one planted value appears in
    texts = load_corpus(demo_data["tmp"] / "private.csv").texts
    k_ref = max(sum(v in t for t in texts) for p in demo_data["patients"] for v in p.values())
    assert k == k_ref and k >= 2
    led = read_jsonl(grp / "private" / "ledger.jsonl")
    assert all(x["sensitivity"] == k and x["noise_std"] == pytest.approx(k * sigma) for x in led)
    assert "every detected secret gets (p=0.001, r=0.02)" in pg["headline"]


def test_no_secret_found_means_no_noise(tmp_path: Path, demo_data: dict) -> None:
    raw = _cfg(demo_data, "none")
    # private = half of the public notes (they hold no identifier), public = the other half: never the same text
    import pandas as pd

    notes = pd.read_csv(demo_data["tmp"] / "public.csv")
    half = len(notes) // 2
    notes.iloc[:half].to_csv(tmp_path / "clean_private.csv", index=False)
    notes.iloc[half:].to_csv(tmp_path / "clean_public.csv", index=False)
    raw["data"]["private"] = str(tmp_path / "clean_private.csv")
    raw["data"]["public"] = str(tmp_path / "clean_public.csv")
    raw["secpe"]["detector"] = "regex"
    raw["output"] = str(tmp_path / "none")
    run = run_config(config_from_dict(raw))
    priv = json.loads((run / "privacy.json").read_text())
    assert _assumed(priv, "noise_std") == 0 and priv["private"] is True
    assert json.loads((run / "private" / "diagnostics.json").read_text())["secrets"]["records_with_secrets"] == 0
    assert len(load_corpus(run / "synthetic.jsonl")) == 30


def test_secpe_refuses_a_dp_budget(demo_data: dict) -> None:
    from privtext.errors import ConfigError

    raw = _cfg(demo_data, "bad", privacy={"epsilon": 4.0, "delta": 1e-5})
    raw["privacy"] = {"epsilon": 4.0, "delta": 1e-5}
    with pytest.raises(ConfigError, match="secret"):
        run_config(config_from_dict(raw))


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    """The README's first command: real MiniLM, the offline n-gram generator, SecPE on planted secrets."""
    env = {**os.environ, "PRIVTEXT_QUIET": "1", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "privtext", "demo", "--out", str(tmp_path), "--json"], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Loading weights" not in r.stderr and "%|" not in r.stderr  # quiet means quiet: no library bars
    info = json.loads(r.stdout)
    run = Path(info["run_dir"])
    for name in (*RUN_FILES, "report.html"):
        assert (run / name).exists(), name
    assert info["prompt_audit_clean"] is True and info["records"] == 80
    for t in ("PATIENT_NAME", "MRN", "PHONE"):
        assert t in info["statement"]
    names = (tmp_path / "patient_names.txt").read_text().splitlines()
    synthetic = (run / "synthetic.jsonl").read_text()
    assert not any(n in synthetic for n in names)
    # the private signal visibly helps: FID to the private notes falls over the iterations and ends below the
    # generator alone (the acceptance), and the demo says so
    demo = info["demo"]
    fids = demo["fid_per_iteration"]
    assert len(fids) == 4 and demo["improved"] is True, demo
    assert fids[-1] < fids[0] and fids[-1] < demo["fid_zero_shot"]
    assert "moved the synthetic notes toward the clinic's notes" in demo["words"]
    # the report has no empty section: the demo evaluated against held-out notes of the clinic
    ev = json.loads((run / "evaluation.json").read_text())
    assert ev["real"]["n"] == 200 and ev["downstream"]["results"] and ev["per_iteration"]
    html = (run / "report.html").read_text()
    assert "needs an evaluation" not in html
