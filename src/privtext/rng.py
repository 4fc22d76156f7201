"""Explicit randomness.

Every function in privtext that draws takes ``rng: numpy.random.Generator``; nothing touches global RNG state.

* ``make_rng(seed)`` gives a reproducible generator (tests, experiments).
* ``make_rng(None, secure=True)`` gives a generator seeded from 256 bits of OS entropy (``secrets``); secure mode
  refuses a seed, since a known seed lets anyone who reads the config recompute and subtract the noise.
* ``derive(rng_root_seed, *keys)`` gives an independent stream per (stage, iteration, label...) so a resumed run
  draws the same numbers for the same step regardless of what ran before it. Released noise is never redrawn on
  resume anyway (it is read back from the checkpoint); derived streams only make the non-private randomness
  (generation, selection sampling of a step that had not finished) reproducible.

Note on floating point: noise is drawn as IEEE doubles (numpy's ziggurat normal). Mironov-style attacks on the
low bits of floating-point Laplace/Gaussian samples are not mitigated here; releases are post-processed by
nearest-neighbour selection, and histogram values are never published raw outside the run directory.
"""

from __future__ import annotations

import hashlib
import secrets as _secrets

import numpy as np

from .errors import ConfigError


def make_rng(seed: int | None, *, secure: bool = False) -> np.random.Generator:
    """A numpy Generator: seeded (reproducible) or, in secure mode, from OS entropy."""
    if secure:
        if seed is not None:
            raise ConfigError(
                f"secure mode refuses a seed (got seed={seed!r}): a known seed lets anyone recompute the noise"
            )
        return np.random.Generator(np.random.PCG64DXSM(_secrets.randbits(256)))
    if seed is None:
        return np.random.default_rng()
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(int(seed))


def _key_int(key: object) -> int:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and key >= 0:
        return int(key)
    digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def derive(seed: int | None, *keys: object, secure: bool = False) -> np.random.Generator:
    """An independent generator for the step named by ``keys`` under the run seed.

    In secure mode (or with ``seed=None``) the result is fresh OS entropy: no reproducibility is promised.
    """
    if secure or seed is None:
        return make_rng(None, secure=True)
    ss = np.random.SeedSequence([int(seed), *(_key_int(k) for k in keys)])
    return np.random.Generator(np.random.PCG64(ss))


def spawn_seed(rng: np.random.Generator) -> int:
    """A 63-bit integer seed drawn from ``rng`` (for libraries that take an int seed: torch, vLLM, faiss)."""
    return int(rng.integers(0, 2**63 - 1))
