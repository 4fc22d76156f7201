"""The DP vocabulary of DP-KPS (dpkps.txt App A.1): a Laplace histogram of each document's first r terms.

Mechanism
---------
1. For every private document D_j take T_j = its first r *distinct* terms of the public vocabulary V, in order
   of first occurrence (:meth:`privtext.data.vocabulary.TermMatcher.find`).
2. h(D) ∈ ℕ^{|V|}, h_v = #{j : v ∈ T_j}; release h̃ = h + Lap(b)^{|V|} with b = r/ε_vocab, i.i.d. on **every**
   bin of the public vocabulary (bins of count 0 too: the bin set must not depend on the data).
3. Ṽ = the V terms with the largest h̃ (ties by public order). Post-processing: no further cost.

Sensitivity (derived; App A.1 states "the ℓ1 sensitivity is S" without the relation)
------------------------------------------------------------------------------------
* **add/remove one document** (the paper's adjacency, §1.3): h(D ∪ {x}) − h(D) = 1_{T_x}, a 0/1 vector with
  |T_x| ≤ r ones (distinct terms), so ‖·‖₁ ≤ r: **Δ₁ = r**. Laplace(r/ε) on every bin is ε-DP (Dwork et al.
  2006, the Laplace mechanism): the density ratio is ∏_v exp(−|y_v − h_v|/b)/exp(−|y_v − h'_v|/b) ≤
  exp(‖h − h'‖₁/b) ≤ exp(r/b) = exp(ε).
* **replace one document**: 1_{T_x} − 1_{T_x'}, up to 2r non-zero entries: **Δ₁ = 2r** (b = 2r/ε for the same ε).
  Pass ``neighbouring="replace_one"``.

Counting a term once per document is what makes Δ₁ = r: counting repeated occurrences among the first r *token
matches* would give the same bound, but the first r distinct terms carry more information per unit of budget.

Event: dp_accounting's ``LaplaceDpEvent(noise_multiplier = b/Δ₁)`` = ``LaplaceDpEvent(1/ε)`` in both relations
(pure ε-DP with ε = Δ₁/b). ε = ∞ gives b = 0: no noise, a non-private release (``LaplaceDpEvent(0)``, which
privtext's accounting treats as non-private).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..data.vocabulary import PublicVocabulary
from ..errors import ConfigError, DataError, InvalidPrivacyParameter
from ..privacy.conversions import check_epsilon as _check_epsilon
from ..privacy.events import laplace_event
from ..privacy.noise import add_laplace
from ..privacy.relation import Contribution, NeighbouringRelation

Neighbouring = Literal["add_remove", "replace_one"]
NEIGHBOURING: tuple[str, ...] = ("add_remove", "replace_one")


def check_neighbouring(neighbouring: Any) -> Any:
    """A one-record relation's name (``add_remove``, ``replace_one``) or a
    :class:`~privtext.privacy.relation.NeighbouringRelation`; returned as given."""
    if isinstance(neighbouring, NeighbouringRelation):
        return neighbouring
    if neighbouring not in NEIGHBOURING:
        raise ConfigError(f"neighbouring must be one of {', '.join(NEIGHBOURING)}; got {neighbouring!r}")
    return neighbouring


def relation_name(neighbouring: Any) -> str:
    """The relation's kind (for the released objects' ``neighbouring`` field)."""
    return neighbouring.kind if isinstance(neighbouring, NeighbouringRelation) else str(neighbouring)


def check_epsilon(epsilon: Any, *, name: str = "epsilon") -> float:
    """ε > 0 (``math.inf`` allowed: no noise, a non-private release): :func:`privtext.privacy.conversions.check_epsilon`."""
    if np.ndim(epsilon) != 0:
        raise InvalidPrivacyParameter(f"{name} must be a positive number, got {epsilon!r}")
    return float(_check_epsilon(epsilon, name=name, positive=True))


def _check_positive_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def vocabulary_contribution(r: int) -> Contribution:
    """One document adds 1 to at most r distinct bins: a non-negative vector of L1 norm ≤ r."""
    return Contribution(float(_check_positive_int("r", r)), "l1", True, f"≤ {r} distinct terms, one count each")


def vocabulary_sensitivity(r: int, neighbouring: Neighbouring | NeighbouringRelation = "add_remove") -> float:
    """Δ₁ of the first-r-terms histogram under the relation (:mod:`privtext.privacy.relation`): r (add/remove one
    document), 2r (replace one), k·r (a secret's group of k documents)."""
    return NeighbouringRelation.of(check_neighbouring(neighbouring)).sensitivity(vocabulary_contribution(r))


def vocabulary_event(r: int, epsilon: float, *, neighbouring: Neighbouring = "add_remove") -> Any:
    """The event of :func:`dp_vocabulary`, built without data: ``LaplaceDpEvent(b/Δ₁) = LaplaceDpEvent(1/ε)``."""
    vocabulary_sensitivity(r, neighbouring)  # validates r and the relation
    return laplace_event(epsilon)


@dataclass(frozen=True)
class VocabularyRelease:
    """The DP vocabulary Ṽ: the kept terms (largest noisy counts first) and what it took.

    Everything here is released (safe to publish); exact counts are never stored."""

    terms: tuple[str, ...]
    indices: np.ndarray  # int64: positions of ``terms`` in the public vocabulary
    noisy_counts: np.ndarray  # float64: h̃ of the kept terms (same order)
    epsilon: float
    r: int
    scale: float  # Laplace scale b
    sensitivity: float  # Δ₁
    neighbouring: str
    public_size: int  # |V|

    def vocabulary(self, public: PublicVocabulary) -> PublicVocabulary:
        """Ṽ as a :class:`PublicVocabulary` (for matching and embedding)."""
        return public.subset(self.indices, source=f"dp-vocabulary(ε={self.epsilon:g}, r={self.r}) of {public.source}")


def term_histogram(doc_terms: Sequence[Sequence[int]], vocab_size: int, r: int,
                   priority: np.ndarray | None = None) -> np.ndarray:
    """Exact h: for each document its first ``r`` distinct term ids count once (ids beyond r are ignored); with
    ``priority`` (one public number per term) the r distinct terms of highest priority instead, ties by first
    occurrence."""
    h = np.zeros(int(vocab_size), dtype=np.int64)
    for j, ids in enumerate(doc_terms):
        first: list[int] = []
        seen: set[int] = set()
        for t in ids:
            t = int(t)
            if not 0 <= t < vocab_size:
                raise DataError(f"document {j}: term id {t} outside the vocabulary of {vocab_size} terms")
            if t not in seen:
                seen.add(t)
                first.append(t)
                if priority is None and len(first) == r:
                    break
        if priority is not None and len(first) > r:
            first = sorted(first, key=lambda t, p=priority: -p[t])[:r]  # stable: ties keep first occurrence
        h[first] += 1
    return h


def dp_vocabulary(
    texts: Sequence[str],
    vocabulary: PublicVocabulary,
    *,
    r: int,
    epsilon: float,
    size: int,
    rng: np.random.Generator,
    neighbouring: Neighbouring = "add_remove",
    select: Literal["first", "idf"] = "first",
) -> tuple[VocabularyRelease, Any]:
    """Release the DP vocabulary Ṽ of ``size`` terms (App A.1). Returns ``(release, event)``.

    ``select="first"`` counts each document's first r distinct terms (the paper); ``"idf"`` its r distinct terms
    of highest public inverse document frequency (:meth:`PublicVocabulary.idf`, ties by first occurrence), so the
    counts favour the specific terms a document holds over the generic ones every document opens with. Either
    way a document adds 1 to at most r distinct bins: Δ₁ = r (the choice is a per-document function of public
    values and the document itself), and the noise, event and ε are the same.

    Call it inside :meth:`privtext.privacy.release.ReleaseKeeper.release` (the event is recorded before this
    reads any private text; :func:`vocabulary_event` builds it without data). Noise: Laplace(b) on every one of the |V| bins, b = Δ₁/ε with Δ₁ from :func:`vocabulary_sensitivity`.
    """
    r = _check_positive_int("r", r)
    size = _check_positive_int("size", size)
    eps = check_epsilon(epsilon, name="epsilon_vocab")
    delta1 = vocabulary_sensitivity(r, neighbouring)
    if size > len(vocabulary):
        raise ConfigError(f"size={size} exceeds the public vocabulary's {len(vocabulary)} terms")
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if select not in ("first", "idf"):
        raise ConfigError(f"select must be 'first' or 'idf', got {select!r}")
    priority = vocabulary.idf() if select == "idf" else None  # public; raises for a glossary before any read
    event = vocabulary_event(r, eps, neighbouring=neighbouring)
    # ---- private data is read from here on
    matcher = vocabulary.matcher()
    h = term_histogram(matcher.find_all(texts, max_terms=None if priority is not None else r), len(vocabulary), r,
                       priority)
    scale = 0.0 if math.isinf(eps) else delta1 / eps
    noisy = add_laplace(h, scale, rng)
    del h
    order = np.argsort(-noisy, kind="stable")[:size]
    release = VocabularyRelease(
        terms=tuple(vocabulary.terms[i] for i in order),
        indices=order.astype(np.int64),
        noisy_counts=noisy[order],
        epsilon=eps,
        r=r,
        scale=scale,
        sensitivity=delta1,
        neighbouring=relation_name(neighbouring),
        public_size=len(vocabulary),
    )
    return release, event


__all__ = ["NEIGHBOURING", "VocabularyRelease", "check_epsilon", "check_neighbouring", "dp_vocabulary",
           "laplace_event", "relation_name", "term_histogram", "vocabulary_contribution", "vocabulary_event",
           "vocabulary_sensitivity"]
