"""``privtext cache info`` / ``privtext cache clear``: the user's private embedding cache
(:mod:`privtext.embed.private`: embeddings of private corpora, kept per user so a later run does not embed them
again)."""

from __future__ import annotations

from typing import Annotated

import typer


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def register(app: typer.Typer) -> None:
    from .app import handle_errors, out, print_json

    cache_app = typer.Typer(help="The private embedding cache: private corpora's embeddings, kept per user.",
                            no_args_is_help=True, suggest_commands=False)

    @cache_app.command("info")
    @handle_errors
    def info_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Where the cache is, its size, and its vectors per model id (no text, no vector is shown)."""
        from ..embed.private import private_cache_info

        info = private_cache_info()
        if as_json:
            print_json(info)
            return
        if not info["exists"]:
            out.print(f"no private embedding cache at {info['path']}", highlight=False)
            return
        out.print(f"{info['path']}: {_size(info['bytes'])}", highlight=False)
        for model, n in info["models"].items():
            out.print(f"  {n:>9} vectors  {model}", highlight=False)

    @cache_app.command("clear")
    @handle_errors
    def clear_cmd(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Delete the private embedding cache (vectors and salt). Later runs embed their private corpora again."""
        from ..embed.private import clear_private_cache

        info = clear_private_cache()
        if as_json:
            print_json({"cleared": info["exists"], **info})
        elif info["exists"]:
            n = sum(info["models"].values())
            out.print(f"deleted {info['path']} ({n} vectors, {_size(info['bytes'])})", highlight=False)
        else:
            out.print(f"nothing to delete: no private embedding cache at {info['path']}", highlight=False)

    app.add_typer(cache_app, name="cache")
