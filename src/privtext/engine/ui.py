"""Progress bars for long stages (rich), silent when PRIVTEXT_QUIET=1 or stderr is not a terminal."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def quiet() -> bool:
    return os.environ.get("PRIVTEXT_QUIET") == "1"


class _Bar:
    def __init__(self, prog: Any, task: Any):
        self.prog, self.task = prog, task

    def advance(self, n: float = 1) -> None:
        if self.prog is not None:
            self.prog.advance(self.task, n)


@contextlib.contextmanager
def progress(description: str, total: float | None) -> Iterator[_Bar]:
    if quiet() or not sys.stderr.isatty():
        yield _Bar(None, None)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield _Bar(prog, task)


def say(message: str) -> None:
    if not quiet():
        from rich.console import Console

        Console(stderr=True).print(message, highlight=False)
