"""DP length histogram: how long the private texts are, released privately, so generators write to that length.

Why: Aug-PE controls length through the prompt (a target word count) and lets selection do the rest; when the
public text the generator starts from is far longer than the private records (PubMed abstracts of ~100 words
for clinic notes of ~30), every candidate is too long and selection cannot fix it. A released histogram of the
private word counts gives the generators a target (:class:`privtext.generate.length.LengthTarget`) at a small
privacy cost, accounted like any other release.

Mechanism. Each private record's word count w (whitespace words, the unit of ``evaluate.lengths``) is clipped to
``[1, edges[-1] - 1]`` and counted in the bin ``edges[b] ≤ w < edges[b+1]`` of public edges (default
:func:`length_bin_edges`: geometric, so short lengths get fine bins). Adding or removing one record changes
exactly one bin by one, so the L1 and L2 sensitivities are Δ₁ = Δ₂ = 1 (Δ = k under a group relation where k
records leave together, as Aug-PE's ``sensitivity: secret_group``; the noise scales with Δ and the event is
unchanged):

* **Laplace** — Laplace(Δ₁/ε) per bin is ε-DP (the Laplace mechanism, Dwork, McSherry, Nissim & Smith 2006;
  Dwork & Roth 2014 Thm 3.6): ``LaplaceDpEvent(1/ε)``, for pure-ε runs (DP-KPS);
* **Gaussian** — N(0, (σΔ₂)²) per bin is the Gaussian mechanism with noise multiplier σ: ``GaussianDpEvent(σ)``,
  composing with the vote histograms of Aug-PE / WASP in the run's PLD or GDP accountant (a release of μ = 1/σ
  in GDP terms, Dong, Roth & Su 2019, Thm 2.7).

The noisy counts are clipped at 0 and normalised into a :class:`LengthTarget` (post-processing). Every function
is pure: ``values, event = dp_length_histogram(...)``; the caller releases the values through
``ReleaseKeeper.release`` (ledger first) and rounds them before they leave the private folder.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..privacy.events import gaussian_event
from ..privacy.noise import add_gaussian, add_laplace
from .vocabulary import check_epsilon, laplace_event


def length_bin_edges(max_words: int = 256, *, bins: int = 16) -> list[int]:
    """Public bin edges from 1 to ``max_words + 1``: geometric (each bin ~ a constant ratio wide), at least one
    word per bin. A data-independent choice: the edges may be stated in ``privacy.json``."""
    if max_words < 1 or bins < 1:
        raise ConfigError(f"length bins need max_words ≥ 1 and bins ≥ 1, got {max_words}, {bins}")
    raw = np.geomspace(1, max_words + 1, num=bins + 1)
    edges = sorted({round(float(x)) for x in raw} | {1, max_words + 1})
    return edges


def word_counts(texts: Sequence[str]) -> np.ndarray:
    """Whitespace word counts (the unit of :func:`privtext.evaluate.lengths.text_lengths`)."""
    return np.array([len(t.split()) for t in texts], dtype=np.int64)


def _bins(counts: np.ndarray, edges: Sequence[int]) -> np.ndarray:
    e = np.asarray(edges, dtype=np.int64)
    if len(e) < 2 or np.any(np.diff(e) <= 0) or e[0] < 1:
        raise ConfigError(f"length bin edges must be ≥ 2 increasing integers starting at ≥ 1, got {list(edges)}")
    w = np.clip(np.asarray(counts, dtype=np.int64), int(e[0]), int(e[-1]) - 1)
    return np.bincount(np.searchsorted(e, w, side="right") - 1, minlength=len(e) - 1)[: len(e) - 1].astype(
        np.float64)


def length_histogram_event(*, noise_multiplier: float | None = None, epsilon: float | None = None) -> Any:
    """The event of :func:`dp_length_histogram`, from its parameters alone (for planning and audits)."""
    if (noise_multiplier is None) == (epsilon is None):
        raise ConfigError("give exactly one of noise_multiplier (Gaussian) or epsilon (Laplace)")
    if epsilon is not None:
        return laplace_event(check_epsilon(epsilon))
    assert noise_multiplier is not None
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise ConfigError(f"noise_multiplier must be a finite number ≥ 0, got {noise_multiplier}")
    return gaussian_event(noise_multiplier)


def dp_length_histogram(
    texts: Sequence[str], *, edges: Sequence[int], rng: np.random.Generator, noise_multiplier: float | None = None,
    epsilon: float | None = None, sensitivity: float = 1.0,
) -> tuple[np.ndarray, Any]:
    """Noisy counts of private texts per length bin (see the module docstring for the derivation). Exactly one
    of ``noise_multiplier`` (Gaussian, std σ·Δ) or ``epsilon`` (Laplace, scale Δ/ε) is given; ``sensitivity`` is
    Δ (1 for add/remove one record). Returns ``(noisy counts, event)``."""
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ConfigError(f"sensitivity must be a positive number, got {sensitivity}")
    event = length_histogram_event(noise_multiplier=noise_multiplier, epsilon=epsilon)
    counts = _bins(word_counts(texts), edges)
    if epsilon is not None:
        eps = check_epsilon(epsilon)
        counts = add_laplace(counts, float(sensitivity) / eps if math.isfinite(eps) else 0.0, rng)
    else:
        counts = add_gaussian(counts, float(noise_multiplier or 0.0) * float(sensitivity), rng)
    return counts, event


__all__ = ["dp_length_histogram", "length_bin_edges", "length_histogram_event", "word_counts"]
