"""``privtext audit RUN_DIR``: every release a run recorded checked against an independent derivation of its
sensitivity and of its noise (from the configuration and the budget), and attacked at that noise (DP-SGD: a
one-run canary audit); ``privtext audit --end-to-end CONFIG``: canaries planted in the
private data, the whole method run once, the shareable outputs attacked (docs/audit.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    from .app import handle_errors, out, print_json

    @app.command("audit")
    @handle_errors
    def audit_cmd(
        target: Annotated[Path, typer.Argument(help="run directory (or, with --end-to-end, a configuration)")],
        end_to_end: Annotated[bool, typer.Option("--end-to-end", help="plant canaries in the configuration's "
                                                 "private data, run the method once and attack what it shares")]
        = False,
        trials: Annotated[int | None, typer.Option("--trials", min=10, help="trials per side for DP releases "
                                                   "(default: the fewest that catch halved noise w.p. ≥ 0.95)")]
        = None,
        secret_trials: Annotated[int, typer.Option("--secret-trials", min=100,
                                                   help="trials per side for SecPE clusterings")] = 20000,
        canaries: Annotated[int | None, typer.Option("--canaries", min=1, help="end-to-end: canaries (membership) "
                                                     "or secrets (SecPE); a run's DP-SGD: the most canary "
                                                     "gradients; default from the claim")] = None,
        confidence: Annotated[float, typer.Option("--confidence", min=0.5, max=0.999999,
                                                  help="end-to-end: confidence of the bound")] = 0.95,
        workdir: Annotated[Path | None, typer.Option("--workdir", help="end-to-end: folder for the audit's "
                                                     "corpus and run")] = None,
        report: Annotated[bool, typer.Option("--report/--no-report", help="end-to-end: build report.html before "
                                             "the attack (it reads it too)")] = True,
        alpha: Annotated[float, typer.Option("--alpha", min=1e-9, max=0.5, help="each attack's error level: a "
                                             "correct mechanism fails with probability below it")] = 1e-3,
        seed: Annotated[int | None, typer.Option("--seed", min=0, help="seed the audit's own noise draws (a "
                                                 "reproducible audit; the run is not touched)")] = None,
        as_json: Annotated[bool, typer.Option("--json")] = False,
    ) -> None:
        """Exit 1 if a recorded sensitivity or noise differs from the derived one, or an attack beats its claim."""
        if end_to_end:
            from ..audit.endtoend import audit_end_to_end

            def build(root: Path) -> None:
                from ..report import build_report

                build_report(root)

            res = audit_end_to_end(target, canaries=canaries, confidence=confidence, workdir=workdir,
                                   after_run=build if report else None)
            if as_json:
                print_json(res.to_dict())
            else:
                for line in res.lines():
                    out.print(line, highlight=False)
            if not res.passed:
                raise typer.Exit(1)
            return
        import numpy as np

        from ..audit import audit_run

        results = audit_run(target, trials=trials, secret_trials=secret_trials, alpha=alpha,
                            rng=None if seed is None else np.random.default_rng(seed), dpsgd_canaries=canaries)
        if as_json:
            print_json({"audits": [r.to_dict() for r in results], "passed": all(r.passed for r in results)})
        else:
            if not results:
                out.print("no audited release kind in this run (no noisy release, or σ = 0)")
            for r in results:
                out.print(r.line(), highlight=False)
        if not all(r.passed for r in results):
            raise typer.Exit(1)
