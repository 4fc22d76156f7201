"""``privtext run``, ``privtext resume`` and ``privtext demo``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    from .cli import handle_errors, out, print_json

    @app.command("run")
    @handle_errors
    def run_cmd(
        config: Annotated[Path, typer.Argument(help="YAML configuration")],
        set_: Annotated[list[str] | None, typer.Option("--set", help="override a key: a.b=value (repeatable)")] = None,
        output: Annotated[Path | None, typer.Option("--output", "-o", help="run directory (default: config output)")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    ) -> None:
        """Run a private synthesis job and write its run directory."""
        from .config import load_config
        from .runner import run_config

        cfg = load_config(config, overrides=set_ or [])
        root = run_config(cfg, out=output)
        _summary(root, as_json, out, print_json)

    @app.command("resume")
    @handle_errors
    def resume_cmd(
        run_dir: Annotated[Path, typer.Argument(help="run directory of an interrupted run")],
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Continue an interrupted run from its last complete iteration (released noise is reused)."""
        from .runner import resume_run

        root = resume_run(run_dir)
        _summary(root, as_json, out, print_json)

    @app.command("demo")
    @handle_errors
    def demo_cmd(
        out_dir: Annotated[Path, typer.Option("--out", help="where to write the demo data and run")] = Path("privtext-demo"),
        method: Annotated[str, typer.Option(help="secpe (default) or augpe")] = "secpe",
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Make a small clinic-notes corpus with planted secrets and run it end to end offline."""
        from .demo import run_demo

        root = run_demo(out_dir, method=method)
        _summary(root, as_json, out, print_json, demo=True)


def _summary(root: Path, as_json: bool, out, print_json, demo: bool = False) -> None:
    privacy = json.loads((root / "privacy.json").read_text(encoding="utf-8"))
    metrics = json.loads((root / "metrics.json").read_text(encoding="utf-8"))
    report = root / "report.html"
    info = {
        "run_dir": str(root),
        "synthetic": str(root / "synthetic.jsonl"),
        "privacy": str(root / "privacy.json"),
        "report": str(report) if report.exists() else None,
        "records": metrics.get("counters", {}).get("synthetic_records"),
        "statement": privacy.get("statement"),
        "wall_seconds": metrics.get("wall_seconds"),
        "prompt_audit_clean": privacy.get("prompt_audit", {}).get("clean"),
    }
    if as_json:
        print_json(info)
        return
    out.print(f"[bold]run directory[/]  {info['run_dir']}")
    out.print(f"[bold]synthetic data[/] {info['synthetic']}  ({info['records']} records)")
    out.print(f"[bold]privacy[/]        {info['privacy']}")
    if info["statement"]:
        out.print(f"  {info['statement']}", highlight=False)
    out.print(f"[bold]prompt audit[/]   {'clean: no prompt holds private text' if info['prompt_audit_clean'] else 'FLAGGED — see privacy.json'}")
    if info["report"]:
        out.print(f"[bold]report[/]         {info['report']}")
    out.print(f"[bold]wall time[/]      {info['wall_seconds']} s")
