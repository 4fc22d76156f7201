"""Every command of the README's first screens runs as written, on a fresh copy of the repository with the shared
data beside it (``../shared/data``, as the README assumes).

What "first screens" means here: everything up to the end of the "## Python" section — the install line and the
demo, the test command, the ``privtext budget`` calculators, the run / evaluate / report / compare commands of
"A run" with the ``yelp.yaml`` they use (the README's YAML block whose first line names the file), and the Python
snippet. The fenced ``bash`` blocks run in ``bash -e`` from the copy's root, in order, the ``python`` block in the
same folder; nothing is shrunk or overridden (no environment variable, no ``--set`` the README does not show).

Two documented exceptions, both about the environment rather than about privtext:

* the install steps (``python3 -m venv .venv``, ``pip install ...``, in the set-up line and in the test line) are
  not run: they download packages. The copy gets a ``.venv`` that is this test's own environment (a link to
  ``sys.prefix``) with the copy's ``src`` on ``PYTHONPATH``, so the rest of each line (``. .venv/bin/activate &&
  ... && privtext demo``) runs as written;
* ``pytest`` (the whole suite, minutes of CPU) runs as ``pytest --collect-only -q``: the copy's suite collects.

Slow (a demo, two small Yelp runs, an evaluation, a comparison): ``pytest -m slow tests/test_readme.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHARED = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INSTALL = re.compile(r"python3 -m venv \.venv && \. \.venv/bin/activate && pip install [^&]+&& ")
PIP = re.compile(r"pip install [^&\n]+&& ")
CI = ROOT / ".ci" / "run"


def first_screens(text: str) -> str:
    """The README up to the end of its "## Python" section."""
    start = text.index("\n## Python")
    end = text.index("\n## ", start + 1)
    return text[:end]


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(first_screens(text))]


def test_the_readme_blocks_are_what_this_test_expects() -> None:
    """The parsing the slow test relies on: a bash install line, a YAML file block, bash commands, Python."""
    bs = blocks(README.read_text(encoding="utf-8"))
    kinds = [k for k, _ in bs]
    assert "bash" in kinds and "python" in kinds
    assert INSTALL.search(bs[0][1]), bs[0][1]
    files = [b for k, b in bs if k == "yaml" and re.match(r"# [\w.-]+\.yaml\b", b)]
    assert [re.match(r"# ([\w.-]+\.yaml)", b).group(1) for b in files] == ["yelp.yaml"]  # type: ignore[union-attr]
    commands = "\n".join(b for k, b in bs if k == "bash")
    # every file a command names is made by the README itself or shipped with the repository
    for name in re.findall(r"\b[\w./-]+\.(?:yaml|csv|jsonl)\b", commands):
        assert (name == "yelp.yaml" or name.startswith("runs/") or (ROOT / name).exists()), name


def _readme_commands() -> tuple[str, str]:
    """(the first screen's set-up line without its ``&& privtext demo``, the test line)."""
    bs = [b.strip() for k, b in blocks(README.read_text(encoding="utf-8")) if k == "bash"]
    setup = bs[0].removesuffix("&& privtext demo").strip()
    test = next(b for b in bs if re.search(r"&& pytest$", b))
    return setup, test


def test_the_first_screen_installs_the_demo_alone_and_the_tests_install_dev() -> None:
    """Issue 35: the set-up + demo line installs what the demo needs (no ``[dev]``: Ray, Flower, OpenVINO,
    Presidio), the test line installs ``[dev]``; both with the constraints."""
    setup, test = _readme_commands()
    assert "-c constraints.txt -e ." in setup and "[dev]" not in setup, setup
    assert "pip install -c constraints.txt -e '.[dev]'" in test, test


def test_ci_runs_the_readme_install_and_test_commands_as_written() -> None:
    """.ci/run runs the README's set-up line (its demo aside) and its test line, character for character (the
    test line with pytest's CI flags appended)."""
    ci = CI.read_text(encoding="utf-8").splitlines()
    setup, test = _readme_commands()
    assert setup in ci, (setup, ci)
    assert f"{test} -q -p no:cacheprovider" in ci, (test, ci)


def _copy_repository(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "yelp" / "dev.csv").exists(), reason="the shared data is absent")
@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed to list the repository's files")
def test_every_command_of_the_readme_first_screens_runs(tmp_path: Path) -> None:
    repo = tmp_path / "privtext"
    repo.mkdir()
    _copy_repository(repo)
    (tmp_path / "shared").symlink_to(SHARED.parent, target_is_directory=True)  # ../shared/data from the copy
    (repo / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": str(repo / "src")}
    env.pop("PRIVTEXT_SHARED_DATA", None)
    log = []
    for kind, body in blocks(README.read_text(encoding="utf-8")):
        if kind == "yaml":
            m = re.match(r"# ([\w.-]+\.yaml)\b", body)
            if m:
                (repo / m.group(1)).write_text(body, encoding="utf-8")
            continue
        if kind == "python":
            cmd = [sys.executable, "-c", body]
        elif kind == "bash":
            script = INSTALL.sub(". .venv/bin/activate && ", body)  # the environment exists (module docstring)
            script = PIP.sub("", script)
            script = re.sub(r"(&&|^)\s*pytest\s*$", r"\1 pytest --collect-only -q", script, flags=re.M)
            cmd = ["bash", "-e", "-c", script]
        else:
            continue
        res = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=3600)
        log.append(f"$ {body.strip()}\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
        assert res.returncode == 0, "\n".join(log)
    assert (repo / "runs" / "demo" / "run-secpe" / "report.html").exists()
    assert (repo / "runs" / "yelp-augpe" / "report.html").exists()
