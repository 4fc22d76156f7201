"""WASP's Top-Q voting (wasp.txt §4.3, Eq 3-6): nearest and furthest vote histograms with decaying weights.

Each private sample (x, y) looks at the candidates of ITS OWN label y (Eq 3: L2 distance between sentence
embeddings) and votes for its Q nearest candidates with weights 1, 1/2, …, 1/2^(Q−1) into the *nearest
histogram* Hⁿ and for its Q furthest candidates, the furthest first, with the same weights into the *furthest
histogram* Hᶠ (Eq 4-5). Both histograms get Gaussian noise N(0, σ²) on every bin (Eq 6).

:func:`topq_histograms` is the exact (noise-free) pair as a pure function of the embeddings — what one data
holder computes locally, so the federated part (SecAgg+) can call it per party and add noise itself;
:func:`dp_topq_histograms` is the single-holder noisy release (call it only through
:class:`privtext.privacy.ReleaseKeeper`).

Sensitivity (add/remove one private sample, derived here; Thm D.2 of the paper gives the bound 4)
----------------------------------------------------------------------------------------------------
Let w_q = 2^−(q−1), q = 1…Q. Adding or removing one sample x changes Hⁿ only in the bins of x's Q nearest
candidates — Q **distinct** candidates, since a top-Q is a set of indices — each by exactly w_q. So

    ‖ΔHⁿ‖₂² = Σ_{q=1..Q} w_q² = Σ_{q=1..Q} 4^−(q−1) = (4/3)(1 − 4^−Q),

and likewise ‖ΔHᶠ‖₂² for its Q furthest candidates. The released pair (Hⁿ, Hᶠ) is one vector of 2·|D| bins
(two different histograms: overlap between x's nearest and furthest sets never puts two votes into the same
coordinate), hence the **exact L2 sensitivity of the pair**

    Δ_Q = √(2·Σ_{q=1..Q} 4^−(q−1)) = √((8/3)(1 − 4^−Q)):   Δ_1 = √2 ≈ 1.414, Δ_2 = √2.5 ≈ 1.581,
    Δ_3 = √(2.625) ≈ 1.620, Δ_4 ≈ 1.630, Δ_∞ = √(8/3) ≈ 1.633,

attained by every sample whose label group holds at least Q candidates (so the bound is tight). When the
group holds only m < Q candidates the sample votes for all m of them with weights w_1…w_m (nearest) and the
same m in reverse order (furthest): its change is √(2·Σ_{q≤m} 4^−(q−1)) < Δ_Q, so Δ_Q still bounds it; a group
with no candidate casts no vote (change 0). Labels only decide *where* a sample votes (a function of the sample
alone), so the argument is unchanged under label grouping.

The paper instead bounds each histogram's L2 change by its L1 change Σ w_q = 2 − 2^−(Q−1) < 2 and adds the two
bounds: Δ = 2 + 2 = 4 (Thm D.2). Both steps are loose (L1 ≥ L2; the L2 norm of a pair is the root of the sum of
squares, not the sum), and 4 / Δ_∞ = √6 ≈ 2.45: the paper's calibration uses ≥ 2.45× the noise needed for the
same sensitivity argument (:func:`paper_sensitivity`, ``privacy.calibration: paper``).

With noise std s = z·Δ_Q on every bin the release is the Gaussian mechanism with noise multiplier z:
``GaussianDpEvent(z)`` (:func:`topq_event`); T − 1 releases compose under the PLD accountant like every other
Gaussian release in privtext.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import ConfigError
from ..privacy.events import gaussian_event
from ..privacy.noise import add_gaussian
from ..privacy.relation import Contribution
from .voting import label_groups

MAX_Q = 64


def _check_q(q: Any) -> int:
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or not 1 <= int(q) <= MAX_Q:
        raise ConfigError(f"Top-Q voting needs an integer q between 1 and {MAX_Q}, got {q!r}")
    return int(q)


def topq_weights(q: int) -> np.ndarray:
    """The vote weights 1, 1/2, …, 1/2^(q−1) (Eq 5)."""
    q = _check_q(q)
    return np.ldexp(1.0, -np.arange(q))  # exact powers of two


def topq_sensitivity(q: int) -> float:
    """Exact L2 sensitivity of the pair (Hⁿ, Hᶠ) under add/remove one sample: √(2·Σ_{j<q} 4^−j)."""
    w = topq_weights(q)
    return float(math.sqrt(2.0 * float(np.sum(w * w))))


def topq_contribution(q: int) -> Contribution:
    """One sample's contribution to the pair (Hⁿ, Hᶠ): weights 4^−j on its q nearest and its q furthest
    candidates, all ≥ 0, L2 norm √(2·Σ_{j<q} 4^−j) = :func:`topq_sensitivity` (so Δ_Q under add/remove one, √2·Δ_Q
    under replace one, m·Δ_Q for a user capped at m samples: :mod:`privtext.privacy.relation`)."""
    return Contribution(topq_sensitivity(q), "l2", True, f"Top-{q} nearest and furthest votes of one sample")


def paper_contribution(q: int) -> Contribution:
    """The paper's per-sample bound Δ = 4 (:func:`paper_sensitivity`), as a contribution (``calibration: paper``
    only sets the noise std with it; the ledger accounts the exact :func:`topq_contribution`)."""
    return Contribution(paper_sensitivity(q), "l2", True, "the paper's bound (Thm D.2)")


def paper_sensitivity(q: int) -> float:
    """The paper's bound (Thm D.2): each histogram changes by < 2 in L2 "since its L1 change is 2 − 2^−(Q−1)",
    and the two are added: Δ = 4 for every Q. (The public code computes ``2 - 1/(2^(Q-1))`` with Python's XOR
    ``^``; privtext uses 4, the value the paper states and uses.)"""
    _check_q(q)
    return 4.0


def topq_event(noise_multiplier: float) -> Any:
    """The event of one Top-Q release: ``GaussianDpEvent(z)`` with z = noise std / Δ."""
    return gaussian_event(noise_multiplier)


def _distances(p: np.ndarray, c: np.ndarray, metric: str) -> np.ndarray:
    if metric == "l2":  # Eq 3
        d = (p * p).sum(1)[:, None] + (c * c).sum(1)[None, :] - 2.0 * (p @ c.T)
        return np.sqrt(np.maximum(d, 0.0))
    if metric == "cosine":
        pn = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)
        cn = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
        return 1.0 - pn @ cn.T
    raise ConfigError(f"Top-Q voting metric must be 'l2' or 'cosine', got {metric!r}")


def topq_histograms(
    private_emb: np.ndarray,
    candidate_emb: np.ndarray,
    *,
    q: int,
    private_groups: Sequence[int] | np.ndarray | None = None,
    candidate_groups: Sequence[int] | np.ndarray | None = None,
    metric: Literal["l2", "cosine"] = "l2",
    chunk_size: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """The exact Top-Q vote histograms (Hⁿ, Hᶠ), float64, one bin per candidate, no noise (Eq 3-5).

    Each private sample votes within its label group (``private_groups[i] == candidate_groups[j]``); a sample
    whose group has no candidate casts no vote; a group with m < q candidates gets votes on all m. Ties in
    distance are broken by candidate index (lower index counts as nearer). Pure function: no randomness."""
    q = _check_q(q)
    w = topq_weights(q)
    P = np.asarray(private_emb, dtype=np.float64)
    C = np.asarray(candidate_emb, dtype=np.float64)
    if P.ndim != 2 or C.ndim != 2 or (len(P) and len(C) and P.shape[1] != C.shape[1]):
        raise ConfigError(f"embeddings must be 2-D with one width; got private {P.shape}, candidates {C.shape}")
    n_c = len(C)
    pg, cg = label_groups(private_groups, len(P), candidate_groups, n_c)
    hn = np.zeros(n_c, dtype=np.float64)
    hf = np.zeros(n_c, dtype=np.float64)
    for g in np.unique(pg):
        qi = np.nonzero(pg == g)[0]
        ci = np.nonzero(cg == g)[0]
        m = len(ci)
        if m == 0:
            continue
        k = min(q, m)
        for s in range(0, len(qi), chunk_size):
            d = _distances(P[qi[s:s + chunk_size]], C[ci], metric)
            order = np.argsort(d, axis=1, kind="stable")  # nearest first; ties by index
            near = order[:, :k]
            # furthest first: the reverse of the ascending order (ties: higher index counts as further)
            far = order[:, ::-1][:, :k]
            np.add.at(hn, ci[near].ravel(), np.tile(w[:k], len(near)))
            np.add.at(hf, ci[far].ravel(), np.tile(w[:k], len(far)))
    return hn, hf


@dataclass(frozen=True)
class TopQRelease:
    """The released noisy pair and what it took."""

    nearest: np.ndarray  # H̃ⁿ (Eq 6), float64, one bin per candidate
    furthest: np.ndarray  # H̃ᶠ
    noise_std: float
    sensitivity: float
    q: int


def add_topq_noise(hn: np.ndarray, hf: np.ndarray, *, noise_std: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Eq 6: H + N(0, s²) on every bin of both histograms (one draw of 2·|D| independent normals)."""
    if noise_std < 0 or not np.isfinite(noise_std):
        raise ConfigError(f"noise std must be a finite number ≥ 0, got {noise_std}")
    n = len(hn)
    noisy = add_gaussian(np.concatenate([np.asarray(hn, dtype=np.float64), np.asarray(hf, dtype=np.float64)]),
                         noise_std, rng)
    return noisy[:n], noisy[n:]


def dp_topq_histograms(
    private_emb: np.ndarray,
    candidate_emb: np.ndarray,
    *,
    q: int,
    noise_multiplier: float,
    rng: np.random.Generator,
    sensitivity: float | None = None,
    private_groups: Sequence[int] | np.ndarray | None = None,
    candidate_groups: Sequence[int] | np.ndarray | None = None,
    metric: Literal["l2", "cosine"] = "l2",
) -> tuple[TopQRelease, Any]:
    """Release (H̃ⁿ, H̃ᶠ) with noise std z·Δ per bin; returns ``(release, topq_event(z))``. Record the event
    through :class:`privtext.privacy.ReleaseKeeper` before calling this.

    ``sensitivity`` defaults to the exact Δ_Q (:func:`topq_sensitivity`); a larger value (e.g. a group size
    times Δ_Q) only adds noise. A value below Δ_Q is refused: it would under-noise."""
    q = _check_q(q)
    if noise_multiplier < 0 or not np.isfinite(noise_multiplier):
        raise ConfigError(f"noise_multiplier must be a finite number ≥ 0, got {noise_multiplier}")
    exact = topq_sensitivity(q)
    delta = exact if sensitivity is None else float(sensitivity)
    if not delta >= exact * (1 - 1e-12):
        raise ConfigError(f"sensitivity {sensitivity} is below the exact Top-{q} sensitivity {exact:.6g}")
    event = topq_event(noise_multiplier)
    hn, hf = topq_histograms(private_emb, candidate_emb, q=q, private_groups=private_groups,
                             candidate_groups=candidate_groups, metric=metric)
    std = float(noise_multiplier) * delta
    nn, nf = add_topq_noise(hn, hf, noise_std=std, rng=rng)
    return TopQRelease(nearest=nn, furthest=nf, noise_std=std, sensitivity=delta, q=q), event


__all__ = ["MAX_Q", "TopQRelease", "add_topq_noise", "dp_topq_histograms", "paper_contribution",
           "paper_sensitivity", "topq_contribution", "topq_event", "topq_histograms", "topq_sensitivity",
           "topq_weights"]
