"""Can a Hugging Face model be loaded here? Checked before a run directory exists (``privtext run``'s pre-flight),
so that a model that cannot load offline fails at once with the folder to fill instead of after the hub client's
retries, and leaves nothing behind.

A model is loadable when it is a local folder, or when its files are in the Hugging Face cache, or when the hub
can be reached. Offline (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set, or no connection to the hub within
two seconds) a model that is not cached is refused with the exact cache path to fill."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ..errors import BackendError

_TRUE = {"1", "true", "yes", "on"}


def offline() -> bool:
    """Whether the hub must not be contacted (the environment says so) or cannot be (no connection in 2 s)."""
    if any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    host = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
    try:
        with socket.create_connection((host, 443), timeout=2.0):
            return False
    except OSError:
        return True


def cache_folder(model: str) -> Path:
    """Where the hub client keeps (or would keep) ``model``'s files."""
    try:
        from huggingface_hub import constants

        root = Path(constants.HF_HUB_CACHE)
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers/sentence-transformers
        root = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    return root / ("models--" + model.replace("/", "--"))


def is_cached(model: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return cache_folder(model).is_dir()
    hit = try_to_load_from_cache(model, "config.json")
    return isinstance(hit, str) and Path(hit).exists()


def check_model_available(model: str, *, what: str) -> None:
    """Raise :class:`BackendError` when ``model`` (a local path or a hub id) cannot be loaded here."""
    p = Path(model).expanduser()
    if p.exists():
        if not p.is_dir() or not (p / "config.json").exists():
            raise BackendError(f"{what}: {p} is not a model folder (no config.json in it)")
        return
    if model.startswith(("/", "./", "../", "~")):
        raise BackendError(f"{what}: no model folder at {p}")
    if is_cached(model) or not offline():
        return
    raise BackendError(
        f"{what}: model {model!r} is not in the Hugging Face cache and the hub cannot be reached (offline): put "
        f"its files in {cache_folder(model)} (e.g. `huggingface-cli download {model}` on a machine with network, "
        "then copy the folder), or give a local model folder")


__all__ = ["cache_folder", "check_model_available", "is_cached", "offline"]
