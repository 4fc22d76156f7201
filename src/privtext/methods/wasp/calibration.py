"""WASP's own noise formula (``privacy.calibration: paper``), kept beside the method that defines it.

The run's σ still goes through :func:`privtext.privacy.calibration.noise_multiplier` (the one entry point): WASP
hands it :func:`paper_formula` as its ``formula``, and the ledger accounts for the σ it gives.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...errors import InvalidPrivacyParameter
from ...privacy.conversions import check_delta, check_epsilon


def wasp_noise_multiplier(epsilon: float, delta: float, *, iterations: int, sensitivity: float = 1.0) -> float:
    """WASP's σ = Δ·√(2 ln(1.25/δ))·√(T−1)/ε (wasp.txt Alg 1 line 2, Thm D.4; WASP uses Δ = 4).

    ``iterations`` is WASP's T, the number of generation rounds; only the T − 1 rounds *with feedback* release
    private votes, hence √(T−1). **At T = 1 the formula gives σ = 0**: correct only because WASP then releases
    nothing private — calling a noisy release with this σ would be a non-private release, so we refuse T < 2.

    Two further caveats (docs/privacy.md): the per-round step uses the classical Gaussian mechanism bound
    σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1), proven only for ε < 1 — WASP runs at ε = 4, where it happens
    to hold (true ε ≈ 3.51 at δ = 1e-5), but it fails for larger ε (asked ε = 10 gives a true ε ≈ 10.39, ε = 20
    gives 25.4); the √(T−1)
    composition of Lemma D.3 is exact for Gaussians (μ adds in quadrature), so that step is fine.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    if not isinstance(iterations, int) or iterations < 2:
        raise InvalidPrivacyParameter(
            f"WASP's formula needs iterations T ≥ 2, got {iterations!r}: at T = 1 it gives σ = 0 (no private "
            "release happens in WASP's first round; a release with σ = 0 would not be private)"
        )
    if not epsilon > 0 or not sensitivity > 0:
        raise InvalidPrivacyParameter("epsilon and sensitivity must be positive")
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) * math.sqrt(iterations - 1) / epsilon


def paper_formula(*, releases: int, paper_sensitivity: float = 1.0,
                  sensitivity: float = 1.0) -> Callable[[Any], float]:
    """``budget ↦ z``: the noise multiplier of each of ``releases`` = T − 1 private vote releases by WASP's
    formula, its noise std s = :func:`wasp_noise_multiplier` (with the paper's Δ, ``paper_sensitivity``) divided by
    the release's exact sensitivity ``sensitivity`` (Δ_Q): the ledger accounts for z = s/Δ_Q, the privacy the std
    actually gives. Only an (ε, δ) budget has the formula's inputs."""

    def formula(budget: Any) -> float:
        if budget.kind != "dp":
            raise InvalidPrivacyParameter(f"privacy.calibration: paper needs an (ε, δ) budget for WASP (got a "
                                          f"{budget.kind} budget)")
        std = wasp_noise_multiplier(budget.epsilon, budget.delta, iterations=releases + 1,
                                    sensitivity=paper_sensitivity)
        return std / sensitivity

    return formula


__all__ = ["paper_formula", "wasp_noise_multiplier"]
