"""Pure ε of a composition of Laplace events (DP-KPS's guarantee is pure ε-DP).

For pure ε-DP, basic composition is exact in the worst case: a mechanism of ε₁ followed by one of ε₂ is
(ε₁ + ε₂)-DP, and for Laplace mechanisms this is attained (the privacy loss of each is ±ε_i with positive
probability on the same side). So ε(tree) is a sum over the leaves: ``LaplaceDpEvent(b/Δ)`` costs Δ/b,
``SelfComposedDpEvent(e, n)`` costs n·ε(e), ``ComposedDpEvent([...])`` the sum, ``NoOpDpEvent`` 0. A Gaussian or
any other leaf has no finite pure ε: ∞. This cross-checks the PLD accountant
(:func:`privtext.privacy.accounting.epsilon_for_delta`), whose ε(δ) tends to this sum as δ → 0.
"""

from __future__ import annotations

import math
from typing import Any

from dp_accounting import dp_event as _dpe

from ..errors import PrivacyError


def pure_epsilon(event: Any) -> float:
    """ε such that ``event`` is ε-DP (pure), ∞ when it has none (Gaussian, non-private, zero-noise leaves)."""
    if isinstance(event, _dpe.NoOpDpEvent):
        return 0.0
    if isinstance(event, _dpe.LaplaceDpEvent):
        b = float(event.noise_multiplier)
        if b < 0 or math.isnan(b):
            raise PrivacyError(f"LaplaceDpEvent with a negative noise multiplier: {b!r}")
        return math.inf if b == 0 else 1.0 / b
    if isinstance(event, _dpe.SelfComposedDpEvent):
        n = int(event.count)
        return 0.0 if n == 0 else n * pure_epsilon(event.event)
    if isinstance(event, _dpe.ComposedDpEvent):
        return math.fsum(pure_epsilon(e) for e in event.events)
    if isinstance(event, (_dpe.GaussianDpEvent, _dpe.NonPrivateDpEvent, _dpe.MixtureOfGaussiansDpEvent)):
        return math.inf
    raise PrivacyError(f"no pure-ε rule for {type(event).__name__}")


__all__ = ["pure_epsilon"]
