"""The one place where privacy noise is added to a value.

Every mechanism adds its noise through :func:`add_gaussian` or :func:`add_laplace` (``tests/test_architecture.py``
fails on a ``rng.normal`` / ``rng.laplace`` anywhere else in a mechanism), so that

* the noise line exists once: ``value + N(0, std²)`` elementwise (``std`` a scalar or an array broadcast against
  the value, e.g. SecPE's per-centre ``σ·2R/n_k``), or ``value + Laplace(scale)``; ``std = 0`` / ``scale = 0``
  adds nothing (a non-private release, which the ledger's event says: σ = 0 or ε = ∞);
* a test can watch every draw: :func:`trace` records, for each draw, the release being computed (the key the
  :class:`~privtext.privacy.release.ReleaseKeeper` sets while a release's ``compute`` runs), the distribution, its
  scale and how many values got noise. The contract suite (``tests/test_method_contract.py``) checks that every
  recorded release drew noise of exactly the scale its ledger entry states, on every value it released.

The generator passed in must be privacy randomness (:func:`privtext.rng.noise_rng`: a ChaCha20 CSPRNG keyed by OS
entropy); this module never makes one.

DP-SGD (:mod:`privtext.mechanisms.dpsgd`) adds its noise to torch gradients here too: by default the clipped
gradient sum goes through :func:`add_gaussian` (ChaCha20); with ``noise_source: torch`` (large models on a GPU)
:func:`add_gaussian_torch` draws with a ``torch.Generator`` the mechanism seeded from the release's ChaCha20
stream (torch's generators are not cryptographically secure; see docs/dpft.md). Both record their draws.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PrivacyError

#: the key of the release whose ``compute`` is running (set by the release keepers), or None
current_release: contextvars.ContextVar[str | None] = contextvars.ContextVar("privtext_current_release",
                                                                             default=None)


@dataclass(frozen=True)
class Draw:
    """One noise draw seen by :func:`trace`: which release it belongs to, the distribution, its scale (the
    Gaussian std or the Laplace scale b; the largest and smallest when the scale is an array) and how many values
    received noise."""

    release: str | None
    kind: str  # "gaussian" | "laplace"
    scale_max: float
    scale_min: float
    size: int


_TRACERS: list[list[Draw]] = []


@contextlib.contextmanager
def trace() -> Iterator[list[Draw]]:
    """Record every noise draw made in this process while the block runs (tests and audits)."""
    draws: list[Draw] = []
    _TRACERS.append(draws)
    try:
        yield draws
    finally:
        _TRACERS.remove(draws)


@contextlib.contextmanager
def releasing(key: str) -> Iterator[None]:
    """Mark the draws made in the block as belonging to release ``key`` (the keepers wrap ``compute`` in it)."""
    token = current_release.set(key)
    try:
        yield
    finally:
        current_release.reset(token)


def _check(scale: Any, name: str) -> np.ndarray:
    s = np.asarray(scale, dtype=np.float64)
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise PrivacyError(f"noise {name} must be finite and ≥ 0, got {scale!r}")
    return s


def _record(kind: str, scale: np.ndarray, size: int) -> None:
    if not _TRACERS:
        return
    d = Draw(release=current_release.get(), kind=kind, scale_max=float(scale.max()) if scale.size else 0.0,
             scale_min=float(scale.min()) if scale.size else 0.0, size=int(size))
    for t in _TRACERS:
        t.append(d)


def add_gaussian(value: Any, std: float, rng: np.random.Generator, *, factor: Any = None) -> np.ndarray:
    """``value + factor·N(0, std²)`` elementwise, as float64: ``std`` one number ≥ 0 (0 adds nothing), ``factor``
    an optional array of public non-negative multipliers broadcast against ``value`` (SecPE's centres carry
    ``(2R/n_k)·N(0, σ²)``), so the noise of an element has std ``factor·std``."""
    v = np.asarray(value, dtype=np.float64)
    s = _check(std, "std")
    if s.ndim:
        raise PrivacyError("add_gaussian takes one std; give per-element multipliers as factor")
    f = None if factor is None else _check(factor, "factor")
    if not isinstance(rng, np.random.Generator):
        raise PrivacyError(f"noise needs a numpy Generator (privtext.rng.noise_rng), got {type(rng).__name__}")
    per = s if f is None else s * f
    _record("gaussian", np.atleast_1d(per), v.size if s > 0 else 0)
    if not s > 0:
        return v.copy()
    z = rng.normal(0.0, float(s), size=v.shape)
    return v + z if f is None else v + f * z


def add_laplace(value: Any, scale: Any, rng: np.random.Generator) -> np.ndarray:
    """``value + Laplace(0, scale)`` elementwise, as float64 (``scale`` a number ≥ 0; 0 adds nothing)."""
    v = np.asarray(value, dtype=np.float64)
    b = _check(scale, "scale")
    if b.ndim:
        raise PrivacyError("add_laplace takes one scale for all values")
    if not isinstance(rng, np.random.Generator):
        raise PrivacyError(f"noise needs a numpy Generator (privtext.rng.noise_rng), got {type(rng).__name__}")
    _record("laplace", b, v.size if b > 0 else 0)
    if not b > 0:
        return v.copy()
    return v + rng.laplace(0.0, float(b), size=v.shape)


def add_gaussian_torch(value: Any, std: float, generator: Any) -> Any:
    """``value + N(0, std²)`` elementwise for a torch tensor (same dtype and device), the draws made with
    ``generator`` (a ``torch.Generator`` on the tensor's device, seeded by the caller from privacy randomness:
    :func:`privtext.rng.spawn_seed` of a :func:`privtext.rng.noise_rng`). ``std = 0`` adds nothing."""
    import torch

    s = _check(std, "std")
    if s.ndim:
        raise PrivacyError("add_gaussian_torch takes one std")
    if not isinstance(generator, torch.Generator):
        raise PrivacyError(f"torch noise needs a torch.Generator seeded from privacy randomness, got "
                           f"{type(generator).__name__}")
    _record("gaussian", np.atleast_1d(s), int(value.numel()) if s > 0 else 0)
    if not s > 0:
        return value.clone()
    z = torch.normal(0.0, float(s), size=tuple(value.shape), generator=generator, device=value.device,
                     dtype=value.dtype)
    return value + z


__all__ = ["Draw", "add_gaussian", "add_gaussian_torch", "add_laplace", "current_release", "releasing", "trace"]
