"""The ``privtext`` command line (typer). The only package that imports typer: library modules never do.

* :mod:`.app` — the application, one-line errors (``--debug`` for tracebacks), JSON output;
* :mod:`.run` — ``run``, ``resume``, ``demo``;
* :mod:`.budget` — ``budget ...`` privacy calculators;
* :mod:`.evaluate` — ``evaluate``, ``compare``, ``report``;
* :mod:`.cache` — ``cache info``, ``cache clear`` (the private embedding cache);
* :mod:`.profile` — ``profile`` (per-stage time and throughput of a run).
"""

from __future__ import annotations

from .app import app, console, fail, handle_errors, out, print_json

_MOUNTED = False


def _mount() -> None:
    """Register every command group on :data:`app` (once)."""
    global _MOUNTED
    if _MOUNTED:
        return
    _MOUNTED = True
    from .audit import register as register_audit
    from .budget import app as budget_app
    from .cache import register as register_cache
    from .evaluate import register as register_evaluate
    from .profile import register as register_profile
    from .run import register as register_run

    app.add_typer(budget_app, name="budget", help="Privacy calculators: noise, ε, μ, (p, r).")
    register_run(app)
    register_evaluate(app)
    register_audit(app)
    register_cache(app)
    register_profile(app)


#: the global options that may also follow the command (``privtext run cfg.yaml -q``)
GLOBAL_FLAGS = ("-q", "--quiet", "--debug")


def global_flags_first(argv: list[str]) -> list[str]:
    """``argv`` with the global flags (-q, --debug) moved in front of the command, wherever they were typed: every
    command accepts them (a value that follows ``--set`` or another option is never taken for one)."""
    flags, rest = [], []
    for i, a in enumerate(argv):
        takes_value = i > 0 and argv[i - 1] in ("--set", "-o", "--output", "--out", "--real")
        (flags if a in GLOBAL_FLAGS and not takes_value else rest).append(a)
    return [*dict.fromkeys(flags), *rest]


def main(argv: list[str] | None = None) -> None:
    import sys

    from ..progress import hide_library_bars

    hide_library_bars()  # before any heavy import reads its environment
    _mount()
    args = list(sys.argv[1:] if argv is None else argv)
    app(args=global_flags_first(args), prog_name="privtext")


__all__ = ["app", "console", "fail", "handle_errors", "main", "out", "print_json"]
