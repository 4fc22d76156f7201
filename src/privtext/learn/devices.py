"""How many GPUs a DPO round may use (``evolution.learn.dpo.devices``), checked before any run folder exists.

Kept apart from :mod:`.launch` (which runs the round) so that :mod:`.options` can check the key without importing
the launcher, the adapter and the pair code (no import cycle in ``learn/``).
"""

from __future__ import annotations

import os

from ..errors import ConfigError, MissingDependencyError

KEY = "evolution.learn.dpo.devices"


def visible_cuda_devices() -> int:
    """CUDA devices torch sees in this process (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def check_devices(k: int, *, key: str = KEY) -> None:
    """Refuse ``k`` > 1 GPUs when fewer CUDA devices are visible, or when accelerate is missing."""
    if k <= 1:
        return
    n = visible_cuda_devices()
    if k > n:
        hint = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise ConfigError(f"{key}: {k} asks for {k} GPUs, but {n} CUDA device{'s' if n != 1 else ''} "
                          f"{'are' if n != 1 else 'is'} visible here"
                          + (f" (CUDA_VISIBLE_DEVICES={hint!r})" if hint is not None else "")
                          + f"; use {key}: {max(n, 1)} or fewer")
    try:
        import accelerate  # noqa: F401
    except ImportError:
        raise MissingDependencyError("accelerate", "learn", f"DPO on several GPUs ({key})") from None


__all__ = ["KEY", "check_devices", "visible_cuda_devices"]
