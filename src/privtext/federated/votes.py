"""Aug-PE's nearest-neighbour votes from several data holders: the PrE-Text setting (Hou et al. 2024, ICML;
WASP §5's federated baseline), Private Evolution over private data held by L parties.

Each party l holds its own records (:class:`~privtext.federated.topq.PartyVotes`). Every iteration the server
publishes the candidates (synthetic, public) and the public centring vector; each party computes the exact
nearest-neighbour vote counts h_l of **its own records only** (:func:`privtext.mechanisms.voting.nearest_votes`,
one vote per record for its nearest candidate of its own label), adds its share N(0, σ²/t) of the noise and the
server learns only the sum (SecAgg+, or the in-process ``plain`` reference)

    h̃ = Σ_{l∈S} h_l + N(0, (|S|/t)·σ² I),    |S| ≥ t.

Compared with WASP (:mod:`privtext.federated.topq`) a party uploads one histogram (Hⁿ with Q = 1, no Hᶠ): WASP
App E.5, Tab 11.

Sensitivity of the sum
----------------------
A record's vote depends on the record and the public candidates only, so Σ_l h_l is the single-holder vote
histogram over the union of the parties' records, and:

* **record level** (add/remove one record at one party): one bin moves by 1, Δ = 1 (:mod:`privtext.mechanisms.voting`);
* **user level, capped** (add/remove one party with its ≤ m records, m a PUBLIC cap each party enforces,
  :func:`~privtext.federated.noise.cap_records`): the party's histogram has L1 norm ≤ m, and its L2 norm is
  largest when all m votes fall in one bin, so Δ = m (:func:`~privtext.federated.noise.user_level_sensitivity`
  with Δ_record = 1);
* **user level, normalised** (each party sends h_l/‖h_l‖₂): Δ = 1 whatever its size.

Clipping each coordinate to the public bound B before the noise is 1-Lipschitz, so none of these grows. With
σ = z·Δ the release is ``GaussianDpEvent(z)``, recorded before any party computes; with drop-outs the sum carries
std σ·√(|S|/t) ≥ σ, post-processing of the σ-mechanism (:mod:`privtext.federated.noise`).

What PrE-Text does beyond this and privtext does not: sampling a fraction of the clients per round (privacy
amplification by sampling is not claimed here), and fine-tuning a model on the final synthetic set.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..mechanisms.voting import nearest_votes
from .aggregate import FederatedSum, federated_sum
from .topq import PartyVotes


def party_nn_votes(data: PartyVotes, *, candidate_emb: np.ndarray, candidate_groups: np.ndarray,
                   metric: str = "l2", center: np.ndarray | None = None, backend: str = "auto",
                   normalise: bool = False) -> np.ndarray:
    """One party's exact vote counts over the candidates (length |D|), from its own records only; unit L2 norm
    with ``normalise`` (a zero vector stays zero). Runs inside the party (its process under SecAgg+)."""
    counts, _ = nearest_votes(data.emb, candidate_emb, private_groups=data.groups,
                              candidate_groups=candidate_groups, metric=metric, backend=backend,  # type: ignore[arg-type]
                              center=center)
    v = counts.astype(np.float64)
    if normalise:
        n = float(np.linalg.norm(v))
        v = v / n if n > 0 else v
    return v


def federated_nn_votes(
    parties: Sequence[PartyVotes],
    candidate_emb: np.ndarray,
    candidate_groups: np.ndarray,
    *,
    sigma: float,
    value_bound: float,
    metric: str = "l2",
    center: np.ndarray | None = None,
    backend: str = "auto",
    normalise: bool = False,
    **aggregate: Any,
) -> FederatedSum:
    """Σ over the surviving parties of (clip(party_nn_votes(...), ±B) + N(0, σ²/t)), quantised: the released
    histogram is ``values``.

    ``sigma`` — noise std of the sum (z·Δ); ``aggregate`` — the keyword options of
    :func:`~privtext.federated.aggregate.federated_sum` (aggregation, survivors, collusion, seeds, drop-outs)."""
    n = len(candidate_emb)
    if n == 0:
        raise ConfigError("federated nearest-neighbour voting needs at least one candidate")
    local = functools.partial(party_nn_votes, candidate_emb=np.asarray(candidate_emb, dtype=np.float32),
                              candidate_groups=np.asarray(candidate_groups), metric=metric,
                              center=None if center is None else np.asarray(center, dtype=np.float32),
                              backend=backend, normalise=normalise)
    return federated_sum(parties, local, dim=n, sigma=sigma, value_bound=value_bound, **aggregate)


__all__ = ["federated_nn_votes", "party_nn_votes"]
