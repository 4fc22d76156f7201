"""``privtext audit RUN_DIR``: empirical audits of every kind of noisy release a run recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    from .app import handle_errors, out, print_json

    @app.command("audit")
    @handle_errors
    def audit_cmd(
        run_dir: Annotated[Path, typer.Argument(help="run directory")],
        trials: Annotated[int, typer.Option("--trials", min=10, help="trials per side for DP releases")] = 2000,
        secret_trials: Annotated[int, typer.Option("--secret-trials", min=100,
                                                   help="trials per side for SecPE clusterings")] = 20000,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Run each recorded mechanism many times on a worst-case neighbouring pair and check that the best
        attack found does no better than the recorded claim (exit 1 if one does). Reads no private data."""
        from ..audit import audit_run

        results = audit_run(run_dir, trials=trials, secret_trials=secret_trials)
        if as_json:
            print_json({"audits": [r.to_dict() for r in results], "passed": all(r.passed for r in results)})
        else:
            if not results:
                out.print("no audited release kind in this run (no noisy release, or σ = 0)")
            for r in results:
                out.print(r.line(), highlight=False)
        if not all(r.passed for r in results):
            raise typer.Exit(1)
