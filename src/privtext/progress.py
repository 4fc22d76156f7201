"""Progress display for long stages (rich, on stderr), in one place for the whole library.

Silent when ``PRIVTEXT_QUIET`` is set to anything but ``""``, ``0`` or ``false`` (the CLI's ``-q`` sets it), or when
stderr is not a terminal (bars only; :func:`say` messages still go to stderr unless quiet).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
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


#: the libraries whose own warnings about their internals a run hides (:func:`quiet_libraries`)
_NOISY = r"(transformers|peft|opacus|accelerate|huggingface_hub|sentence_transformers|tokenizers)(\.|$)"


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """While privtext loads and runs models (the runner wraps every run and resume in it): the libraries' notices
    about their own internals are hidden — transformers' and peft's FutureWarning/DeprecationWarning, peft's
    UserWarnings about module types ("fan_in_fan_out is set to False ..."), transformers' advisory log warnings
    ("We strongly recommend passing in an attention_mask ...") — and so are their progress bars ("Loading
    weights", hub downloads): privtext's one display shows where the time goes. Their errors are kept (log level
    ERROR and exceptions pass). The settings are restored afterwards, so a program that calls ``privtext.run``
    keeps its own (except the Hugging Face hub's download bars when the hub was first imported during the run: it
    reads that setting once). ``PRIVTEXT_LIBRARY_WARNINGS=1`` shows everything (for debugging a backend)."""
    if os.environ.get("PRIVTEXT_LIBRARY_WARNINGS", "") not in ("", "0", "false", "False"):
        yield
        return
    import warnings

    env = {"TRANSFORMERS_VERBOSITY": "error", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    saved_env = {k: os.environ.get(k) for k in env}
    tl = sys.modules.get("transformers.utils.logging")
    before = (tl.get_verbosity(), tl.is_progress_bar_enabled()) if tl is not None else None
    for k, v in env.items():
        os.environ.setdefault(k, v)
    if tl is not None:
        tl.set_verbosity_error()
        tl.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=_NOISY)
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=_NOISY)
            warnings.filterwarnings("ignore", category=UserWarning, module=r"peft(\.|$)")
            yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        tl = sys.modules.get("transformers.utils.logging")
        if tl is not None:
            import logging

            if before is None:  # imported during the run: what it would have been without privtext
                before = (logging.WARNING if saved_env["TRANSFORMERS_VERBOSITY"] is None else tl.get_verbosity(),
                          saved_env["HF_HUB_DISABLE_PROGRESS_BARS"] is None and not os.environ.get("TQDM_DISABLE"))
            tl.set_verbosity(before[0])
            if before[1]:
                with warnings.catch_warnings():  # the hub keeps a setting it read at import: it may refuse
                    warnings.simplefilter("ignore")
                    tl.enable_progress_bar()


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


#: how long the last finished bar of each kind took (its description with the numbers taken out: "iter #: voting"),
#: so a bar that has not finished its first unit yet (voting "0/1") can still show an ETA
_DURATIONS: dict[str, float] = {}


def _kind(description: str) -> str:
    return re.sub(r"\d+", "#", description)


def remaining_seconds(task: Any) -> tuple[float | None, bool]:
    """(seconds left, whether that is an estimate from an earlier bar of the same kind) for a rich task.

    rich's own estimate (``task.time_remaining``) needs two updates within its 30-second speed window, so a bar
    whose units take longer (an iteration, a DP fine-tuning step) showed ``-:--:--`` for ever. Here: rich's speed
    when it has one, else the mean rate since the bar started (elapsed / completed), else, before the first unit,
    the time the last bar of the same kind took (the previous iteration's voting) less the time spent so far;
    None when nothing is known yet."""
    total = task.total
    if total is None:
        return None, False
    if task.finished or task.completed >= total:
        return 0.0, False
    left = total - task.completed
    speed = task.speed
    if speed:
        return left / speed, False
    elapsed = task.elapsed or 0.0
    if task.completed > 0 and elapsed > 0:
        return elapsed * left / task.completed, False
    last = _DURATIONS.get(_kind(str(task.description)))
    if last is not None:
        return max(0.0, last - elapsed), True
    return None, False


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class _Eta:
    """``eta 0:01:23`` (``eta ~0:01:23`` from an earlier bar of the same kind; ``eta measuring`` before
    anything is known): :func:`remaining_seconds`."""

    def __new__(cls, width: int) -> Any:  # a rich ProgressColumn, built lazily (rich imports on first display)
        from rich.progress import ProgressColumn
        from rich.table import Column
        from rich.text import Text

        class Eta(ProgressColumn):
            max_refresh = 0.5

            def render(self, task: Any) -> Text:
                left, approx = remaining_seconds(task)
                text = "eta measuring" if left is None else f"eta {'~' if approx else ''}{_clock(left)}"
                return Text(text, style="progress.remaining")

        return Eta(table_column=Column(width=width, no_wrap=True, overflow="crop"))


#: the widths of the fixed parts of a bar's line: the ETA ("eta ~0:00:00"), the elapsed time ("0:00:00")
_ETA_WIDTH, _ELAPSED_WIDTH = 13, 7


def _columns(width: int | None = None, tasks: Sequence[Any] = ()) -> list[Any]:
    """The columns of a bar's line fitted to ``width`` characters: the count (done/total) and the ETA are never
    cut; the description and the note (loss, tokens/s) are shortened with "…", the bar narrows to 8, and the
    elapsed time goes first when the line is narrow (under 100 columns). Without ``width``: the full layout."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.table import Column

    w = 160 if width is None else max(40, int(width))
    counts = max([len(f"{int(t.completed)}/{int(t.total)}") for t in tasks if t.total is not None] or [9])
    descs = max([len(str(t.description)) for t in tasks] or [24])
    notes = max([len(str(t.fields.get("note", ""))) for t in tasks] or [0])
    elapsed = w >= 100
    fixed = counts + _ETA_WIDTH + (_ELAPSED_WIDTH if elapsed else 0)
    gaps = 4 + elapsed + (notes > 0)  # one space between columns
    desc_w = min(descs, max(12, min(28, (w - fixed - gaps) // 2)))
    bar_w = max(8, min(40, w - fixed - gaps - desc_w - min(notes, 30)))
    note_w = max(0, min(notes, w - fixed - gaps - desc_w - bar_w))
    cols: list[Any] = [
        TextColumn("[bold]{task.description}", table_column=Column(width=desc_w, no_wrap=True, overflow="ellipsis")),
        BarColumn(bar_width=bar_w),
        TextColumn("{task.completed:.0f}/{task.total:.0f}", justify="right",
                   table_column=Column(width=counts, no_wrap=True, justify="right")),
    ]
    if elapsed:
        cols.append(TimeElapsedColumn(table_column=Column(width=_ELAPSED_WIDTH, no_wrap=True)))
    cols.append(_Eta(_ETA_WIDTH))
    if notes and note_w >= 6:
        cols.append(TextColumn("{task.fields[note]}", table_column=Column(width=note_w, no_wrap=True,
                                                                          overflow="ellipsis")))
    return cols


def _progress(**kw: Any) -> Any:
    """A rich Progress whose line is laid out for the terminal's width at every refresh (:func:`_columns`)."""
    from rich.progress import Progress

    class Fitted(Progress):
        def make_tasks_table(self, tasks: Any) -> Any:
            shown = [t for t in tasks if t.visible]
            live = getattr(self, "live", None)  # None while rich's __init__ builds its first frame
            self.columns = tuple(_columns(live.console.width if live is not None else None, shown))
            return super().make_tasks_table(shown)

    return Fitted(*_columns(), **kw)


@contextlib.contextmanager
def display() -> Iterator[None]:
    """One live display for a whole run: every :func:`progress` bar opened inside it is a line of it (the run's
    iterations, and under them the stage at work: generation, embedding, voting), each with its ETA. Nothing is
    shown when quiet or when stderr is not a terminal."""
    if not _shown() or _DISPLAY:
        yield
        return
    from rich.console import Console

    with _progress(console=Console(stderr=True), transient=True) as prog:
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
            _remember(prog, task)
        finally:
            prog.remove_task(task)
        return
    from rich.console import Console

    with _progress(console=Console(stderr=True), transient=True) as prog, \
            _opened(_Bar(prog, prog.add_task(description, total=total, note=""))) as bar:
        yield bar
        _remember(prog, bar.task)


def _remember(prog: Any, task_id: Any) -> None:
    """Keep how long a finished bar took, for the ETA of the next bar of its kind (:func:`remaining_seconds`)."""
    for t in prog.tasks:
        if t.id == task_id and t.total is not None and t.completed >= t.total and t.elapsed:
            _DURATIONS[_kind(str(t.description))] = float(t.elapsed)


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


__all__ = ["advance", "display", "hide_library_bars", "progress", "quiet", "quiet_libraries", "remaining_seconds",
           "say", "silence_libraries", "steps"]
