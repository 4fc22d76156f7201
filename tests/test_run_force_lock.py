"""``--force`` removes only what privtext made, only after every check passed; a run directory is locked while a
process works in it (issue 23, items 1-2)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from privtext.config import config_from_dict, load_config
from privtext.data import write_corpus
from privtext.errors import RunError
from privtext.rundir import RunDir
from privtext.runner import resume_run, run_config
from privtext.testing.tinyrun import toy_corpora
from tests.test_run_failures import _raw as _failure_raw


def _files(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=40, n_pool=120)
    write_corpus(priv, folder / "private.csv")
    write_corpus(pub, folder / "public.csv")
    return {"private": folder / "private.csv", "public": folder / "public.csv"}


def _raw(files: dict[str, Path], output: Path | str) -> dict:
    return {**_failure_raw(Path("."), files), "output": str(output)}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRIVTEXT_QUIET": "1"}
    return subprocess.run([sys.executable, "-m", "privtext", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_force_on_the_folder_holding_the_inputs_and_a_stray_file_removes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    files = _files(data)
    (data / "notes.txt").write_text("my notes\n")
    cfg = tmp_path / "base.yaml"
    cfg.write_text(yaml.safe_dump(_raw(files, tmp_path / "run")))
    before = _snapshot(data)
    r = _cli("run", str(cfg), "-o", str(data), "--force", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "nothing was removed" in r.stderr and "Traceback" not in r.stderr
    assert _snapshot(data) == before  # the inputs and the stray file are intact


def test_force_on_the_working_directory_with_config_data_and_notes_removes_nothing(tmp_path: Path) -> None:
    files = _files(tmp_path)
    (tmp_path / "notes.txt").write_text("clinic notes\n")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(_raw({k: Path(v.name) for k, v in files.items()}, "run")))
    before = _snapshot(tmp_path)
    r = _cli("run", "base.yaml", "-o", ".", "--force", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "nothing was removed" in r.stderr
    assert _snapshot(tmp_path) == before


def test_force_refuses_a_privtext_failed_start_that_holds_a_stray_file(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    failed = RunDir(tmp_path / "run").create(config_text="method: augpe\n")
    (failed.root / "my-analysis.ipynb").write_text("{}")
    (failed.private / "keep.txt").write_text("mine")
    with pytest.raises(RunError, match=r"my-analysis\.ipynb") as e:
        run_config(config_from_dict(_raw(files, failed.root)), force=True)
    assert "private/keep.txt" in str(e.value)
    assert (failed.root / "my-analysis.ipynb").exists() and (failed.private / "keep.txt").exists()
    assert failed.config.exists()  # nothing of the failed start was removed either


def test_force_refuses_a_folder_privtext_did_not_make_and_never_suggests_it(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text("x: 1\n")  # looks like a run, but has no marker
    (other / "private").mkdir()
    with pytest.raises(RunError) as e:
        run_config(config_from_dict(_raw(files, other)))
    assert "--force" not in str(e.value) and "privtext did not make it" in str(e.value)
    with pytest.raises(RunError, match="nothing was removed"):
        run_config(config_from_dict(_raw(files, other)), force=True)
    assert (other / "config.yaml").read_text() == "x: 1\n"


def test_force_checks_the_configuration_before_it_removes_anything(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    failed = RunDir(tmp_path / "run").create(config_text="method: augpe\n")
    bad = _raw(files, failed.root)
    bad["data"]["label_columns"] = ["no-such-column"]
    with pytest.raises(Exception, match="no-such-column"):
        run_config(config_from_dict(bad), force=True)
    assert failed.resolved_config().read_text() == "method: augpe\n"  # the failed start is still there, untouched


def test_force_replaces_a_failed_start_in_place(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    failed = RunDir(tmp_path / "run").create(config_text="method: augpe\n")
    inode = failed.root.stat().st_ino
    root = run_config(config_from_dict(_raw(files, failed.root)), force=True)
    assert root.stat().st_ino == inode  # the folder itself is kept (a mount point, a shell's cwd)
    assert RunDir(root).has_releases() and RunDir(root).is_complete() and RunDir(root).is_privtext_run()
    with pytest.raises(RunError, match="holds a finished run"):  # never "use privtext resume" for a finished run
        run_config(config_from_dict(_raw(files, failed.root)))


def test_an_existing_empty_folder_is_written_into_not_replaced(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    mount = tmp_path / "volume"
    mount.mkdir()
    inode = mount.stat().st_ino
    root = run_config(config_from_dict(_raw(files, mount)))
    assert root.stat().st_ino == inode and RunDir(root).is_complete()
    assert oct(RunDir(root).private.stat().st_mode & 0o777) == "0o700"


_HOLD = textwrap.dedent("""
    import sys, time
    from privtext.rundir import RunDir
    with RunDir(sys.argv[1]).lock(purpose="a test holding the lock"):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_a_second_process_is_refused_with_who_holds_the_lock(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    cfg = config_from_dict(_raw(files, tmp_path / "run"))
    run = RunDir(tmp_path / "run").create(config_text=cfg.to_yaml())
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunError, match=rf"in use by process {holder.pid} .*a test holding the lock"):
            resume_run(run.root)
        with pytest.raises(RunError, match=rf"in use by process {holder.pid}"):
            run_config(cfg, force=True)
        assert run.config.exists() and not run.has_releases()  # the refused processes changed nothing
    finally:
        holder.kill()
        holder.wait()
    # the lock goes with its process: nothing stale blocks the next one
    assert (resume_run(run.root) / "synthetic.jsonl").exists()


def test_a_second_run_into_a_folder_a_live_run_works_in_is_told_so_not_failed_start(tmp_path: Path) -> None:
    """Issue 35, item 6: the second run was told the folder "holds a failed start; pass --force" while the first
    was alive (its ledger still empty). It is told the folder is in use, by which pid, with or without --force,
    from the API and from the command line."""
    files = _files(tmp_path / "data")
    raw = _raw(files, tmp_path / "run")
    run = RunDir(tmp_path / "run").create(config_text=config_from_dict(raw).to_yaml())  # a start: nothing released
    assert run.lock_holder() is None
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(run.root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert run.lock_holder() is not None and run.lock_holder()["pid"] == holder.pid  # type: ignore[index]
        for force in (False, True):
            with pytest.raises(RunError, match=rf"is in use by process {holder.pid} ") as e:
                run_config(config_from_dict(raw), force=force)
            assert "failed start" not in str(e.value) and "--force" not in str(e.value)
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(yaml.safe_dump(raw))
        r = _cli("run", str(cfg), cwd=tmp_path)
        assert r.returncode == 2 and f"in use by process {holder.pid}" in r.stderr, r.stderr
        assert "failed start" not in r.stderr
        assert run.config.exists() and not run.has_releases()
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(RunError, match="failed start"):  # once the process is gone, the start is a failed one
        run_config(config_from_dict(raw))


def test_a_killed_run_leaves_no_stale_lock(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run").create(config_text="method: augpe\n")
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(run.root)], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    p.kill()
    p.wait()
    deadline = time.time() + 10
    while True:
        try:
            with run.lock():
                break
        except RunError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def test_the_config_file_given_to_the_api_is_protected(tmp_path: Path) -> None:
    files = _files(tmp_path / "data")
    failed = RunDir(tmp_path / "run").create(config_text="method: augpe\n")
    cfg_path = failed.root / "base.yaml"
    cfg_path.write_text(yaml.safe_dump(_raw(files, failed.root)))
    with pytest.raises(RunError, match="nothing was removed"):
        run_config(load_config(cfg_path), force=True)
    assert cfg_path.exists()


def test_the_shareable_config_holds_no_local_path_and_resume_reads_the_private_one(tmp_path: Path) -> None:
    """Issue 23, item 6: config.yaml (in the release) names its files, not where they are; private/config.yaml
    keeps the full configuration, and resume reads it from any working directory."""
    import os

    files = _files(tmp_path / "data")
    root = run_config(config_from_dict(_raw(files, tmp_path / "run")))
    shared = (root / "config.yaml").read_text()
    assert str(tmp_path) not in shared and "private.csv" in shared
    full = yaml.safe_load((root / "private" / "config.yaml").read_text())
    assert full["data"]["private"] == str(files["private"])
    assert oct((root / "private").stat().st_mode & 0o777) == "0o700"
    from privtext.runner import load_run_config

    here = os.getcwd()
    try:
        os.chdir(tmp_path / "data")
        assert load_run_config(root).data.private == str(files["private"])
    finally:
        os.chdir(here)
