"""Progress display for long evaluation stages (rich, on stderr; silent when PRIVTEXT_QUIET=1)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


def quiet_default() -> bool:
    return os.environ.get("PRIVTEXT_QUIET", "") not in ("", "0", "false", "False")


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
    if quiet_default() if quiet is None else quiet:
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
