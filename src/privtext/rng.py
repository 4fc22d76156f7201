"""Explicit randomness, and where privacy noise comes from.

Every function in privtext that draws takes ``rng: numpy.random.Generator``; nothing touches global RNG state.
Two kinds of randomness are kept apart:

* **Privacy randomness** — the noise of every release and the private sampling that a mechanism's analysis
  treats as secret (SecPE's Bernoulli(ρ) sample of secret holders, the ``data.max_private`` subsample). By
  default it comes from :func:`noise_rng`: a **ChaCha20** stream cipher used as a bit generator
  (``randomgen.ChaCha(rounds=20)``), keyed with 256 bits from the operating system (``secrets``, i.e.
  ``getrandom``/``/dev/urandom``), one fresh key per release. ChaCha20 is a cryptographically secure PRNG: its
  output cannot be predicted or reconstructed without the key, which exists only in memory while the release is
  drawn and is never written anywhere. (numpy's PCG64/PCG64DXSM seeded from OS entropy is *not* one: its
  state can be recovered from a modest number of outputs, after which every other draw of the same stream —
  the noise included — can be recomputed.)
* **Everything else** — generation, selection tie-breaks, k-means on public data, evaluation — comes from
  :func:`derive` under the run's ``seed``, so experiments are reproducible. None of it is secret: it acts on
  public text and on released values only.

``privacy.reproducible_noise: true`` makes the privacy randomness seeded too (``derive(seed, "noise", ...)``),
for tests and experiments only: anyone who reads the seed in ``config.yaml`` or ``privacy.json`` can then
recompute and subtract the noise, so such a run is **not private**, and its statement says so in its first
words. ``privacy.secure: true`` goes the other way: every stream, not only the noise, comes from OS entropy,
and a seed is refused.

A released value is drawn once: it is saved before it is used and read back on resume, never redrawn
(:class:`privtext.engine.state.ReleaseKeeper`).

Floating point: noise is drawn as IEEE doubles. Mironov-style attacks read the low bits of a raw noisy double;
privtext therefore keeps raw draws only under the run's private folder (``private/checkpoints``), and every
released number that leaves it (``privacy.json``, the report) is rounded to a documented granularity
(:data:`RELEASE_DIGITS`) or used only through post-processing (nearest-neighbour selection).
"""

from __future__ import annotations

import hashlib
import secrets as _secrets

import numpy as np

from .errors import ConfigError

#: significant digits kept for any released noisy number written outside the private folder
RELEASE_DIGITS = 4


def _chacha(key: int) -> np.random.Generator:
    """ChaCha20 with ``key`` (an integer in [0, 2**256)) as the cipher key itself.

    ``ChaCha(key=...)``, not ``ChaCha(seed=...)``: a seed goes through numpy's SeedSequence, whose entropy pool is
    128 bits, so a 256-bit seed would carry at most 128 bits into the cipher."""
    from randomgen import ChaCha  # a core dependency (pyproject.toml)

    k = int(key)
    if not 0 <= k < 2**256:
        raise ValueError(f"a ChaCha20 key is an integer in [0, 2**256), got one of {k.bit_length()} bits")
    return np.random.Generator(ChaCha(key=k, counter=0, rounds=20))


def secure_rng() -> np.random.Generator:
    """A generator backed by ChaCha20 keyed with 256 fresh bits of OS entropy (a CSPRNG; see module docstring)."""
    return _chacha(_secrets.randbits(256))


def make_rng(seed: int | None, *, secure: bool = False) -> np.random.Generator:
    """A numpy Generator: seeded (reproducible) or, in secure mode, from a CSPRNG keyed by OS entropy."""
    if secure:
        if seed is not None:
            raise ConfigError(
                f"secure mode refuses a seed (got seed={seed!r}): a known seed lets anyone recompute the noise"
            )
        return secure_rng()
    if seed is None:
        return np.random.default_rng()
    _check_seed(seed)
    return np.random.default_rng(int(seed))


def _check_seed(seed: object) -> None:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")


def _key_int(key: object) -> int:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and key >= 0:
        return int(key)
    digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def derive(seed: int | None, *keys: object, secure: bool = False) -> np.random.Generator:
    """An independent generator for the step named by ``keys`` under the run seed (non-private randomness).

    In secure mode (or with ``seed=None``) the result is a fresh CSPRNG: no reproducibility is promised.
    """
    if secure or seed is None:
        return secure_rng()
    _check_seed(seed)
    ss = np.random.SeedSequence([int(seed), *(_key_int(k) for k in keys)])
    return np.random.Generator(np.random.PCG64(ss))


def noise_rng(seed: int | None, *keys: object, reproducible: bool = False) -> np.random.Generator:
    """The generator for one release's privacy randomness (noise and private sampling).

    Default: :func:`secure_rng` (ChaCha20, fresh OS-entropy key). ``reproducible=True`` (``privacy.
    reproducible_noise``; NOT private) derives it from ``seed`` and ``keys`` instead."""
    if reproducible:
        if seed is None:
            raise ConfigError("privacy.reproducible_noise needs a seed (it derives the noise from it)")
        return derive(seed, "noise", *keys)
    return secure_rng()


def spawn_seed(rng: np.random.Generator) -> int:
    """A 63-bit integer seed drawn from ``rng`` (for libraries that take an int seed: torch, vLLM, faiss)."""
    return int(rng.integers(0, 2**63 - 1))


def round_release(x: float, digits: int = RELEASE_DIGITS) -> float:
    """A released noisy number rounded to ``digits`` significant digits before it leaves the private folder."""
    if x == 0 or not np.isfinite(x):
        return float(x)
    return float(f"{float(x):.{digits}g}")
