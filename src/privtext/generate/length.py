"""Target lengths for generated text (Aug-PE's length handling), from public or released information only.

Aug-PE (Xie et al. 2024, §3.2 and its code) asks the model for a target word count: the fill-in-the-blanks
variation asks for "exactly N words", N the length of the sample being varied plus Gaussian noise, and the
random API caps the new tokens. Lengths then follow the private data through selection: samples of the wrong
length get fewer votes. That works when the public text the generator starts from has about the right length;
when it does not (clinical notes of ~20 words, public text = PubMed abstracts of ~200 words) every candidate is
too long, selection cannot fix it, and FID and kNN precision collapse. A :class:`LengthTarget` gives the first
draw the right lengths and caps every draw:

* from a **prompt family** (``length:`` in ``generate/prompts/*.yaml``): a public prior of the domain, e.g.
  "clinic visit notes run 10 to 45 words" — stated knowledge, no private data read;
* **configured**: a range the data owner states (a public parameter of the run, like ε);
* **released**: a DP histogram of the private word counts (:func:`privtext.mechanisms.lengths.dp_length_histogram`,
  its own privacy event in the ledger), turned into a target by post-processing
  (:meth:`LengthTarget.from_histogram`).

Never a length computed from private records without noise: a configured range must come from public knowledge.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class LengthTarget:
    """A distribution of target word counts: bins ``[low[i], high[i]]`` (inclusive) with weights, and a hard cap
    ``max_words`` every generated text honours. ``source`` says where it comes from (shown in prompts' meta)."""

    low: tuple[int, ...]
    high: tuple[int, ...]
    weights: tuple[float, ...]
    max_words: int
    source: str = "configured"

    def __post_init__(self) -> None:
        n = len(self.low)
        if n == 0 or len(self.high) != n or len(self.weights) != n:
            raise ConfigError("a length target needs bins: low, high and weights of the same non-zero length")
        if any(lo < 1 or hi < lo for lo, hi in zip(self.low, self.high, strict=True)):
            raise ConfigError(f"length bins must satisfy 1 ≤ low ≤ high, got {list(zip(self.low, self.high, strict=True))}")
        w = np.asarray(self.weights, dtype=np.float64)
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ConfigError(f"length weights must be finite, ≥ 0 and not all 0, got {list(self.weights)}")
        if self.max_words < 1:
            raise ConfigError(f"max_words must be ≥ 1, got {self.max_words}")

    # ------------------------------------------------------------------------------------------- makers
    @classmethod
    def uniform(cls, low: int, high: int, *, max_words: int | None = None, source: str = "configured"
                ) -> LengthTarget:
        """Targets drawn uniformly from ``[low, high]`` words; the cap defaults to ``high + high // 2``."""
        low, high = int(low), int(high)
        return cls((low,), (high,), (1.0,), int(max_words) if max_words is not None else high + high // 2,
                   source=source)

    @classmethod
    def parse(cls, spec: Any, *, max_words: int | None = None, source: str = "configured") -> LengthTarget:
        """From a config value: ``N`` (about N words: [0.75 N, 1.25 N]) or ``[low, high]``."""
        if isinstance(spec, bool):
            raise ConfigError(f"target_words must be a number or [low, high], got {spec!r}")
        if isinstance(spec, (int, np.integer)):
            n = int(spec)
            if n < 1:
                raise ConfigError(f"target_words must be ≥ 1, got {n}")
            return cls.uniform(max(1, round(0.75 * n)), max(1, round(1.25 * n)), max_words=max_words, source=source)
        if isinstance(spec, Sequence) and not isinstance(spec, str) and len(spec) == 2 and all(
                isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in spec):
            return cls.uniform(int(spec[0]), int(spec[1]), max_words=max_words, source=source)
        raise ConfigError(f"target_words must be a number of words or [low, high], got {spec!r}")

    @classmethod
    def from_histogram(cls, counts: Sequence[float], edges: Sequence[int], *, max_words: int | None = None,
                       source: str = "released") -> LengthTarget:
        """From (noisy) counts over bins ``[edges[i], edges[i+1] - 1]`` (post-processing of a release): negative
        counts are clipped to 0; all-zero counts fall back to the whole range. The cap defaults to the last
        edge."""
        c = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
        e = [int(x) for x in edges]
        if len(e) != len(c) + 1 or any(b <= a for a, b in itertools.pairwise(e)) or e[0] < 1:
            raise ConfigError(f"edges must be {len(c) + 1} increasing integers ≥ 1, got {e}")
        if c.sum() <= 0:
            c = np.ones_like(c)
        return cls(tuple(e[:-1]), tuple(b - 1 for b in e[1:]), tuple(float(x) for x in c),
                   int(max_words) if max_words is not None else e[-1], source=source)

    # -------------------------------------------------------------------------------------------- use
    def sample(self, u_bin: float, u_within: float) -> int:
        """A target from two uniforms in [0, 1): a bin by weight, then a length uniformly within it."""
        w = np.asarray(self.weights, dtype=np.float64)
        cdf = np.cumsum(w) / w.sum()
        i = min(int(np.searchsorted(cdf, u_bin, side="right")), len(w) - 1)
        lo, hi = self.low[i], self.high[i]
        return min(lo + min(int(u_within * (hi - lo + 1)), hi - lo), self.max_words)

    def draw(self, rng: np.random.Generator) -> int:
        return self.sample(float(rng.random()), float(rng.random()))

    def mean(self) -> float:
        w = np.asarray(self.weights, dtype=np.float64)
        mid = (np.asarray(self.low) + np.asarray(self.high)) / 2.0
        return float(min((w * mid).sum() / w.sum(), self.max_words))

    def to_dict(self) -> dict[str, Any]:
        return {"low": list(self.low), "high": list(self.high), "weights": [round(float(x), 4) for x in self.weights],
                "max_words": self.max_words, "source": self.source}


def length_target(noisy_counts: Sequence[float], edges: Sequence[int], *, max_words: int | None = None
                  ) -> LengthTarget:
    """The generators' target from a released histogram (post-processing: clip at 0, normalise). The cap
    defaults to the top edge of the highest bin holding ≥ 1 % of the (clipped) mass, plus half of it: lengths
    far beyond what the release shows are cut."""
    c = np.clip(np.asarray(noisy_counts, dtype=np.float64), 0.0, None)
    e = [int(x) for x in edges]
    if max_words is None:
        share = c / c.sum() if c.sum() > 0 else np.ones_like(c) / len(c)
        top = int(np.nonzero(share >= 0.01)[0].max()) if np.any(share >= 0.01) else len(c) - 1
        hi = e[top + 1] - 1
        max_words = hi + hi // 2
    return LengthTarget.from_histogram(c, e, max_words=max_words, source="released (DP length histogram)")


def cap_words(text: str, max_words: int) -> str:
    """``text`` cut after ``max_words`` whitespace-separated words (a sentence end added when cut)."""
    words = text.split()
    if len(words) <= max_words:
        return text
    cut = " ".join(words[:max_words]).rstrip(",;:-")
    return cut if cut.endswith((".", "!", "?")) else cut + "."


__all__ = ["LengthTarget", "cap_words", "length_target"]
