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

    def note(self, text: str) -> None:
        """A short status shown after the bar (e.g. the current loss and tokens/s)."""
        if self.prog is not None:
            self.prog.update(self.task, note=text)


@contextlib.contextmanager
def progress(description: str, total: float | None, *, eta: bool = False) -> Iterator[_Bar]:
    """A bar for ``total`` units of work: ``with progress("embedding", n) as bar: ... bar.advance(k)``.
    ``eta=True`` adds the estimated time remaining; :meth:`_Bar.note` shows a status after the bar."""
    if quiet() or not sys.stderr.isatty():
        yield _Bar(None, None)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn()]
    if eta:
        columns += [TextColumn("ETA"), TimeRemainingColumn()]
    columns.append(TextColumn("{task.fields[note]}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(description, total=total, note="")
        yield _Bar(prog, task)


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
    """A one-line message on stderr (unless quiet)."""
    if not quiet():
        from rich.console import Console

        Console(stderr=True).print(message, highlight=False)


__all__ = ["progress", "quiet", "say", "silence_libraries", "steps"]
