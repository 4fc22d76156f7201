"""``privtext run``, ``privtext resume`` and ``privtext demo``."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer

#: the exit code of a finished run whose prompt or output audit found private text (NOT PRIVATE), and of a run
#: that a privacy check stopped (:func:`privtext.cli.app.handle_errors`)
from .app import AUDIT_FAILED


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT/SIGTERM become a KeyboardInterrupt at the next safe point (every whole-file write is a temporary
    file renamed into place, and a ledger line is one write: nothing is left half-done); a second signal exits at
    once (code 130)."""
    hits = [0]

    def handler(signum: int, frame: object) -> None:
        hits[0] += 1
        if hits[0] > 1:
            os._exit(130)
        raise KeyboardInterrupt

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _interrupted(root: Path | None, console: object) -> None:
    from ..rundir import RunDir

    if root is not None and RunDir(root).config.exists():
        msg = (f"interrupted; `privtext resume {shlex.quote(str(root))}` continues (released values are kept and "
               "never redrawn; the step in progress is redone)")
    else:
        msg = "interrupted before the run started; nothing was written"
    console.print(f"[bold yellow]{msg}[/]", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
    raise typer.Exit(130)


def register(app: typer.Typer) -> None:
    from .app import console, handle_errors, out, print_json

    @app.command("run")
    @handle_errors
    def run_cmd(
        config: Annotated[Path, typer.Argument(help="YAML configuration")],
        set_: Annotated[list[str] | None, typer.Option("--set", help="override a key: a.b=value (repeatable)")] = None,
        output: Annotated[Path | None, typer.Option("--output", "-o", help="run directory (default: config output)")] = None,
        force: Annotated[bool, typer.Option(
            "--force", help="replace a failed start: a run directory privtext made that released nothing and holds "
            "nothing else (never a folder with the inputs or other files; checked after the configuration)")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Run a private synthesis job and write its run directory."""
        from ..config import load_config
        from ..runner import run_config

        cfg = load_config(config, overrides=set_ or [])
        target = Path(output if output is not None else cfg.output)
        _refuse_finished(target)
        _run_and_summarise(lambda: run_config(cfg, out=output, force=force), target, as_json)

    @app.command("resume")
    @handle_errors
    def resume_cmd(
        run_dir: Annotated[Path, typer.Argument(help="run directory of an interrupted run")],
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Continue an interrupted run from its last complete iteration (released noise is reused)."""
        from ..runner import resume_run

        _run_and_summarise(lambda: resume_run(run_dir), run_dir, as_json)

    def _run_and_summarise(start: Callable[[], Path], target: Path, as_json: bool) -> None:
        """Run ``start`` (a new run or a resume writing into ``target``) so that SIGINT/SIGTERM stop it cleanly
        (:func:`interruptible`; exit 130 with the resume line), then print the summary and exit
        :data:`AUDIT_FAILED` where its prompt or output audit failed."""
        try:
            with interruptible():
                root = start()
        except KeyboardInterrupt:
            _interrupted(target, console)
        _summary(root, as_json, out, print_json)
        _exit_if_the_audit_failed(root)

    @app.command("demo")
    @handle_errors
    def demo_cmd(
        out_dir: Annotated[Path, typer.Option(
            "--output", "-o", "--out", help="where to write the demo data and run (default runs/demo, under the "
            "current folder; printed at the end)")] = Path(DEMO_FOLDER),
        method: Annotated[str, typer.Option(help=DEMO_HELP)] = DEMO_DEFAULT,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Make a small clinic-notes corpus with planted secrets and run it end to end offline."""
        from ..demo import run_demo

        root = run_demo(out_dir, method=method)
        _summary(root, as_json, out, print_json, demo=True)


def _exit_if_the_audit_failed(root: Path) -> None:
    """A finished run whose prompt audit or output audit failed exits with :data:`AUDIT_FAILED`, so a script or CI
    job never ships its synthetic data by mistake (issue 35: such runs exited 0). A run that is NOT PRIVATE because
    the user asked for it (reproducible noise, a noise multiplier of 0) exits 0: its statement says so."""
    from ..rundir import RunDir

    audit = json.loads(RunDir(root).privacy.read_text(encoding="utf-8")).get("prompt_audit") or {}
    if audit.get("passed") is False or audit.get("output_passed") is False:
        raise typer.Exit(AUDIT_FAILED)


#: the demo's methods for ``privtext demo --help``: the methods that declare demo settings (``MethodRun.demo``;
#: privtext.demo.demo_methods, which imports every method: too slow for the CLI's start, so written here and
#: checked against it by tests/test_method_contract.py)
DEMO_HELP = "augpe, dpkps, secpe (the default) or wasp: a method that declares demo settings"
DEMO_DEFAULT = "secpe"


#: the demo's default folder, under the current one (``runs/`` is where the README's runs go, and git ignores it)
DEMO_FOLDER = "runs/demo"


def _refuse_finished(target: Path) -> None:
    """A finished run is never resumed or replaced: say so before anything runs (``privtext resume`` is only for
    an interrupted run)."""
    from ..errors import RunError
    from ..rundir import RunDir

    run = RunDir(target)
    if run.synthetic.exists() and run.privacy.exists():
        raise RunError(f"{target} already holds a finished run ({run.synthetic.name}, {run.privacy.name}); choose "
                       "another output (-o DIR): a finished run is neither resumed nor replaced")


def _statement_lines(privacy: dict) -> list[str]:
    """The statement as the report shows it: the headline, what it means in plain words, then one line per
    part (:func:`privtext.privacy.statement.section_line`)."""
    from ..privacy.statement import section_line, statement_sections

    if not privacy.get("headline"):
        return [str(privacy.get("statement") or "")]
    return [section_line(heading, items) for heading, items in statement_sections(privacy)]


def _summary(root: Path, as_json: bool, out, print_json, demo: bool = False) -> None:
    from rich.markup import escape

    from ..rundir import RunDir

    run = RunDir(root)
    privacy = json.loads(run.privacy.read_text(encoding="utf-8"))
    metrics = json.loads(run.metrics.read_text(encoding="utf-8")) if run.metrics.exists() else {}
    audit = privacy.get("prompt_audit", {})
    info = {
        "run_dir": str(root),
        "synthetic": str(run.synthetic),
        "privacy": str(run.privacy),
        "report": str(run.report) if run.report.exists() else None,
        "records": metrics.get("counters", {}).get("synthetic_records"),
        "private": privacy.get("private"),
        "headline": privacy.get("headline"),
        "statement": privacy.get("statement"),
        "wall_seconds": metrics.get("wall_seconds"),
        "prompt_audit_clean": audit.get("passed", audit.get("clean")),
        "private_diagnostics": str(run.private),
        "meaning": (privacy.get("meaning") or {}).get("words"),
        "strength": (privacy.get("meaning") or {}).get("strength"),
    }
    if demo:
        from ..demo import demo_summary

        info["demo"] = demo_summary(root)
    if as_json:
        print_json(info)
        return
    e = escape
    out.print(f"[bold]run directory[/]  {e(info['run_dir'])}", highlight=False)
    out.print(f"[bold]synthetic data[/] {e(info['synthetic'])}  ({info['records']} records)", highlight=False)
    out.print(f"[bold]privacy[/]        {e(info['privacy'])}", highlight=False)
    if info["statement"]:
        style = "" if info["private"] else "[bold red]"
        for line in _statement_lines(privacy):
            weak = info["strength"] in ("weak", "void") and line == info["meaning"]
            out.print(f"  {'[bold yellow]' if weak and info['private'] else style}{escape(line)}", highlight=False)
    out.print("[bold]prompt audit[/]   " + ("passed: no prompt holds private text that no public source explains"
                                          if info["prompt_audit_clean"] else
                                          f"FAILED — `privtext diagnose {e(info['run_dir'])} --prompts` shows what "
                                          "matched (docs/privacy.md: what to do)"), highlight=False)
    if info["report"]:
        out.print(f"[bold]report[/]         {e(info['report'])}", highlight=False)
    out.print(f"[bold]private[/]        {e(info['private_diagnostics'])} (ledger, checkpoints, log, diagnostics: do "
              "not share)", highlight=False)
    out.print(f"[bold]wall time[/]      {info['wall_seconds']} s")
    if demo:
        out.print(f"[bold]what it shows[/]  {escape(info['demo']['words'])}", highlight=False)
        out.print(f"[bold]demo folder[/]    {escape(str(Path(root).parent))} (its data, configuration and run; "
                  "`privtext demo -o DIR` puts it elsewhere)", highlight=False)
