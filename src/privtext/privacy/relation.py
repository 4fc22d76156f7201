"""The neighbouring relation of a run: one object from which the sensitivity of every release is derived.

A mechanism states what ONE private record can add to its output — a :class:`Contribution`: a bound on the norm
(L1 or L2) of the record's contribution vector, and whether that vector is non-negative (counts, votes) — and the
run's :class:`NeighbouringRelation` turns it into the release's sensitivity Δ. No method multiplies by k or by 2
on its own; ``tests/test_privacy_relation.py`` checks every rule against brute force on small instances, and the
method contract suite (``tests/test_method_contract.py``) checks that every ledger entry's Δ is the relation's.

Let v(x) be record x's contribution (the output is a sum of contributions, plus noise) with ‖v(x)‖ ≤ c.

* **add/remove one record** (Aug-PE, WASP, DP-KPS by default): the outputs differ by v(x): Δ = c.
* **replace one record**: they differ by v(x) − v(x'). In L1, ‖v(x) − v(x')‖₁ ≤ 2c (triangle inequality; attained
  by two records with disjoint supports). In L2 with non-negative contributions, ‖a − b‖₂² = ‖a‖² + ‖b‖² − 2a·b ≤
  2c² since a·b ≥ 0: Δ = √2·c (attained by disjoint supports: one vote moved from one bin to another). In L2 with
  signed contributions (random Fourier features), Δ = 2c (b = −a).
* **secret group of k** (Aug-PE's ``sensitivity: secret_group``, SecPE's second GDP baseline): removing one
  declared secret removes the ≤ k records that hold it: ‖Σᵢ v(xᵢ)‖ ≤ k·c (attained when all k vote for one bin).
* **one user with a public cap m** (federated, ``parties.level: user``): a user's ≤ m records: Δ = m·c
  (‖Σᵢ v(xᵢ)‖ ≤ Σᵢ ‖v(xᵢ)‖ ≤ m·c by the triangle inequality, attained when all m contributions are equal).
* **one user, normalised** (``parties.normalise``): each party scales the vector it sends — its *vote* vector u_l,
  the sum of its records' votes — to unit L2 norm, u_l/‖u_l‖₂. Removing the party removes that vector: Δ =
  ‖u_l/‖u_l‖₂‖₂ = 1 whatever c and however many records the party has. This holds **only for a release whose
  per-party vector is normalised** — a contribution built by :func:`party_normalised` (``normalised_per_party``).
  Any other release of the same run (a label histogram, an L1 vocabulary, a sketch) sums the party's raw records,
  so its Δ is the capped user's m·c (the cap m from ``parties.max_records``); without a cap it is unbounded and
  :meth:`NeighbouringRelation.sensitivity` refuses it (:class:`ConfigError`) instead of returning 1. A
  normalised contribution is refused under every other relation (its bound of 1 is a party's, not a record's).
* **secret holders** (SecPE, Def 3.1): the neighbouring data sets differ in the records holding one secret, each
  included by an independent Bernoulli(ρ) sample; each sampled record contributes ≤ c, and the random number of
  contributing records is carried by the release's per-secret mixture events
  (:mod:`privtext.privacy.secretnoise`), so the per-record Δ is c.

The group size k of ``secret_group`` is computed from the private data without noise (the most records any one
detected secret occurs in): the statement lists it as an assumption, and the relation is fixed before the first
release of the run (every release, the DP vocabulary included, then uses the same k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError, InvalidPrivacyParameter

Norm = Literal["l1", "l2"]
RelationKind = Literal["add_remove", "replace_one", "secret_group", "user", "secret_holders"]
KINDS: tuple[str, ...] = ("add_remove", "replace_one", "secret_group", "user", "secret_holders")


@dataclass(frozen=True)
class Contribution:
    """What one private record can add to a release: ``bound`` on the ``norm`` of its contribution vector, and
    whether the vector's entries are all ≥ 0 (counts and votes are; random-feature sketches are not)."""

    bound: float
    norm: Norm
    nonnegative: bool = True
    what: str = ""
    #: a paper's own bound that already holds for these relations (used as it is; other relations refused)
    fixed_for: tuple[str, ...] = ()
    #: each party sends the sum of its records' contributions scaled to unit L2 norm (:func:`party_normalised`)
    normalised_per_party: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.bound, (int, float)) and self.bound > 0 and math.isfinite(self.bound)):
            raise InvalidPrivacyParameter(f"a record's contribution bound must be positive and finite, got "
                                          f"{self.bound!r}")
        if self.norm not in ("l1", "l2"):
            raise InvalidPrivacyParameter(f"norm must be 'l1' or 'l2', got {self.norm!r}")


def party_normalised(c: Contribution) -> Contribution:
    """The contribution of one party that sends the sum of its records' ``c`` scaled to unit L2 norm (the user-level
    ``normalise`` option of the federated votes): a vector of L2 norm ≤ 1, whatever ``c`` (module docstring)."""
    return Contribution(1.0, "l2", c.nonnegative, f"one party's {c.what or 'vector'}, summed and scaled to unit L2",
                        normalised_per_party=True)


#: one vote (or one count) for one bin: Aug-PE's nearest-neighbour votes, the Gaussian label histogram
ONE_VOTE_L2 = Contribution(1.0, "l2", True, "one vote for one bin")
#: one count in one bin, L1: the Laplace label histogram
ONE_COUNT_L1 = Contribution(1.0, "l1", True, "one count in one bin")


@dataclass(frozen=True)
class NeighbouringRelation:
    """Which data sets are neighbours (module docstring). ``group_size``: k of ``secret_group``, the cap m of
    ``user``; ``normalised``: ``user`` with unit-norm user vectors."""

    kind: RelationKind = "add_remove"
    group_size: int = 1
    normalised: bool = False
    #: ``user`` only: whether ``group_size`` is a public record cap m (False: normalised votes without a cap)
    capped: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"neighbouring relation must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 1:
            raise ConfigError(f"group size must be a positive integer, got {self.group_size!r}")
        if self.normalised and self.kind != "user":
            raise ConfigError("normalised contributions are a user-level relation")
        if self.group_size != 1 and self.kind not in ("secret_group", "user"):
            raise ConfigError(f"relation {self.kind!r} has no group size (got {self.group_size})")
        if not self.capped and not (self.kind == "user" and self.normalised and self.group_size == 1):
            raise ConfigError("only a normalised user-level relation may have no record cap")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def add_remove(cls) -> NeighbouringRelation:
        return cls("add_remove")

    @classmethod
    def replace_one(cls) -> NeighbouringRelation:
        return cls("replace_one")

    @classmethod
    def secret_group(cls, k: int) -> NeighbouringRelation:
        return cls("secret_group", group_size=max(int(k), 1))

    @classmethod
    def user(cls, cap: int | None = None, *, normalised: bool = False) -> NeighbouringRelation:
        if not normalised and cap is None:
            raise ConfigError("a user-level relation needs a public cap on each user's records, or normalised "
                              "user vectors")
        if cap is None:
            return cls("user", group_size=1, normalised=True, capped=False)
        return cls("user", group_size=int(cap), normalised=normalised)

    @classmethod
    def secret_holders(cls) -> NeighbouringRelation:
        return cls("secret_holders")

    @classmethod
    def of(cls, value: NeighbouringRelation | str) -> NeighbouringRelation:
        """A relation, or the name of a one-record relation (``"add_remove"``, ``"replace_one"``)."""
        if isinstance(value, NeighbouringRelation):
            return value
        if value in ("add_remove", "replace_one"):
            return cls(value)  # type: ignore[arg-type]
        raise ConfigError(f"neighbouring must be add_remove or replace_one (or a NeighbouringRelation), got "
                          f"{value!r}")

    # ------------------------------------------------------------------ the one rule
    def sensitivity(self, c: Contribution) -> float:
        """Δ of a release whose records each contribute ``c`` (module docstring)."""
        if c.normalised_per_party:
            if not (self.kind == "user" and self.normalised):
                raise ConfigError(f"{c.what}: a party-normalised vector's bound of 1 holds at user level with "
                                  f"normalised votes only, not for {self.words()}")
            return float(c.bound)
        if c.fixed_for:
            if self.kind not in c.fixed_for:
                raise ConfigError(f"{c.what or 'this bound'} holds for {', '.join(c.fixed_for)} only, not for "
                                  f"{self.kind}")
            return float(c.bound)
        if self.kind in ("add_remove", "secret_holders"):
            return float(c.bound)
        if self.kind == "replace_one":
            factor = math.sqrt(2.0) if (c.norm == "l2" and c.nonnegative) else 2.0
            return float(factor * c.bound)
        if self.kind == "user" and not self.capped:
            raise ConfigError(f"{c.what or 'this release'}: its per-party vector is not normalised, so one party's "
                              "records move it by up to m times a record's bound, and this user-level relation has "
                              "no record cap m: set parties.max_records (a public cap) as well")
        return float(self.group_size * c.bound)

    # ------------------------------------------------------------------ words
    def words(self) -> str:
        """The relation in words, for the statement."""
        if self.kind == "add_remove":
            return "adding or removing one private record"
        if self.kind == "replace_one":
            return "replacing one private record"
        if self.kind == "secret_group":
            return ("adding or removing all the records that hold one declared secret (groups of up to "
                    f"{self.group_size} records)")
        if self.kind == "user":
            return ("adding or removing one data party with all its records"
                    + (" (votes normalised to unit L2 per party)" if self.normalised else
                       f" (each party capped at {self.group_size} records)"))
        return ("the same data with and without the records that hold one declared secret (SecPE Def 3.1), the "
                "secret-holding structure being public")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind}
        if self.kind == "secret_group" or (self.kind == "user" and self.capped):
            d["group_size"] = self.group_size
        if self.normalised:
            d["normalised"] = True
        return d


__all__ = ["KINDS", "ONE_COUNT_L1", "ONE_VOTE_L2", "Contribution", "NeighbouringRelation", "party_normalised"]
