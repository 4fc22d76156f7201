"""Progress display for long stages (rich, on stderr), in one place for the whole library.

Silent when ``PRIVTEXT_QUIET`` is set to anything but ``""``, ``0`` or ``false`` (the CLI's ``-q`` sets it), or when
stderr is not a terminal (bars only; :func:`say` messages still go to stderr unless quiet).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def quiet() -> bool:
    return os.environ.get("PRIVTEXT_QUIET", "") not in ("", "0", "false", "False")


def hide_library_bars() -> None:
    """The libraries' own progress bars (tqdm, the Hugging Face hub, transformers' "Loading weights") are hidden
    on the command line whether quiet or not: privtext's one display shows where the time goes. Their warnings
    are kept (only :func:`silence_libraries` hides those)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def silence_libraries() -> None:
    """Quiet means quiet: also the progress bars of tqdm, the Hugging Face hub and transformers (model loading).
    tqdm reads its environment when it is first imported, so this runs before any heavy import (``privtext``'s
    ``__init__`` when ``PRIVTEXT_QUIET`` is set; the CLI's ``-q``)."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


class _Bar:
    def __init__(self, prog: Any, task: Any):
        self.prog, self.task = prog, task

    def advance(self, n: float = 1) -> None:
        if self.prog is not None:
            self.prog.advance(self.task, n)

    def update(self, **kw: Any) -> None:
        if self.prog is not None:
            self.prog.update(self.task, **kw)

    def note(self, text: str) -> None:
        """A short status shown after the bar (e.g. the current loss and tokens/s)."""
        if self.prog is not None:
            self.prog.update(self.task, note=text)


#: the live display of a run (one rich Progress: a second live display would be refused), and the bars on it
_DISPLAY: list[Any] = []
_BARS: list[_Bar] = []


def _shown() -> bool:
    return not quiet() and sys.__stderr__ is not None and sys.__stderr__.isatty()


def _columns() -> list[Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[note]}")]


@contextlib.contextmanager
def display() -> Iterator[None]:
    """One live display for a whole run: every :func:`progress` bar opened inside it is a line of it (the run's
    iterations, and under them the stage at work: generation, embedding, voting), each with its ETA. Nothing is
    shown when quiet or when stderr is not a terminal."""
    if not _shown() or _DISPLAY:
        yield
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*_columns(), console=Console(stderr=True), transient=True) as prog:
        _DISPLAY.append(prog)
        try:
            yield
        finally:
            _DISPLAY.pop()


@contextlib.contextmanager
def _opened(bar: _Bar) -> Iterator[_Bar]:
    _BARS.append(bar)
    try:
        yield bar
    finally:
        _BARS.pop()


@contextlib.contextmanager
def progress(description: str, total: float | None, *, eta: bool = True) -> Iterator[_Bar]:
    """A bar for ``total`` units of work: ``with progress("embedding", n) as bar: ... bar.advance(k)``; a line of
    the run's :func:`display` when one is live, else a display of its own, with its ETA (``eta`` is accepted for
    older callers; every bar shows it). :meth:`_Bar.note` shows a status after the bar. Code deeper down (an
    embedder's batches) advances the innermost bar with :func:`advance` without knowing about it."""
    if not _DISPLAY and not _shown():  # (inside a live display rich proxies stderr, which is then no tty)
        with _opened(_Bar(None, None)) as bar:
            yield bar
        return
    if _DISPLAY:
        prog = _DISPLAY[-1]
        task = prog.add_task(description, total=total, note="")
        try:
            with _opened(_Bar(prog, task)) as bar:
                yield bar
        finally:
            prog.remove_task(task)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*_columns(), console=Console(stderr=True), transient=True) as prog, \
            _opened(_Bar(prog, prog.add_task(description, total=total, note=""))) as bar:
        yield bar


def advance(n: float = 1) -> None:
    """Advance the innermost open bar by ``n`` (nothing when none is open or nothing is shown)."""
    if _BARS:
        _BARS[-1].advance(n)


class _Steps:
    def __init__(self, progress: Any, task: Any):
        self._p, self._t = progress, task

    def step(self, description: str) -> None:
        """Mark the previous step done and show ``description`` as the current one."""
        if self._p is not None:
            self._p.update(self._t, description=description)
            self._p.advance(self._t)

    def note(self, description: str) -> None:
        if self._p is not None:
            self._p.update(self._t, description=description)


@contextlib.contextmanager
def steps(total: int, *, title: str, quiet: bool | None = None) -> Iterator[_Steps]:
    """Named steps of a longer job (evaluation): ``with steps(5, title="evaluate") as s: s.step("FID")``."""
    if (globals()["quiet"]() if quiet is None else quiet) or not sys.stderr.isatty():
        yield _Steps(None, None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(f"[bold]{title}[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), console=Console(stderr=True), transient=True,
    ) as p:
        t = p.add_task("", total=total)
        yield _Steps(p, t)


def say(message: str) -> None:
    """A one-line message on stderr (unless quiet); above the live display when one is shown."""
    if not quiet():
        if _DISPLAY:
            _DISPLAY[-1].console.print(message, highlight=False)
            return
        from rich.console import Console

        Console(stderr=True).print(message, highlight=False)


__all__ = ["advance", "display", "hide_library_bars", "progress", "quiet", "say", "silence_libraries", "steps"]
