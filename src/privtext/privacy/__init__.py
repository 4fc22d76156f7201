"""Privacy accounting: events, budgets, calibration, SecPE's SecretNoise, and the run ledger.

Built on google's ``dp_accounting`` (events, privacy loss distributions); see docs/privacy.md for the math and
where we depart from the papers.

* :mod:`.conversions` — μ-GDP ⇄ (ε, δ) ⇄ (p, r) closed forms (SecPE Eq 2, 4, Remark C.1, Lemma C.2, Thm 3)
* :mod:`.events` — dp_accounting events, their JSON form, flattening; :class:`SecretEvent`
* :mod:`.accounting` — ε(δ), μ, and the blow-up B(p) from pessimistic PLDs
* :mod:`.calibration` — :func:`noise_multiplier`, the one entry point for a run's σ; the generic
  :func:`calibrate`; the papers' closed forms
* :mod:`.secretnoise` — SecPE Alg 1 (LP, sampling probabilities, per-secret noise)
* :mod:`.release` — :class:`Release` and :class:`ReleaseKeeper`: describe, record, compute, keep (the one path)
* :mod:`.ledger` — :class:`Ledger` (append-only, fsync'd, checked before data is touched)
* :mod:`.statement` — :class:`PrivacyStatement`: the shareable ``privacy.json`` and its words
* :mod:`.cli` — ``privtext budget ...`` calculators
"""

from __future__ import annotations

import importlib
from typing import Any

# Exports load on first use (PEP 562): importing privtext.privacy (e.g. for the CLI) stays cheap, and
# dp_accounting (several seconds to import) loads only when an accounting function is used.
_LAZY: dict[str, str] = {
    "BLOWUP_DISCRETIZATION": "accounting",
    "Budget": "budget",
    "DEFAULT_DISCRETIZATION": "accounting",
    "DpTarget": "calibration",
    "DuplicateReleaseError": "ledger",
    "GdpTarget": "calibration",
    "Ledger": "ledger",
    "LedgerEntry": "ledger",
    "Release": "release",
    "ReleaseKeeper": "release",
    "SecretEvent": "events",
    "SecretGroup": "secretnoise",
    "SecretNoiseResult": "secretnoise",
    "SecretTarget": "calibration",
    "augpe_noise_multiplier": "calibration",
    "blowup_from_pld": "accounting",
    "blowup_lower_bound": "accounting",
    "blowup_of": "accounting",
    "calibrate": "calibration",
    "compose_pr": "conversions",
    "composed": "events",
    "delta_for_epsilon": "accounting",
    "dp_blowup": "conversions",
    "dp_to_pr": "conversions",
    "dpsgd_event": "events",
    "epsilon_for_delta": "accounting",
    "equivalent_mu": "accounting",
    "event_from_dict": "events",
    "event_key": "events",
    "event_to_dict": "events",
    "flatten": "events",
    "gaussian_event": "events",
    "gaussian_noise_multiplier": "calibration",
    "gaussian_share_noise_multiplier": "calibration",
    "gdp_delta": "conversions",
    "gdp_epsilon": "conversions",
    "gdp_mu_for_dp": "conversions",
    "gdp_mu_of": "accounting",
    "gdp_tradeoff": "conversions",
    "laplace_event": "events",
    "laplace_scale": "calibration",
    "lp_weights": "secretnoise",
    "mixture_event": "secretnoise",
    "mixture_of_gaussians_event": "events",
    "mixture_pld": "accounting",
    "mu_from_pr": "conversions",
    "no_op_event": "events",
    "noise_multiplier": "calibration",
    "paper_noise_multiplier": "calibration",
    "poisson_binomial_pmf": "secretnoise",
    "poisson_sampled": "events",
    "r_from_mu_p": "conversions",
    "sampling_probabilities": "secretnoise",
    "scaled_noise": "events",
    "secret_blowup": "secretnoise",
    "secret_event": "events",
    "secret_noise": "secretnoise",
    "self_composed": "events",
    "share_noise_ratio": "calibration",
    "target_of": "calibration",
}
_ALIASES = {"blowup": ("accounting", "blowup_of")}  # the blow-up of a composition of events at prior p


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    elif name in _ALIASES:
        mod, attr = _ALIASES[name]
        value = getattr(importlib.import_module(f".{mod}", __name__), attr)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BLOWUP_DISCRETIZATION",
    "DEFAULT_DISCRETIZATION",
    "Budget",
    "DpTarget",
    "DuplicateReleaseError",
    "GdpTarget",
    "Ledger",
    "LedgerEntry",
    "Release",
    "ReleaseKeeper",
    "SecretEvent",
    "SecretGroup",
    "SecretNoiseResult",
    "SecretTarget",
    "augpe_noise_multiplier",
    "blowup",
    "blowup_from_pld",
    "blowup_lower_bound",
    "blowup_of",
    "calibrate",
    "compose_pr",
    "composed",
    "delta_for_epsilon",
    "dp_blowup",
    "dp_to_pr",
    "dpsgd_event",
    "epsilon_for_delta",
    "equivalent_mu",
    "event_from_dict",
    "event_key",
    "event_to_dict",
    "flatten",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "gaussian_share_noise_multiplier",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for_dp",
    "gdp_mu_of",
    "gdp_tradeoff",
    "laplace_event",
    "laplace_scale",
    "lp_weights",
    "mixture_event",
    "mixture_of_gaussians_event",
    "mixture_pld",
    "mu_from_pr",
    "no_op_event",
    "noise_multiplier",
    "paper_noise_multiplier",
    "poisson_binomial_pmf",
    "poisson_sampled",
    "r_from_mu_p",
    "sampling_probabilities",
    "scaled_noise",
    "secret_blowup",
    "secret_event",
    "secret_noise",
    "self_composed",
    "share_noise_ratio",
    "target_of",
]
