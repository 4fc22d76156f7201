"""The federated threat model, in numbers and words, for the privacy statement (issue 21, bug 6).

Every party adds N(0, τ²) with τ = σ/√(t − c) (t = ``min_survivors``, c = ``collusion``, default 0; see
:mod:`privtext.federated.noise`, "Collusion"). A server that colludes with k parties subtracts their shares; the
honest survivors' noise has variance ≥ (t − k)·τ² = σ²·(t − k)/(t − c). Each party-sum release recorded with the
event ``GaussianDpEvent(z)`` (z = σ/Δ) is therefore, against such a coalition, at least a Gaussian mechanism with

    z_k = z · √((t − k)/(t − c))        (k < t; for k ≥ t no noise need be left: ε = ∞).

:func:`collusion_epsilon` composes the run's releases with the party sums' multipliers replaced by z_k (the other
releases — a central label histogram, a DP vocabulary — keep their events) and returns ε at δ from the same PLD
accountant as the ledger. :func:`threat_model` gives the sentences and a few bounds for ``privacy.json``.

A release is a party sum when its ``meta`` has ``parties`` (the federated scorers record it); its ``meta``
``min_survivors`` and ``collusion`` give its t and c.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ConfigError, InvalidPrivacyParameter
from ..privacy.accounting import epsilon_for_delta


def _release_of(x: Any) -> Any:
    """A :class:`~privtext.privacy.release.Release`, or a ledger entry holding one."""
    return getattr(x, "release", x)


def is_party_sum(release: Any) -> bool:
    return bool((getattr(release, "meta", None) or {}).get("parties"))


def noise_factor(*, min_survivors: int, collusion: int, colluding: int) -> float:
    """z_k / z = √((t − k)/(t − c)) for k colluding parties (0 when k ≥ t: their shares may be all the noise)."""
    t, c, k = int(min_survivors), int(collusion), int(colluding)
    if not 0 <= c < t:
        raise ConfigError(f"collusion must be in [0, min_survivors={t}), got {c}")
    if k < 0:
        raise ConfigError(f"the number of colluding parties must be ≥ 0, got {k}")
    return 0.0 if k >= t else math.sqrt((t - k) / (t - c))


def _scaled(event: Any, factor: float) -> Any:
    from ..privacy.events import scaled_noise

    try:
        return scaled_noise(event, factor)
    except InvalidPrivacyParameter as e:  # names the leaf that is not a Gaussian
        raise ConfigError(f"a party-sum release: {e} (only Gaussian party sums are analysed)") from None


def collusion_epsilon(releases: Iterable[Any], *, delta: float, colluding: int) -> float:
    """ε at ``delta`` of all ``releases`` (Release objects or ledger entries) against a server colluding with
    ``colluding`` parties: each party sum's noise multiplier scaled by :func:`noise_factor` (its own t and c from
    its ``meta``), every other release unchanged. ∞ when a party sum may be left with no noise."""
    events = []
    for x in releases:
        r = _release_of(x)
        if not is_party_sum(r):
            events.append(r.event)
            continue
        meta = r.meta
        t = int(meta.get("min_survivors") or meta["parties"])
        f = noise_factor(min_survivors=t, collusion=int(meta.get("collusion") or 0), colluding=colluding)
        if f == 0.0:
            return math.inf
        events.append(_scaled(r.event, f))
    if not events:
        return 0.0
    return float(epsilon_for_delta(events, delta))


def threat_model(*, aggregation: str, parties: int, min_survivors: int | None = None, collusion: int = 0,
                 releases: Sequence[Any] | None = None, delta: float | None = None) -> dict[str, Any]:
    """What the federated guarantee assumes, for ``privacy.json``: ``model``, ``collusion``, ``sentences`` and,
    given the run's ``releases`` and ``delta``, ``bounds``: ε against a server colluding with k parties for
    k = 0, c, c + 1 and t − 1 (those that exist)."""
    L = int(parties)
    t = L if min_survivors is None else int(min_survivors)
    c = int(collusion)
    if aggregation == "plain":
        return {"model": "none (plain aggregation: one process holds every party's data)", "collusion": c,
                "sentences": ["Threat model: none. With aggregation plain the votes of every party were summed in "
                              "one process that held all the data; the guarantee covers what was released, not "
                              "that process."],
                "bounds": []}
    if aggregation != "secagg":
        raise ConfigError(f"aggregation must be 'secagg' or 'plain', got {aggregation!r}")
    noise_factor(min_survivors=t, collusion=c, colluding=0)  # validates c
    share = f"N(0, σ²/{t})" if c == 0 else f"N(0, σ²/({t} − {c}))"
    sentences = [
        f"Threat model: Flower SecAgg+ (semi-honest) hides each party's vector from an honest-but-curious server, "
        f"one that follows the protocol and learns only the sum. Each of the {L} parties added {share} "
        f"(t = {t} survivors at least, collusion c = {c}), so the stated guarantee holds against such a server "
        + ("alone." if c == 0 else f"colluding with up to {c} part{'y' if c == 1 else 'ies'}, for the records of "
           "the other parties."),
        "A server that colludes with k parties learns their noise shares: the noise left has std "
        "σ·√((t − k)/(t − c)); set parties.collusion: k to make each party add σ/√(t − k) instead.",
        "A malicious server (one that deviates from the protocol) is not covered.",
    ]
    bounds: list[dict[str, Any]] = []
    if releases is not None and delta is not None:
        for k in sorted({0, c, c + 1, t - 1}):
            if 0 <= k < t:
                bounds.append({"colluding": k, "epsilon": collusion_epsilon(releases, delta=delta, colluding=k),
                               "delta": float(delta)})
        worse = [b for b in bounds if b["colluding"] > c]
        if worse:
            sentences.append("Against a server colluding with more parties than that: " + "; ".join(
                f"{b['colluding']} → ε = {b['epsilon']:.4g}" for b in worse) + f" (δ = {delta:g}).")
    return {"model": "honest-but-curious server", "collusion": c, "sentences": sentences, "bounds": bounds}


__all__ = ["collusion_epsilon", "is_party_sum", "noise_factor", "threat_model"]
