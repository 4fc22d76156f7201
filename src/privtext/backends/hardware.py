"""What this machine's CPU can do, read once from ``/proc/cpuinfo``: the features that decide which embedding and
voting arithmetic is fast (and which tests can run here).

* **bf16** — AMX-BF16 (Intel Sapphire Rapids and later) or AVX-512-BF16 (AMD Zen 4 and later, Intel Cooper
  Lake): a bf16 matrix product runs at twice the fp32 rate or better. OpenVINO's ``INFERENCE_PRECISION_HINT: bf16``
  and oneDNN's bf16 GEMM need one of them; without them OpenVINO silently runs fp32.

A flag must match whole (``avx512_bf16x`` is not ``avx512_bf16``). Off Linux nothing is read and every feature
reads as absent (the fp32 paths are chosen, which run everywhere).
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Iterator

BF16_FLAGS = ("amx_bf16", "avx512_bf16")
_SHOWN = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "avx512_fp16")


def _read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:  # not Linux
        return ""


@functools.lru_cache(maxsize=1)
def _machine_cpuinfo() -> str:
    return _read_cpuinfo()


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags (the ``flags`` lines of ``cpuinfo``, this machine's when None)."""
    text = _machine_cpuinfo() if cpuinfo is None else cpuinfo
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def has_fast_bf16(cpuinfo: str | None = None) -> bool:
    """AMX-BF16 or AVX-512-BF16: bf16 products at twice the fp32 rate or better (see the module docstring)."""
    return any(f in cpu_flags(cpuinfo) for f in BF16_FLAGS)


def cpu_model(cpuinfo: str | None = None) -> str:
    text = _machine_cpuinfo() if cpuinfo is None else cpuinfo
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_summary(cpuinfo: str | None = None) -> str:
    """One line for logs and benchmarks: the model and which of the relevant features it has."""
    flags = cpu_flags(cpuinfo)
    have = [f for f in _SHOWN if f in flags]
    lack = [f for f in BF16_FLAGS if f not in flags]
    return f"{cpu_model(cpuinfo)}: {' '.join(have) or 'no AVX2/AVX-512'}" + (f" (no {', '.join(lack)})" if lack else "")


__all__ = ["BF16_FLAGS", "cpu_flags", "cpu_model", "cpu_summary", "has_fast_bf16"]


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch CPU threads (None or 0: leave the count alone), restoring the count afterwards."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
