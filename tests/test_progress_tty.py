"""In a terminal a run shows where the time goes — one live display with the iterations and the stage at work
(generation, embedding, voting), each with its ETA — and nothing when it is not a terminal or when quiet
(issue 23, item 4). The run goes through a pseudo-terminal, as a user's shell would run it."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from privtext.data import write_corpus
from privtext.testing.tinyrun import toy_corpora

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _config(tmp: Path, n_private: int) -> Path:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=n_private, n_pool=300)
    write_corpus(priv, tmp / "private.csv")
    write_corpus(pub, tmp / "public.csv")
    cfg = {
        "method": "augpe", "seed": 0,
        "data": {"private": str(tmp / "private.csv"), "public": str(tmp / "public.csv"),
                 "label_columns": ["category", "mood"]},
        "generator": {"backend": "ngram", "order": 3},
        # the packaged MiniLM: real embedding time, so the display is on screen while it embeds
        "embedder": {"backend": "sentence-transformers", "cache": False},
        "privacy": {"mu": 1.0},
        "evolution": {"num_samples": 40, "iterations": 2, "variations": 2},
        "output": str(tmp / "run"),
    }
    path = tmp / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run_in_pty(args: list[str], env: dict[str, str], timeout: float = 600) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, ANSI.sub("", b"".join(chunks).decode("utf-8", errors="replace"))


def _env(**kw: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PRIVTEXT_QUIET"}
    env.update({"COLUMNS": "160", "TERM": "xterm-256color", **kw})
    return env


@pytest.mark.slow
def test_a_run_in_a_terminal_shows_progress_with_an_eta_while_it_embeds(tmp_path: Path) -> None:
    cfg = _config(tmp_path, n_private=600)
    code, out = _run_in_pty([sys.executable, "-m", "privtext", "run", str(cfg)], _env())
    assert code == 0, out[-2000:]
    assert "embedding the private texts" in out
    line = next(x for x in out.splitlines() if "embedding the private texts" in x)
    assert "eta" in line and re.search(r"\d+/600", line), line
    # the bar moves batch by batch (the embedders advance it), not only 0 then 600 at the end
    done = {int(m) for m in re.findall(r"embedding the private texts\D*?(\d+)/600", out)}
    assert any(0 < m < 600 for m in done), sorted(done)
    assert "iterations" in out and "iter 0: embedding" in out and "iter 1: voting" in out
    assert "Loading weights" not in out  # the libraries' own bars are hidden behind ours


def test_nothing_is_drawn_when_stderr_is_not_a_terminal_or_when_quiet(tmp_path: Path) -> None:
    cfg = _config(tmp_path, n_private=40)
    cfg.write_text(cfg.read_text().replace("sentence-transformers", "hashing"))
    r = subprocess.run([sys.executable, "-m", "privtext", "run", str(cfg)], env=_env(), capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "eta" not in r.stderr and "iterations" not in r.stderr
    code, out = _run_in_pty([sys.executable, "-m", "privtext", "run", str(cfg), "-o", str(tmp_path / "q"), "-q"],
                            _env())
    assert code == 0, out[-2000:]
    assert "eta" not in out and "iterations" not in out
