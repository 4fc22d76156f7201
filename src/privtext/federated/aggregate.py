"""One aggregation round over several data holders: each party's local vector, clipped to the public bound B,
plus its share N(0, σ²/t) of the Gaussian noise, quantised, summed by Flower SecAgg+ (each party its own process)
or by the in-process reference sum (``plain``: NOT a secure aggregation); with ``collusion: c`` each party adds
N(0, σ²/(t − c)) instead. The derivation of the noise shares, the
drop-out rule and the quantisation bound is in :mod:`privtext.federated.noise`; the local vectors are the
methods' (WASP's Top-Q pair, :mod:`privtext.federated.topq`; Aug-PE's / PrE-Text's nearest votes,
:mod:`privtext.federated.votes`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import AggregationError, ConfigError
from .noise import plain_sum, plan_quantisation


@dataclass
class FederatedSum:
    """The released sum and what is public about its round."""

    values: np.ndarray     # float64, length dim: Σ_{l∈S} x̂_l
    survivors: list[int]   # S: the parties whose vectors are in the sum
    noise_std: float       # std of the noise in the sum: σ·√(|S|/t) ≥ σ
    seconds: float         # wall time of the aggregation (process start included under SecAgg+)
    clip_range: float
    max_error: float       # per-coordinate bound of the quantisation error


def federated_sum(
    parties: Sequence[object],
    local: Callable[[object], np.ndarray],
    *,
    dim: int,
    sigma: float,
    value_bound: float,
    aggregation: Literal["secagg", "plain"] = "secagg",
    min_survivors: int | None = None,
    seed: int | None = None,
    key: str = "votes",
    reproducible: bool = False,
    drop: Mapping[int, str] | None = None,
    timeout: float = 120.0,
    collusion: int = 0,
) -> FederatedSum:
    """Σ over the surviving parties of (clip(local(party), ±B) + N(0, σ²/t)), quantised (noise.py).

    ``sigma`` — noise std of the sum (z·Δ); ``drop`` — {party: stage} (tests): under SecAgg+ that party crashes
    at that stage; under ``plain`` it is left out of the sum. Fewer than t survivors: :class:`AggregationError`,
    nothing is released. ``collusion`` — c: each party adds σ/√(t − c) instead of σ/√t, so the sum keeps noise
    std ≥ σ against a server that colludes with up to c parties (noise.py, "Collusion")."""
    L = len(parties)
    t = L if min_survivors is None else min_survivors
    if aggregation not in ("secagg", "plain"):
        raise ConfigError(f"aggregation must be 'secagg' or 'plain', got {aggregation!r}")
    if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= L:
        raise ConfigError(f"min_survivors must be an integer in [1, {L}], got {min_survivors!r}")
    if dim < 1:
        raise ConfigError(f"an aggregation needs a vector of at least one coordinate, got dim={dim}")
    start = time.perf_counter()
    if aggregation == "secagg":
        from .secagg import secure_sum

        r = secure_sum(list(parties), local, dim=dim, sigma=sigma, value_bound=value_bound, min_survivors=t,
                       seed=seed, key=key, reproducible=reproducible, drop=drop, timeout=timeout,
                       collusion=collusion)
        values, survivors, std, c, err = r.values, r.survivors, r.noise_std, r.plan.clip_range, r.max_error
    else:
        survivors = [k for k in range(L) if k not in (drop or {})]
        if len(survivors) < t:
            raise AggregationError(f"only {len(survivors)} of {L} parties answered, fewer than min_survivors={t}; "
                                   "nothing was released")
        plan = plan_quantisation(n_parties=L, dim=dim, sigma=sigma, value_bound=value_bound, min_survivors=t,
                                 collusion=collusion)
        values = plain_sum(list(parties), local, plan, seed=seed, key=key, reproducible=reproducible,
                           quantised=True, survivors=survivors)
        std, c, err = plan.party_std * len(survivors) ** 0.5, plan.clip_range, plan.max_error(len(survivors))
    return FederatedSum(values=np.asarray(values, dtype=np.float64), survivors=list(survivors),
                        noise_std=float(std), seconds=time.perf_counter() - start, clip_range=float(c),
                        max_error=float(err))


__all__ = ["FederatedSum", "federated_sum"]
