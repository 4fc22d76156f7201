"""``privtext profile RUN_DIR``: where a run's time went — seconds, share of the wall time, and throughput per
stage (from ``private/metrics.json``), per iteration with ``--iterations``, and what the embedder did (private
texts read from the private cache or embedded; votes re-decided in fp32 with ``runtime: auto``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

#: the count each stage's throughput is measured in
UNITS = {"embedding": "texts", "embedding_private": "texts", "generation": "texts", "voting": "candidates"}


def profile_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per stage: name, seconds, share of the run's wall time, calls, items and items per second."""
    wall = float(metrics.get("wall_seconds") or 0.0)
    rows = []
    for name, st in metrics.get("stages", {}).items():
        sec = float(st.get("seconds", 0.0))
        unit = UNITS.get(name)
        items = st.get(unit) if unit else None
        rows.append({"stage": name, "seconds": round(sec, 3), "share": round(sec / wall, 4) if wall else None,
                     "calls": int(st.get("calls", 0)), "unit": unit, "items": items,
                     "per_second": round(items / sec, 2) if items and sec > 0 else None})
    return rows


def register(app: typer.Typer) -> None:
    from .app import fail, handle_errors, out, print_json

    @app.command("profile")
    @handle_errors
    def profile_cmd(
        run_dir: Annotated[Path, typer.Argument(help="run directory")],
        iterations: Annotated[bool, typer.Option("--iterations", help="one table per iteration too")] = False,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Per-stage time and throughput of a run (reads its private metrics: run it where the run lives)."""
        import json

        from ..rundir import RunDir

        path = RunDir(run_dir).metrics
        if not path.exists():
            fail(f"no metrics at {path}: not a run directory, or the run never started")
        metrics = json.loads(path.read_text(encoding="utf-8"))
        rows = profile_rows(metrics)
        counters = metrics.get("counters", {})
        if as_json:
            print_json({"wall_seconds": metrics.get("wall_seconds"), "stages": rows, "counters": counters,
                        "per_iteration": metrics.get("per_iteration", {}) if iterations else None})
            return
        from rich.table import Table

        def table(title: str, stage_rows: list[dict[str, Any]]) -> Table:
            t = Table(title=title, title_justify="left")
            for col, just in [("stage", "left"), ("seconds", "right"), ("share", "right"), ("calls", "right"),
                              ("items", "right"), ("per second", "right")]:
                t.add_column(col, justify=just)  # type: ignore[arg-type]
            for r in stage_rows:
                t.add_row(r["stage"], f"{r['seconds']:.2f}", f"{r['share']:.1%}" if r["share"] is not None else "",
                          str(r["calls"]) if r["calls"] else "",
                          f"{r['items']:g} {r['unit']}" if r["items"] else "",
                          f"{r['per_second']:.1f}" if r["per_second"] else "")
            return t

        out.print(table(f"{run_dir}: {metrics.get('method', '?')}, wall {metrics.get('wall_seconds', 0):.1f} s"
                        + (" (resumed)" if metrics.get("resumed") else ""), rows))
        if iterations:
            for it, stages in sorted(metrics.get("per_iteration", {}).items(), key=lambda kv: int(kv[0])):
                per = profile_rows({"stages": {k: {**v, "calls": 0} for k, v in stages.items()},
                                    "wall_seconds": metrics.get("wall_seconds")})
                out.print(table(f"iteration {it}", per))
        shown = {k: v for k, v in counters.items() if k.startswith(("private_embedding_", "exact_"))}
        for name in ("embedding", "voting"):
            for k, v in metrics.get("stages", {}).get(name, {}).items():
                if k.startswith(("tier", "exact_")):
                    shown[f"{name}.{k}"] = v
        if shown:
            out.print("embedder: " + ", ".join(f"{k} {v:g}" for k, v in sorted(shown.items())), highlight=False)
