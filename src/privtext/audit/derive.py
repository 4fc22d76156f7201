"""A second derivation of every release's sensitivity, from the run's configuration and its neighbouring relation
alone — never from the method code that records it.

``privtext audit`` compares the sensitivity each ledger entry records with the one derived here and fails on any
difference (an audit that re-runs a mechanism with the sensitivity the method recorded passes whatever the
method got wrong). The derivations are written from the papers and first principles, in a few lines each; the
canaries of the empirical audits (:mod:`privtext.audit.mechanisms`) are built from them too.

Neighbouring relations (:class:`Relation`)
-----------------------------------------
* ``add_remove`` — one private record added or removed (Aug-PE, WASP, DP-KPS; DP's default);
* ``replace_one`` — one private record replaced by another (``dpkps.neighbouring: replace_one``);
* ``secret_group`` — the k records holding one declared secret added or removed together (Aug-PE's
  ``sensitivity: secret_group``, SecPE's GDP baseline); k is the group size the run's statement declares;
* ``user`` — one data party added or removed with all its records (``parties.level: user``): at most m records
  (``max_records``, a public cap) or a vote vector normalised to unit L2 (``normalise``).

Sensitivities, per release kind (Δ₂ for Gaussian releases, Δ₁ for Laplace ones; k the group size, m the cap)
------------------------------------------------------------------------------------------------------------
=====================  ==============================================  ======  =====  ======  ===============
release                 one record changes                              add/rm  repl.  group k  user (m / norm.)
=====================  ==============================================  ======  =====  ======  ===============
votes (Aug-PE, PrE-Text) one bin by 1 (one vote for its nearest           1      √2     k       m / 1
                         candidate; Aug-PE §3 / PE's histogram)
Top-Q pair (WASP Eq 4-5) Q distinct bins of Hⁿ by 1, ½, …, 2^−(Q−1) and   Δ_Q    √2Δ_Q  kΔ_Q    mΔ_Q / 1
                         Q of Hᶠ likewise: Δ_Q = √(2Σ_{q<Q} 4^−q)
labels, Gaussian         one label bin by 1                               1      √2     k       m
labels, Laplace          one label bin by 1                               1      2      k       m
DP vocabulary (DP-KPS    ≤ r bins by 1 (its first r distinct terms;       r      2r     kr      mr
  App A.1)               "the ℓ1-sensitivity of the histogram is S")
term histogram (DP-KPS)  mass c_w spread over its class row's bins        c_w    2c_w   kc_w    mc_w
RFF sketch (DP-KPS A.2)  its class row by φ ∈ [−√2, √2]^I with weights    √2c_wI 2√2c_wI k√2c_wI –
                         summing to c_w (c_w = 1: weighting mean;
                         ``noise: paper``, the class mean: 2√2·I)
SecPE clustering (Eq 7)  per sampled holder: a count by 1 and a centre    1 per composition (shared sample: √2)
                         by ≤ 2R/n_k (noise (2R/n_k)σ): Thm 1
DP-SGD step (dpft;       one clipped gradient, of L2 norm ≤ C, in or out  C      –      –       –
  Abadi et al. Alg 1)    of a step's sum (C = ``dpft.max_grad_norm``)
=====================  ==============================================  ======  =====  ======  ===============

User level with normalised votes (``normalise``): only the vote releases are normalised per party (Δ = 1); every
other release sums a party's raw records, so its Δ is m times the record's (and needs the cap m; without one the
derivation refuses it) — :mod:`privtext.privacy.relation` derives the same.

The Gaussian releases are Gaussian mechanisms with noise multiplier z = noise std / Δ₂ (claim: μ = 1/z-GDP per
release); the Laplace ones have scale b = Δ₁/ε (claim: pure ε-DP). :func:`check_release` turns a ledger entry,
the configuration and the relation into a :class:`Derivation`: the recorded Δ against the derived one, and the
privacy the recorded noise actually gives under the derived Δ against the privacy the entry claims.

DP-SGD's steps are Poisson-subsampled Gaussians, whose accounting (the sampled event) holds under add/remove one
record only: replace-one moves a step's sum by up to 2C with a different privacy-loss pair, and a group of k is
sampled with probability 1 − (1 − q)^k. The derivation refuses those relations for it; the claim checked is the
unsampled Gaussian's μ = 1/σ per step (the sampling rate and step count enter the accountant, not Δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError

RelationKind = Literal["add_remove", "replace_one", "secret_group", "user"]
SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class Relation:
    """The neighbouring relation a run's guarantee is stated for (module docstring)."""

    kind: RelationKind
    group: int = 1  # k, under secret_group
    cap: int | None = None  # m, under user with a record cap
    normalised: bool = False  # user, with unit-L2 vote vectors

    def __post_init__(self) -> None:
        if self.kind not in ("add_remove", "replace_one", "secret_group", "user"):
            raise ConfigError(f"unknown neighbouring relation {self.kind!r}")
        if self.kind == "secret_group" and (not isinstance(self.group, int) or self.group < 1):
            raise ConfigError(f"a secret-group relation needs a group size k ≥ 1, got {self.group!r}")
        if self.kind == "user" and not self.normalised and (self.cap is None or self.cap < 1):
            raise ConfigError("a user-level relation needs a public record cap m ≥ 1 or normalised votes")

    def words(self) -> str:
        return {"add_remove": "add/remove one record", "replace_one": "replace one record",
                "secret_group": f"add/remove a secret group of k = {self.group} records",
                "user": ("add/remove one party (unit-L2 votes)" if self.normalised else
                         f"add/remove one party of ≤ m = {self.cap} records")}[self.kind]

    @property
    def records(self) -> int:
        """How many records one neighbour adds or removes at most (replace-one: one out, one in)."""
        if self.kind == "secret_group":
            return self.group
        if self.kind == "user":
            return int(self.cap) if self.cap is not None else 1
        return 1


def _per_record(d_record: float, rel: Relation, norm: str, *, user_unit: float | None = 1.0) -> float:
    """A release whose per-record change has norm ``d_record``: replace one record is at most twice that in L1
    and √2 times in L2 (the two changes sit in different coordinates at worst, by the triangle inequality and the
    parallelogram bound); a group of k, or a party of m, is k (m) times (all may land on the same coordinates);
    a party's normalised vote vector moves the sum by ``user_unit`` (None: the release is not normalised per
    party, so it is m times, and needs the cap even when the votes are normalised — issue 36)."""
    if rel.kind == "add_remove":
        return d_record
    if rel.kind == "replace_one":
        return (2.0 if norm == "L1" else SQRT2) * d_record
    if rel.kind == "secret_group":
        return rel.group * d_record
    if rel.normalised and user_unit is not None:
        return user_unit
    if rel.cap is None:  # normalised votes only: a release the parties do not normalise sums raw records
        raise ConfigError("this release is not normalised per party, and the user-level relation has no record "
                          "cap m: its sensitivity is unbounded")
    return rel.cap * d_record


def topq_record_sensitivity(q: int) -> float:
    """Δ_Q = √(2·Σ_{j<Q} 4^−j): weights 1, ½, …, 2^−(Q−1) on Q distinct bins of each of the two histograms
    (WASP Eq 4-5; the paper's Thm D.2 bounds it by 4)."""
    if not isinstance(q, int) or q < 1:
        raise ConfigError(f"Top-Q needs an integer Q ≥ 1, got {q!r}")
    return math.sqrt(2.0 * sum(4.0 ** -j for j in range(q)))


@dataclass(frozen=True)
class Expected:
    """What a release kind's sensitivity is under a relation, and why."""

    kind: str  # votes, topq, labels_gaussian, labels_laplace, vocabulary, term_histogram, rff_sketch, clustering, dpsgd
    norm: str  # "L2" (Gaussian) or "L1" (Laplace)
    sensitivity: float
    why: str
    params: dict[str, Any] = field(default_factory=dict)


def release_kind(mechanism: str, key: str) -> str | None:
    """The kind of a ledger entry (its mechanism name and key), or None when the audit has no derivation for it."""
    if mechanism in ("dp_nn_vote_histogram", "federated_nn_vote_sum"):
        return "votes"
    if mechanism in ("topq_vote_histograms", "federated_topq_sum"):
        return "topq"
    if mechanism == "dp_label_histogram":
        return "labels_gaussian"
    if mechanism == "laplace_label_histogram":
        return "labels_laplace"
    if mechanism == "secret_clustering":
        return "clustering"
    # (runs made before the mechanisms had one name each recorded DP-KPS's three as "laplace")
    if mechanism in ("dp_vocabulary", "laplace") and key.endswith("vocabulary"):
        return "vocabulary"
    if mechanism in ("dp_term_histogram", "laplace") and key == "dpkps/histogram":
        return "term_histogram"
    if mechanism in ("dp_rff_sketch", "laplace") and key.startswith("dpkps/kde/"):
        return "rff_sketch"
    if mechanism == "dpsgd":
        return "dpsgd"
    return None


def _opts(config: Any, section: str) -> dict[str, Any]:
    sec = getattr(config, section, None)
    return dict(sec.options()) if sec is not None else {}


def relation_of(config: Any, statement: dict[str, Any] | None = None) -> Relation:
    """The neighbouring relation of a run, from its (resolved) configuration; the group size k of Aug-PE's
    secret-group sensitivity from the statement's declared assumption ``secret_group_size``."""
    method = config.method
    if method in ("augpe", "wasp"):
        o = _opts(config, method)
        pt = o.get("parties") or None
        if pt and pt.get("level") == "user":
            return Relation("user", cap=pt.get("max_records"), normalised=bool(pt.get("normalise")))
        if method == "augpe" and o.get("sensitivity") == "secret_group":
            k = _declared_group_size(statement)
            return Relation("secret_group", group=k)
        return Relation("add_remove")
    if method == "dpkps":
        nb = _opts(config, "dpkps").get("neighbouring", "add_remove")
        return Relation("replace_one" if nb == "replace_one" else "add_remove")
    if method == "secpe":
        return Relation("add_remove")  # SecPE's releases are audited per secret holder (see ``clustering``)
    if method == "dpft":
        return Relation("add_remove")  # DP-SGD's sampled-Gaussian accounting: add/remove one record only
    raise ConfigError(f"the audit has no neighbouring relation for method {method!r}")


def _declared_group_size(statement: dict[str, Any] | None) -> int:
    for a in (statement or {}).get("assumed_public") or []:
        if isinstance(a, dict) and a.get("name") == "secret_group_size":
            return int(a["value"])
    raise ConfigError("the run uses secret-group sensitivity but its statement (privacy.json) declares no "
                      "secret_group_size: the audit cannot derive the group size k")


def expected(kind: str, config: Any, relation: Relation, *, meta: dict[str, Any] | None = None) -> Expected:
    """The sensitivity a release of ``kind`` must have under ``relation``, from the configuration alone."""
    method = config.method
    if kind == "votes":
        return Expected(kind, "L2", _per_record(1.0, relation, "L2"),
                        "one record casts one vote into one bin (Aug-PE); " + relation.words())
    if kind == "topq":
        q = int(_opts(config, "wasp").get("q", 1))
        d = topq_record_sensitivity(q)
        return Expected(kind, "L2", _per_record(d, relation, "L2"),
                        f"Top-{q} pair: Δ_Q = √(2Σ4^−j) = {d:.6g} per record (WASP Eq 4-5); " + relation.words(),
                        {"q": q})
    if kind == "labels_gaussian":
        return Expected(kind, "L2", _per_record(1.0, relation, "L2", user_unit=None),
                        "one record counts once in one label bin; " + relation.words())
    if kind == "labels_laplace":
        return Expected(kind, "L1", _per_record(1.0, relation, "L1", user_unit=None),
                        "one record counts once in one label bin; " + relation.words())
    if kind == "vocabulary":
        r = int(_opts(config, method).get("vocabulary_r" if method == "augpe" else "r", 10))
        return Expected(kind, "L1", _per_record(float(r), relation, "L1", user_unit=None),
                        f"a document adds 1 to at most r = {r} distinct term bins (DP-KPS App A.1); "
                        + relation.words(), {"r": r})
    if kind == "term_histogram":
        o = _opts(config, "dpkps")
        c_w = 1 if o.get("weighting", "mean") == "mean" else int(o["max_points"])
        return Expected(kind, "L1", _per_record(float(c_w), relation, "L1", user_unit=None),
                        f"a document's mass c_w = {c_w} spread over its class row; " + relation.words(),
                        {"c_w": c_w})
    if kind == "rff_sketch":
        o = _opts(config, "dpkps")
        n_feat = int(o.get("n_features", 256))
        if o.get("noise", "sum") == "paper":
            return Expected(kind, "L1", 2 * SQRT2 * n_feat, f"class-mean sketch (noise: paper): 2√2·I, I = {n_feat}",
                            {"n_features": n_feat, "c_w": 1, "noise": "paper"})
        c_w = 1 if o.get("weighting", "mean") == "mean" else int(o["max_points"])
        return Expected(kind, "L1", _per_record(SQRT2 * c_w * n_feat, relation, "L1", user_unit=None),
                        f"φ ∈ [−√2, √2]^I with weights summing to c_w = {c_w}, I = {n_feat} (DP-KPS App A.2); "
                        + relation.words(), {"n_features": n_feat, "c_w": c_w, "noise": "sum"})
    if kind == "clustering":
        sample = (meta or {}).get("sample") or _opts(config, "secpe").get("sample", "independent")
        d = 1.0 if sample == "independent" else SQRT2
        return Expected(kind, "L2", d, f"one sampled holder moves a count by 1 and its normalised centre by ≤ 1 "
                        f"(SecPE Thm 1); {sample} sample" + (": (1, 1) jointly, √2" if d > 1 else ""),
                        {"sample": sample})
    if kind == "dpsgd":
        if relation.kind != "add_remove":
            raise ConfigError(f"DP-SGD's Poisson-subsampled Gaussian is accounted for under add/remove one record, "
                              f"not {relation.words()}")
        c = float(_opts(config, "dpft").get("max_grad_norm", 1.0))
        return Expected(kind, "L2", c, f"one record's gradient, clipped to L2 norm C = {c:g}, enters or leaves a "
                        "step's sum (DP-SGD, Abadi et al. 2016 Alg 1); " + relation.words(), {"max_grad_norm": c})
    raise ConfigError(f"no derivation for release kind {kind!r}")


@dataclass(frozen=True)
class Derivation:
    """A ledger entry checked against the derivation: ``recorded`` and ``derived`` sensitivities; ``implied`` the
    privacy per neighbour the recorded noise gives under the derived Δ (μ = Δ/std for Gaussian releases,
    ε = Δ₁/b for Laplace ones) and ``claim`` what the entry's event promises. Passes iff the two sensitivities
    agree and the implied privacy is within the claim."""

    key: str
    kind: str
    mechanism: str
    norm: str
    recorded: float
    derived: float
    implied: float
    claim: float
    why: str
    relation: str

    @property
    def passed(self) -> bool:
        same = abs(self.recorded - self.derived) <= 1e-9 * max(self.derived, 1e-12)
        return same and self.implied <= self.claim * (1 + 1e-9)

    @property
    def quantity(self) -> str:
        return "mu" if self.norm == "L2" else "epsilon"


def noise_of(release: Any) -> float:
    """The noise scale a ledger entry records: the Gaussian standard deviation, or the Laplace scale b (from
    ``meta.laplace_scale``, else noise std/√2)."""
    if release.meta.get("laplace_scale") is not None:
        return float(release.meta["laplace_scale"])
    if type(release.event).__name__ == "LaplaceDpEvent":
        return float(release.noise_std) / SQRT2
    return float(release.noise_std)


def claim_of(release: Any) -> float:
    """The privacy one release promises per neighbour: μ = 1/z for a Gaussian event (for SecPE's composed
    clustering event: per composition), ε = 1/noise_multiplier for a Laplace event (∞ without noise)."""
    ev = release.event
    while hasattr(ev, "event"):  # SelfComposedDpEvent
        ev = ev.event
    z = float(getattr(ev, "noise_multiplier", 0.0))
    return math.inf if z <= 0 else 1.0 / z


def check_release(release: Any, config: Any, relation: Relation) -> Derivation | None:
    """The derivation check of one ledger entry (None for a kind the audit does not know)."""
    kind = release_kind(release.mechanism, release.key)
    if kind is None:
        return None
    exp = expected(kind, config, relation, meta=release.meta)
    scale = noise_of(release)
    if kind == "clustering":
        # SecPE's event is GaussianDpEvent(σ/Δ) per composition; the ledger's sensitivity field is the per-bin 1,
        # so the recorded Δ is read off the event: σ / noise multiplier
        claim = claim_of(release)
        # no noise (SecPE with no declared secret found: nothing private enters): no Δ is recorded to compare
        recorded = float(release.noise_std) * claim if math.isfinite(claim) else exp.sensitivity
        implied = exp.sensitivity / scale if scale > 0 else math.inf
    else:
        recorded = float(release.sensitivity)
        implied = exp.sensitivity / scale if scale > 0 else math.inf
        claim = claim_of(release)
    return Derivation(key=release.key, kind=kind, mechanism=release.mechanism, norm=exp.norm, recorded=recorded,
                      derived=exp.sensitivity, implied=implied, claim=claim, why=exp.why, relation=relation.words())


__all__ = ["Derivation", "Expected", "Relation", "check_release", "claim_of", "expected", "noise_of",
           "relation_of", "release_kind", "topq_record_sensitivity"]
