"""privtext: private synthetic text from foundation models (Aug-PE, SecPE, WASP, DP-KPS).

``privtext.run``, ``privtext.resume``, ``privtext.load`` and ``privtext.Run`` are the Python API
(:mod:`privtext.api`, docs/api.md); they load on first use, so ``import privtext`` stays cheap.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__version__ = "0.1.0"

if os.environ.get("PRIVTEXT_QUIET", "") not in ("", "0", "false", "False"):
    from .progress import silence_libraries

    silence_libraries()

_API = ("Run", "load", "resume", "run")


def __getattr__(name: str) -> Any:
    if name in _API:
        value = getattr(importlib.import_module("privtext.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privtext' has no attribute {name!r}")


__all__ = ["Run", "__version__", "load", "resume", "run"]
