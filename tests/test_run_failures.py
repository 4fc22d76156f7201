"""Runs that fail clean: a bad configuration, data file, detector or budget is refused before anything is written,
a failed start can be replaced with --force, and an interrupted run says how to continue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from privtext.config import config_from_dict
from privtext.data import write_corpus
from privtext.errors import BackendError, ConfigError, DataError, PrivtextError, RunError
from privtext.rundir import RunDir
from privtext.runner import run_config
from privtext.testing.tinyrun import toy_corpora


@pytest.fixture
def data(tmp_path: Path) -> dict[str, Path]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=120)
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")
    (tmp_path / "empty.csv").write_text("text,category,mood\n")
    return {"private": tmp_path / "private.csv", "public": tmp_path / "public.csv", "empty": tmp_path / "empty.csv"}


def _raw(tmp_path: Path, files: dict[str, Path], **kw: object) -> dict:
    raw = {
        "method": "augpe", "seed": 0,
        "data": {"private": str(files["private"]), "public": str(files["public"]),
                 "label_columns": ["category", "mood"]},
        "generator": {"backend": "scripted"}, "embedder": {"backend": "hashing", "dim": 32, "cache": False},
        "privacy": {"epsilon": 4.0, "delta": 1e-5},
        "evolution": {"num_samples": 8, "iterations": 2, "variations": 2},
        "output": str(tmp_path / "run"),
    }
    for k, v in kw.items():
        merge = isinstance(v, dict) and isinstance(raw.get(k), dict) and k != "privacy"
        raw[k] = {**raw[k], **v} if merge else v  # type: ignore[dict-item]
    return raw


@pytest.mark.parametrize("case,error,needle", [
    ("missing_file", DataError, "no-such.csv"),
    ("empty_file", DataError, "empty"),
    ("wrong_column", DataError, "nope"),
    ("missing_detector_file", ConfigError, "names.txt"),
    ("method_budget_mismatch", ConfigError, "method secpe needs privacy"),
    ("delta_too_large", ConfigError, "too large for this data"),
    ("public_equals_private", DataError, "name the same file"),
    ("unwritable_output", RunError, "cannot create the run directory"),
    ("undeclared_label", DataError, "not in data.label_values"),
    ("model_not_cached_offline", BackendError, "models--no-such-org--no-such-model"),
    ("wasp_duplicate_generator_names", ConfigError, "generator names must be distinct"),
])
def test_a_bad_start_writes_nothing(tmp_path: Path, data: dict[str, Path], case: str, error: type,
                                    needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kw: dict[str, object] = {
        "missing_file": {"data": {"private": str(tmp_path / "no-such.csv")}},
        "empty_file": {"data": {"private": str(data["empty"])}},
        "wrong_column": {"data": {"label_columns": ["nope"]}},
        "missing_detector_file": {"method": "secpe", "privacy": {"secret": {"p": 1e-3, "r": 2e-2}},
                                  "secpe": {"detector": {"name": "explicit", "file": str(tmp_path / "names.txt")}}},
        "method_budget_mismatch": {"method": "secpe"},
        "delta_too_large": {"privacy": {"epsilon": 4.0, "delta": 0.05}},  # 40 private records: δ ≥ 1/N
        "public_equals_private": {"data": {"public": str(data["private"])}},
        "unwritable_output": {"output": str(data["private"] / "run")},  # under a file
        "undeclared_label": {"data": {"label_values": {"category": ["food"], "mood": ["good", "bad"]}}},
        "model_not_cached_offline": {"generator": {"backend": "transformers", "model": "no-such-org/no-such-model"}},
        "wasp_duplicate_generator_names": {"method": "wasp", "generators": [{"backend": "scripted", "name": "a"},
                                                                            {"backend": "scripted", "name": "a"}]},
    }[case]
    raw = _raw(tmp_path, data, **kw)
    if case == "model_not_cached_offline":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with pytest.raises(PrivtextError) as e:
        run_config(config_from_dict(raw))
    assert isinstance(e.value, error) and needle in str(e.value), str(e.value)
    assert not (tmp_path / "run").exists() and not (data["private"] / "run").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.starting-")]
    if case == "delta_too_large":
        assert "40" not in str(e.value)  # N is private: never printed
    # the corrected configuration then runs in the same place (nothing blocks the fix)
    good = _raw(tmp_path, data)
    assert (run_config(config_from_dict(good)) / "synthetic.jsonl").exists()


def test_force_replaces_only_a_run_that_never_released(tmp_path: Path, data: dict[str, Path]) -> None:
    raw = _raw(tmp_path, data)
    failed = RunDir(tmp_path / "run").create(config_text="method: augpe\n")  # a start that died before releasing
    with pytest.raises(RunError, match="pass --force to replace it"):
        run_config(config_from_dict(raw))
    root = run_config(config_from_dict(raw), force=True)
    assert root == failed.root and RunDir(root).has_releases()
    with pytest.raises(RunError, match="holds noisy releases"):
        run_config(config_from_dict(raw), force=True)


def test_ctrl_c_says_how_to_resume_and_resume_completes(tmp_path: Path, data: dict[str, Path]) -> None:
    raw = _raw(tmp_path, data, evolution={"num_samples": 30, "iterations": 6, "variations": 4},
               embedder={"backend": "hashing", "dim": 512, "cache": False})
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PRIVTEXT_QUIET": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "privtext", "run", str(cfg)], env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    ledger = tmp_path / "run" / "private" / "ledger.jsonl"
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        if ledger.exists() and ledger.read_text().count("\n") >= 1:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.skip("the run finished before it could be interrupted")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal arrived")
    assert proc.returncode == 130, err
    assert f"privtext resume {tmp_path / 'run'}" in err and "interrupted" in err
    r = subprocess.run([sys.executable, "-m", "privtext", "resume", str(tmp_path / "run")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in ledger.read_text().splitlines() if x.strip()]
    keys = [yaml.safe_load(x)["key"] for x in lines]
    assert len(keys) == len(set(keys)) == 6  # one event per release, none twice


@pytest.mark.slow
def test_hostile_inputs_through_the_cli_end_well(tmp_path: Path) -> None:
    """benchmarks/hostile_inputs.py: every hostile input exits 0 or 2 with one line, no traceback, nothing left."""
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "hostile_inputs.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:]
