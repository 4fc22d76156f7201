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


# --------------------------------------------------------------------------- ETA and width (issue 35, item 6)


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _render(prog: object, width: int) -> list[str]:
    import io

    from rich.console import Console

    con = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    con.print(prog.make_tasks_table(prog.tasks))  # type: ignore[attr-defined]
    return [x.rstrip() for x in con.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def test_slow_steps_get_an_eta_where_rich_shows_none() -> None:
    """Units slower than rich's 30-second speed window (an iteration, a DP fine-tuning step) left rich's
    estimate at -:--:--; the display uses the mean rate since the bar started, and before a bar's first unit
    (voting "0/1") the time the last bar of its kind took."""
    from rich.progress import Progress

    from privtext import progress as pg

    clock = _Clock()
    prog = Progress(get_time=clock, auto_refresh=False)
    it = prog.add_task("iterations", total=10, note="")
    prog.start_task(it)
    for _ in range(3):
        clock.t += 45.0  # 45 s per iteration: outside rich's speed window
        prog.advance(it, 1)
    task = prog.tasks[0]
    assert task.time_remaining is None  # rich alone: -:--:--
    left, approx = pg.remaining_seconds(task)
    assert left == pytest.approx(7 * 45.0) and not approx
    pg._DURATIONS.clear()
    vote = prog.add_task("iter 0: voting", total=1, note="")
    clock.t += 5.0
    assert pg.remaining_seconds(prog.tasks[1]) == (None, False)
    clock.t += 55.0
    prog.advance(vote, 1)
    pg._remember(prog, vote)
    assert pg._DURATIONS == {"iter #: voting": pytest.approx(60.0)}
    nxt = prog.add_task("iter 1: voting", total=1, note="")
    clock.t += 20.0
    left, approx = pg.remaining_seconds(prog.tasks[2])
    assert left == pytest.approx(40.0) and approx  # the last voting took 60 s, 20 s are gone
    assert prog.tasks[2].id == nxt
    eta = pg._Eta(13)
    assert str(eta.render(prog.tasks[2])) == "eta ~0:00:40"
    assert prog.tasks[0].elapsed == pytest.approx(215.0)  # 3 iterations done in 135 s, then 80 s more
    assert str(eta.render(prog.tasks[0])) == "eta 0:08:22"  # 215 s × 7 / 3 = 501.7 s
    prog.add_task("embedding", total=5, note="")
    assert str(eta.render(prog.tasks[3])) == "eta measuring"


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_the_count_and_the_eta_fit_any_terminal_width(width: int) -> None:
    """At 80 columns the lm bar was cut before its total and ETA. Every line fits the width and keeps
    done/total and the ETA; the description and the note (loss, tokens/s) give way first."""
    from privtext import progress as pg

    clock = _Clock()
    prog = pg._progress(get_time=clock, auto_refresh=False)
    lm = prog.add_task("lm generator: training", total=2440, note="")
    prog.add_task("embedding the private texts of the support-ticket corpus", total=600, note="")
    clock.t += 30.0
    prog.update(lm, completed=123, note="loss 3.456 · 12,345 tok/s")
    prog.live.console.width = width  # type: ignore[attr-defined]
    lines = _render(prog, width)
    assert len(lines) == 2 and all(len(x) <= width for x in lines), lines
    assert "123/2440" in lines[0] and "eta 0:09:25" in lines[0], lines[0]  # 30 s × 2317 / 123 = 565 s
    assert "0/600" in lines[1] and "eta measuring" in lines[1], lines[1]
    if width >= 100:
        assert "lm generator: training" in lines[0] and "loss 3.456 · 12,345 tok/s" in lines[0]


def test_a_run_hides_the_libraries_notices_keeps_their_errors_and_restores_their_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35, item 6: peft's and transformers' warnings and "Loading weights" bars reached the user of a run
    (CLI and Python API). Inside quiet_libraries they are hidden, errors pass, and a program's own warnings and
    the libraries' settings are as they were afterwards."""
    import logging
    import warnings

    from privtext.progress import quiet_libraries

    monkeypatch.delenv("PRIVTEXT_LIBRARY_WARNINGS", raising=False)
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    tl = pytest.importorskip("transformers.utils.logging")
    tl.set_verbosity_warning()
    tl.enable_progress_bar()

    def notices() -> list[str]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with quiet_libraries():
                assert not tl.is_progress_bar_enabled()  # "Loading weights" is transformers' own tqdm
                assert tl.get_verbosity() == logging.ERROR  # advisory log warnings hidden, errors pass
                warnings.warn_explicit("fan_in_fan_out is set to False", UserWarning, "layer.py", 1,
                                       module="peft.tuners.lora.layer")
                warnings.warn_explicit("is_gradient_checkpointing is deprecated", FutureWarning, "m.py", 1,
                                       module="transformers.modeling_utils")
                warnings.warn_explicit("yours", UserWarning, "app.py", 1, module="myapp")
                warnings.warn_explicit("a torch notice", UserWarning, "t.py", 1, module="torch.nn")
        return [str(w.message) for w in seen]

    assert notices() == ["yours", "a torch notice"]
    assert tl.get_verbosity() == logging.WARNING and tl.is_progress_bar_enabled()  # restored
    monkeypatch.setenv("PRIVTEXT_LIBRARY_WARNINGS", "1")  # the escape hatch shows everything
    assert len(notices_all := _all_notices(quiet_libraries)) == 2 and "fan_in_fan_out" in notices_all[0]


def _all_notices(quiet_libraries: object) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_libraries():  # type: ignore[operator]
            warnings.warn_explicit("fan_in_fan_out is set to False", UserWarning, "layer.py", 1,
                                   module="peft.tuners.lora.layer")
            warnings.warn_explicit("is_gradient_checkpointing is deprecated", FutureWarning, "m.py", 1,
                                   module="transformers.modeling_utils")
    return [str(w.message) for w in seen]
