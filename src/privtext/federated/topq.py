"""WASP's Top-Q votes from several data holders (WASP §4.7, Alg 2 lines 8-11; Eq 9).

Each party l holds its own private records (their embeddings and label groups, :class:`PartyVotes`). In every
round the server publishes the candidates D (synthetic, public); each party computes the exact Top-Q pair
(Hⁿ_l, Hᶠ_l) = :func:`privtext.mechanisms.topq.topq_histograms` over **its own records only** (Eq 3-5), adds
its share of the Gaussian noise N(0, σ²/t) (:mod:`privtext.federated.noise`) and the server learns only the sum

    (H̃ⁿ, H̃ᶠ) = Σ_{l ∈ S} (Hⁿ_l, Hᶠ_l) + N(0, (|S|/t)·σ² I),    |S| ≥ t     (Alg 2 lines 10-11)

by one SecAgg+ round (:func:`privtext.federated.secagg.secure_sum`) or, for tests and machines without flwr,
the in-process reference sum (:func:`privtext.federated.noise.plain_sum`, NOT a secure aggregation).

Sensitivity of the sum
----------------------
Top-Q voting is a sum over records: Σ_l (Hⁿ_l, Hᶠ_l) equals the single-holder pair over the union of the
parties' records, because each record votes within its label over the same D whichever party holds it. So:

* **record level** (add/remove one record at one party): Δ = Δ_Q = √(2·Σ_{q≤Q} 4^−(q−1)) exactly as for one
  holder (:mod:`privtext.mechanisms.topq`);
* **user level, capped** (add/remove one party = user, WASP App E.4): every party keeps at most m records, m a
  PUBLIC cap it enforces (:func:`privtext.federated.noise.cap_records`); its pair is a sum of ≤ m record pairs,
  each of L2 norm ≤ Δ_Q, so by the triangle inequality removing the party moves the sum by ≤ m·Δ_Q
  (:func:`~privtext.federated.noise.user_level_sensitivity`; the paper's 8 × 4 = 32 uses Thm D.2's Δ = 4);
* **user level, normalised** (``normalise=True``): each party sends v_l/‖v_l‖₂ with v_l = (Hⁿ_l, Hᶠ_l); adding or
  removing a party moves Σ_l v_l/‖v_l‖ by one unit vector: Δ = 1 whatever its number of records (no cap needed;
  :func:`~privtext.federated.noise.normalise_user_votes`).

Clipping each coordinate to the public bound B before the noise (quantisation, noise.py) is 1-Lipschitz per
party, so none of these sensitivities grows. With σ = z·Δ the release is ``GaussianDpEvent(z)``; with drop-outs
the completed round carries std σ·√(|S|/t) ≥ σ (post-processing of the σ-mechanism), so that event is always a
valid account, recorded before any party computes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..mechanisms.topq import topq_histograms
from .aggregate import FederatedSum, federated_sum


@dataclass(frozen=True)
class PartyVotes:
    """What one party holds for voting: the embeddings and label groups of its own records."""

    emb: np.ndarray
    groups: np.ndarray

    def __len__(self) -> int:
        return len(self.emb)


def party_topq(data: PartyVotes, *, candidate_emb: np.ndarray, candidate_groups: np.ndarray, q: int,
               metric: str = "l2", normalise: bool = False) -> np.ndarray:
    """One party's local vector [Hⁿ_l, Hᶠ_l] (length 2|D|), exact, from its own records only; unit L2 norm with
    ``normalise`` (a zero vector stays zero). Runs inside the party (its process under SecAgg+)."""
    hn, hf = topq_histograms(data.emb, candidate_emb, q=q, private_groups=data.groups,
                             candidate_groups=candidate_groups, metric=metric)  # type: ignore[arg-type]
    v = np.concatenate([hn, hf])
    if normalise:
        n = float(np.linalg.norm(v))
        v = v / n if n > 0 else v
    return v


@dataclass
class FederatedTopQ(FederatedSum):
    """The released sum (``values`` = [H̃ⁿ, H̃ᶠ]) split into its two histograms, and what is public about its
    round (survivors, noise std σ·√(|S|/t) ≥ σ, quantisation)."""

    nearest: np.ndarray = field(default_factory=lambda: np.zeros(0))
    furthest: np.ndarray = field(default_factory=lambda: np.zeros(0))


def federated_topq(
    parties: Sequence[PartyVotes],
    candidate_emb: np.ndarray,
    candidate_groups: np.ndarray,
    *,
    q: int,
    sigma: float,
    value_bound: float,
    metric: str = "l2",
    normalise: bool = False,
    **aggregate: Any,
) -> FederatedTopQ:
    """Σ over the surviving parties of (clip(party_topq(...), ±B) + N(0, σ²/t)), quantised (module docstring).

    ``sigma`` — noise std of the sum (z·Δ); ``aggregate`` — the keyword options of
    :func:`~privtext.federated.aggregate.federated_sum` (aggregation, survivors, collusion, seeds, drop-outs)."""
    n = len(candidate_emb)
    if n == 0:
        raise ConfigError("federated Top-Q voting needs at least one candidate")
    local = functools.partial(party_topq, candidate_emb=np.asarray(candidate_emb),
                              candidate_groups=np.asarray(candidate_groups), q=q, metric=metric, normalise=normalise)
    r = federated_sum(parties, local, dim=2 * n, sigma=sigma, value_bound=value_bound, **aggregate)
    return FederatedTopQ(**vars(r), nearest=r.values[:n], furthest=r.values[n:])


__all__ = ["FederatedTopQ", "PartyVotes", "federated_topq", "party_topq"]
