"""A run's privacy budget: (ε, δ)-DP, μ-GDP, (p, r)-secret protection, or a fixed noise (no cap).

``Budget`` is frozen and validated; build it with :meth:`Budget.dp`, :meth:`Budget.gdp`, :meth:`Budget.secret`,
:meth:`Budget.noise`, or :meth:`Budget.from_config` (a :class:`privtext.config.PrivacyConfig`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import InvalidPrivacyParameter
from .conversions import check_delta, check_epsilon, check_pr, mu_from_pr

Kind = Literal["dp", "pure", "gdp", "secret", "noise"]


@dataclass(frozen=True)
class Budget:
    """What the ledger enforces.

    * ``dp`` — (epsilon, delta)-DP, add-or-remove-one-record neighbours;
    * ``pure`` — pure ε-DP (δ = 0), add-or-remove-one-record neighbours: events compose by summing their pure ε
      (:func:`privtext.privacy.pure.pure_epsilon`; Laplace leaves only — a Gaussian has no finite pure ε). DP-KPS;
    * ``gdp`` — mu-GDP (Dong, Roth & Su 2019; SecPE Def 2.2);
    * ``secret`` — (p, r)-secret protection (SecPE Def 3.1): ``p``/``r`` are floats, or tuples with one entry per
      secret (column of the membership matrix);
    * ``noise`` — no cap: releases are recorded and ε at ``report_delta`` is reported only.
    """

    kind: Kind
    epsilon: float | None = None
    delta: float | None = None
    mu: float | None = None
    p: float | tuple[float, ...] | None = None
    r: float | tuple[float, ...] | None = None
    report_delta: float = 1e-5
    noise_multiplier: float | None = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def dp(cls, epsilon: float, delta: float) -> Budget:
        """(ε, δ)-DP for add-or-remove-one neighbours; ε(δ) is measured with the PLD accountant and the ledger
        refuses a release above ε. Raises :class:`~privtext.errors.InvalidPrivacyParameter` unless 0 < ε < ∞ and 0 <
        δ < 1."""
        check_epsilon(epsilon)
        check_delta(delta)
        if not (float(epsilon) > 0 and math.isfinite(float(epsilon))):
            raise InvalidPrivacyParameter(f"epsilon must be positive and finite, got {epsilon!r}")
        return cls(kind="dp", epsilon=float(epsilon), delta=float(delta), report_delta=float(delta))

    @classmethod
    def pure(cls, epsilon: float) -> Budget:
        """Pure ε-DP: the ledger sums the pure ε of the recorded (Laplace) events and refuses a release above ε."""
        check_epsilon(epsilon)
        if not (float(epsilon) > 0 and math.isfinite(float(epsilon))):
            raise InvalidPrivacyParameter(f"epsilon must be positive and finite, got {epsilon!r}")
        return cls(kind="pure", epsilon=float(epsilon), delta=0.0)

    @classmethod
    def gdp(cls, mu: float, *, report_delta: float = 1e-5) -> Budget:
        """μ-GDP (SecPE Def 2.2); ε at ``report_delta`` is reported beside it (Remark C.1). Raises
        :class:`~privtext.errors.InvalidPrivacyParameter` unless μ is positive and finite."""
        if not (isinstance(mu, (int, float, np.floating, np.integer)) and float(mu) > 0 and math.isfinite(float(mu))):
            raise InvalidPrivacyParameter(
                f"mu must be a positive finite number, got {mu!r}: μ is the GDP distance between the output "
                "distributions with and without one record"
            )
        check_delta(report_delta)
        return cls(kind="gdp", mu=float(mu), report_delta=float(report_delta))

    @classmethod
    def secret(cls, p: Any, r: Any, *, report_delta: float = 1e-5) -> Budget:
        """(p, r)-secret protection (SecPE Def 3.1): one pair, or per-secret 1-d arrays of p and r (one per column
        of the membership matrix). Raises :class:`~privtext.errors.InvalidPrivacyParameter` unless 0 < p < r ≤ 1
        elementwise."""
        pa, ra = check_pr(p, r)
        check_delta(report_delta)
        if pa.ndim == 0:
            return cls(kind="secret", p=float(pa), r=float(ra), report_delta=float(report_delta))
        if pa.ndim != 1:
            raise InvalidPrivacyParameter(f"per-secret p and r must be 1-d, got shape {pa.shape}")
        return cls(kind="secret", p=tuple(map(float, pa)), r=tuple(map(float, ra)), report_delta=float(report_delta))

    @classmethod
    def noise(cls, report_delta: float = 1e-5, *, noise_multiplier: float | None = None) -> Budget:
        """No privacy target: releases use the fixed ``noise_multiplier`` (σ/Δ), are recorded, and ε at
        ``report_delta`` is only reported. Raises :class:`~privtext.errors.InvalidPrivacyParameter` for a negative
        multiplier."""
        check_delta(report_delta)
        if noise_multiplier is not None and not noise_multiplier >= 0:
            raise InvalidPrivacyParameter(f"noise_multiplier must be ≥ 0, got {noise_multiplier!r}")
        return cls(kind="noise", report_delta=float(report_delta),
                   noise_multiplier=None if noise_multiplier is None else float(noise_multiplier))

    @classmethod
    def from_config(cls, cfg: Any) -> Budget:
        """From a :class:`privtext.config.PrivacyConfig` (its ``kind`` decides the form)."""
        kind = cfg.kind
        if kind == "dp":
            return cls.dp(cfg.epsilon, cfg.delta)
        if kind == "pure":
            return cls.pure(cfg.epsilon)
        if kind == "gdp":
            return cls.gdp(cfg.mu)
        if kind == "secret":
            return cls.secret(cfg.secret.p, cfg.secret.r)
        if kind == "noise":
            return cls.noise(noise_multiplier=cfg.noise_multiplier)
        raise InvalidPrivacyParameter(f"unknown privacy budget kind {kind!r}")

    # ------------------------------------------------------------------ views
    @property
    def per_secret(self) -> bool:
        """Whether this is a secret budget with one (p, r) pair per secret."""
        return self.kind == "secret" and isinstance(self.p, tuple)

    @property
    def pairs(self) -> list[tuple[float, float]]:
        """The distinct (p, r) pairs of a secret budget, sorted."""
        if self.kind != "secret":
            return []
        if isinstance(self.p, tuple):
            assert isinstance(self.r, tuple)
            return sorted(set(zip(self.p, self.r, strict=True)))
        assert isinstance(self.r, float)
        return [(float(self.p), float(self.r))]  # type: ignore[arg-type]

    def pair_of(self, secret: int) -> tuple[float, float]:
        """(p_j, r_j) of secret column ``secret``."""
        if self.kind != "secret":
            raise InvalidPrivacyParameter(f"a {self.kind} budget has no per-secret (p, r)")
        if isinstance(self.p, tuple):
            assert isinstance(self.r, tuple)
            if not 0 <= secret < len(self.p):
                raise InvalidPrivacyParameter(f"secret index {secret} outside the budget's {len(self.p)} secrets")
            return self.p[secret], self.r[secret]
        return float(self.p), float(self.r)  # type: ignore[arg-type]

    @property
    def gaussian_mu(self) -> float:
        """The μ-GDP level a Gaussian mechanism needs for this budget (secret: the strictest pair, Eq 4)."""
        from .conversions import gdp_mu_for_dp

        if self.kind == "gdp":
            return float(self.mu)  # type: ignore[arg-type]
        if self.kind == "dp":
            return float(gdp_mu_for_dp(self.epsilon, self.delta))
        if self.kind == "secret":
            return min(float(mu_from_pr(p, r)) for p, r in self.pairs)
        return math.inf

    def to_dict(self) -> dict[str, Any]:
        """The budget as privacy.json writes it: its kind and that kind's parameters (report_delta where ε is only
        reported)."""
        d: dict[str, Any] = {"kind": self.kind}
        if self.kind == "dp":
            d.update(epsilon=self.epsilon, delta=self.delta)
        elif self.kind == "pure":
            d.update(epsilon=self.epsilon)
        elif self.kind == "gdp":
            d.update(mu=self.mu, report_delta=self.report_delta)
        elif self.kind == "secret":
            d.update(p=list(self.p) if isinstance(self.p, tuple) else self.p,
                     r=list(self.r) if isinstance(self.r, tuple) else self.r, report_delta=self.report_delta)
        else:
            d.update(report_delta=self.report_delta, noise_multiplier=self.noise_multiplier)
        return d

    def describe(self) -> str:
        """The budget in words, e.g. ``(ε=4, δ=1e-05)-DP`` or ``μ=1-GDP``."""
        if self.kind == "dp":
            return f"(ε={self.epsilon:g}, δ={self.delta:g})-DP"
        if self.kind == "pure":
            return f"pure ε={self.epsilon:g}-DP"
        if self.kind == "gdp":
            return f"μ={self.mu:g}-GDP"
        if self.kind == "secret":
            if self.per_secret:
                return f"per-secret (p, r)-secret protection over {len(self.p)} secrets"  # type: ignore[arg-type]
            return f"(p={self.p:g}, r={self.r:g})-secret protection"
        return "no privacy target (fixed noise; ε reported only)"


@dataclass(frozen=True)
class BudgetSplit:
    """How a run divides its budget among its releases: named parts of a total, in the unit that composes by
    addition — pure ε (Laplace releases: ε's add up) or μ² (Gaussian releases: μ-GDP composes as μ² sums, Dong,
    Roth & Su 2019, Cor 3.3). The one object every method splits its budget with (DP-KPS's labels / vocabulary /
    sketches, Aug-PE's label histogram / votes). Parts are kept as given (absolute ε or μ²), so a part is exactly
    the number the configuration implies; together they may not exceed the total.

    ``BudgetSplit.pure(6.0, {"labels": 0.6, "vocab": 0.9, "kde": 4.5}).epsilon("vocab") == 0.9``;
    ``BudgetSplit.gdp(1.0, {"labels": 0.1, "votes": 0.9}).mu("labels") == √0.1``."""

    kind: Literal["pure", "gdp"]
    total: float  # ε, or μ
    parts: tuple[tuple[str, float], ...]  # ε each, or μ² each

    def __post_init__(self) -> None:
        if not (math.isfinite(self.total) and self.total > 0):
            raise InvalidPrivacyParameter(f"a budget to split must be positive and finite, got {self.total!r}")
        names = [n for n, _ in self.parts]
        if len(set(names)) != len(names):
            raise InvalidPrivacyParameter(f"budget parts must have distinct names, got {names}")
        bad = [(n, v) for n, v in self.parts if not (math.isfinite(v) and v > 0)]
        if bad:
            raise InvalidPrivacyParameter(f"budget parts must be positive and finite, got {bad}")
        cap = self.total if self.kind == "pure" else self.total ** 2
        used = math.fsum(v for _, v in self.parts)
        if used > cap * (1 + 1e-9):
            raise InvalidPrivacyParameter(
                f"budget parts {dict(self.parts)} add up to {used:g}, more than the total "
                f"{'ε' if self.kind == 'pure' else 'μ²'} = {cap:g}")

    @classmethod
    def pure(cls, epsilon: float, parts: dict[str, float]) -> BudgetSplit:
        """Parts in ε."""
        return cls("pure", float(epsilon), tuple((str(k), float(v)) for k, v in parts.items()))

    @classmethod
    def gdp(cls, mu: float, shares: dict[str, float]) -> BudgetSplit:
        """Parts as shares of μ² (each part's μ² is share·μ²)."""
        return cls("gdp", float(mu), tuple((str(k), float(v) * float(mu) ** 2) for k, v in shares.items()))

    def has(self, name: str) -> bool:
        """Whether the split has a part called ``name``."""
        return any(n == name for n, _ in self.parts)

    def part(self, name: str) -> float:
        """Part ``name`` in the split's additive unit (ε, or μ²); raises
        :class:`~privtext.errors.InvalidPrivacyParameter` naming the parts when there is none."""
        for n, v in self.parts:
            if n == name:
                return v
        raise InvalidPrivacyParameter(f"no budget part {name!r}; parts: {[n for n, _ in self.parts]}")

    def epsilon(self, name: str) -> float:
        """A pure split's part (ε)."""
        if self.kind != "pure":
            raise InvalidPrivacyParameter("epsilon() of a μ-GDP split: use mu()")
        return self.part(name)

    def mu(self, name: str) -> float:
        """A GDP split's part as μ (√ of its μ²)."""
        if self.kind != "gdp":
            raise InvalidPrivacyParameter("mu() of a pure-ε split: use epsilon()")
        return math.sqrt(self.part(name))

    def noise_ratio(self, part: str, of: str, *, compositions: int = 1) -> float:
        """σ_part/σ_of for Gaussian releases taking their parts of a GDP split, ``of`` composed ``compositions``
        times: 1/σ_part² = μ²_part, compositions/σ_of² = μ²_of ⇒ σ_part/σ_of = √(μ²_of/(μ²_part·compositions))."""
        if self.kind != "gdp":
            raise InvalidPrivacyParameter("noise_ratio() needs a μ-GDP split")
        return math.sqrt(self.part(of) / (self.part(part) * int(compositions)))
