"""Privacy accounting: events, budgets, calibration, SecPE's SecretNoise, and the run ledger.

Built on google's ``dp_accounting`` (events, privacy loss distributions); see docs/privacy.md for the math and
where we depart from the papers.

* :mod:`.conversions` — μ-GDP ⇄ (ε, δ) ⇄ (p, r) closed forms (SecPE Eq 2, 4, Remark C.1, Lemma C.2, Thm 3)
* :mod:`.events` — dp_accounting events, their JSON form, flattening; :class:`SecretEvent`
* :mod:`.accounting` — ε(δ), μ, and the blow-up B(p) from pessimistic PLDs
* :mod:`.calibration` — one generic :func:`calibrate`; the papers' formulas for comparison
* :mod:`.secret_noise` — SecPE Alg 1 (LP, sampling probabilities, per-secret noise)
* :mod:`.ledger` — :class:`Release`, :class:`Ledger` (append-only, fsync'd, checked before data is touched)
* :mod:`.cli` — ``privtext budget ...`` calculators
"""

from __future__ import annotations

from .accounting import (
    BLOWUP_DISCRETIZATION,
    DEFAULT_DISCRETIZATION,
    blowup_from_pld,
    blowup_lower_bound,
    blowup_of,
    delta_for_epsilon,
    epsilon_for_delta,
    equivalent_mu,
    gdp_mu_of,
    mixture_pld,
)
from .budget import Budget
from .calibration import (
    DpTarget,
    GdpTarget,
    SecretTarget,
    augpe_noise_multiplier,
    calibrate,
    gaussian_noise_multiplier,
    laplace_scale,
    wasp_noise_multiplier,
)
from .conversions import (
    compose_pr,
    dp_blowup,
    dp_to_pr,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_for_dp,
    gdp_tradeoff,
    mu_from_pr,
    r_from_mu_p,
)
from .events import SecretEvent, event_from_dict, event_key, event_to_dict, flatten, gaussian_event
from .ledger import DuplicateReleaseError, Ledger, LedgerEntry, Release
from .secret_noise import (
    SecretGroup,
    SecretNoiseResult,
    lp_weights,
    mixture_event,
    poisson_binomial_pmf,
    sampling_probabilities,
    secret_blowup,
    secret_noise,
)

#: alias: the blow-up of a composition of events at prior p
blowup = blowup_of

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
    "delta_for_epsilon",
    "dp_blowup",
    "dp_to_pr",
    "epsilon_for_delta",
    "equivalent_mu",
    "event_from_dict",
    "event_key",
    "event_to_dict",
    "flatten",
    "gaussian_event",
    "gaussian_noise_multiplier",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for_dp",
    "gdp_mu_of",
    "gdp_tradeoff",
    "laplace_scale",
    "lp_weights",
    "mixture_event",
    "mixture_pld",
    "mu_from_pr",
    "poisson_binomial_pmf",
    "r_from_mu_p",
    "sampling_probabilities",
    "secret_blowup",
    "secret_noise",
    "wasp_noise_multiplier",
]
