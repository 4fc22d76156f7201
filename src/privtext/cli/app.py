"""The ``privtext`` application object and what every command shares (typer).

Every command exits non-zero with a one-line error on a :class:`~privtext.errors.PrivtextError` (or a bad
argument): 2, or :data:`AUDIT_FAILED` (3) for a failed privacy check (:class:`~privtext.errors.PrivacyCheckError`),
the code of a run whose prompt or output audit failed; ``--debug`` (before the command) shows the traceback instead.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from ..errors import PrivacyCheckError, PrivtextError

app = typer.Typer(
    name="privtext",
    help="Private synthetic text from foundation models (Aug-PE, SecPE, WASP, DP-KPS) with a stated guarantee.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    suggest_commands=False,  # click already says "Did you mean …?"; typer's would say it a second time
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)
console = Console(stderr=True)
out = Console()
_STATE: dict[str, Any] = {"debug": False}

F = TypeVar("F", bound=Callable[..., Any])

#: the exit code of a run that found private text where none may be: a privacy check that stopped it
#: (:class:`~privtext.errors.PrivacyCheckError`), or a finished run whose prompt or output audit failed (NOT PRIVATE)
AUDIT_FAILED = 3


def fail(message: str, code: int = 2) -> None:
    """Print ``error: MESSAGE`` and exit with ``code``. The message is printed as it is: brackets in it (a
    ``--set data.label_columns=[intnt]`` it echoes, a list of columns) are text, never rich markup."""
    from rich.markup import escape

    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def handle_errors(fn: F) -> F:
    """Turn expected errors into a one-line message and exit code 2 (1 for unexpected ones); a failed privacy
    check exits :data:`AUDIT_FAILED`, like a run whose prompt or output audit failed (issue 38: it exited 2)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except PrivacyCheckError as e:
            if _STATE["debug"]:
                raise
            fail(f"privacy check failed, the run stopped before writing synthetic data: {str(e).splitlines()[0]}",
                 AUDIT_FAILED)
        except PrivtextError as e:
            if _STATE["debug"]:
                raise
            fail(str(e).splitlines()[0] if str(e) else type(e).__name__, 2)
        except Exception as e:
            if _STATE["debug"]:
                raise
            fail(f"{type(e).__name__}: {e} (run with --debug for the traceback)", 1)

    return wrapper  # type: ignore[return-value]


def print_json(obj: Any) -> None:
    from ..atomicio import dumps

    sys.stdout.write(dumps(obj, indent=2) + "\n")


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        sys.stdout.write(f"privtext {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    _STATE["debug"] = debug
    if quiet:
        os.environ["PRIVTEXT_QUIET"] = "1"
        from ..progress import silence_libraries

        silence_libraries()


__all__ = ["app", "console", "fail", "handle_errors", "out", "print_json"]
