"""Privacy events: dp_accounting's ``DpEvent`` classes, their JSON form, and a canonical flattening.

Every noisy release is described by one event, *before* it is drawn. We reuse dp_accounting's classes:

================================  ============================================================================
event                             meaning (noise in units of the sensitivity Δ)
================================  ============================================================================
``GaussianDpEvent(z)``            x + N(0, (zΔ)²): z = noise_std / Δ is the *noise multiplier*. Record-level
                                  releases (Aug-PE votes, label histograms) use Δ = the L2 change from adding or
                                  removing one record (or one secret's group of records).
``LaplaceDpEvent(b)``             x + Laplace(bΔ) with L1 sensitivity Δ (pure ε-DP with ε = 1/b; DP-KPS).
``MixtureOfGaussiansDpEvent``     SecPE (Alg 1 line 5): the released shift is S·Δ + N(0, σ²) with S a random
(σ, sensitivities, probs)         count (Poisson-binomial over the records holding one secret), compared with
                                  N(0, σ²). ``sensitivities = [0, 1, …, m]``, ``sampling_probs = Pr[S = k]``,
                                  ``standard_deviation = σ/Δ``.
``SelfComposedDpEvent(e, n)``     n independent repetitions of e.
``ComposedDpEvent([e₁, …])``      independent composition.
``PoissonSampledDpEvent(q, e)``   e applied to a Poisson sample of the records (each kept with probability q,
                                  the sample secret): one DP-SGD step is ``PoissonSampledDpEvent(q,
                                  GaussianDpEvent(σ))`` (Abadi et al. 2016), T steps its ``SelfComposedDpEvent``
                                  (:func:`dpsgd_event`). Not a Gaussian: :func:`flatten` keeps it as a leaf.
================================  ============================================================================

JSON (:func:`event_to_dict` / :func:`event_from_dict`): ``{"type": "GaussianDpEvent", "noise_multiplier": 1.2}``;
nested events nest. Only classes defined in ``dp_accounting.dp_event`` are accepted by name — nothing is
imported from a string and nothing is unpickled.

:func:`flatten` turns an event tree into ``[(leaf, count), …]`` and merges Gaussian leaves exactly: independent
Gaussian mechanisms with noise multipliers z₁, z₂, … compose to *one* Gaussian with
``z = (Σ 1/z_i²)^{-1/2}`` (their privacy-loss distributions are equal: μ-GDP composes as μ² sums; Dong, Roth &
Su 2019, Cor 3.3). Accounting therefore costs one Gaussian PLD however many Gaussian releases a run has, and a
ledger that records T separate releases gets exactly the number that calibration computed for
``SelfComposedDpEvent(GaussianDpEvent(z), T)``.

**Every event of privtext is built here.** Mechanisms, methods, calibration, the federated threat model and the
CLI call the factories below (:func:`gaussian_event`, :func:`laplace_event`, :func:`mixture_of_gaussians_event`,
:func:`no_op_event`, :func:`composed`, :func:`self_composed`, :func:`poisson_sampled`, :func:`dpsgd_event`,
:func:`scaled_noise`, :func:`secret_event`), never a ``*DpEvent(...)`` class, so one module says what each release
is and checks its parameters (tests/test_architecture.py enforces it). The one exception is the audit's
independent derivation (``privtext.audit.derive``, ``calibrate``, ``dpsgd``, ``run``): it rebuilds the events from
the configuration *on purpose without this module*, so that a mistake here cannot hide the same mistake there.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import attr
import dp_accounting
from dp_accounting import dp_event as _dpe

from ..errors import InvalidPrivacyParameter, PrivacyError

DpEvent: TypeAlias = _dpe.DpEvent
GaussianDpEvent = _dpe.GaussianDpEvent
LaplaceDpEvent = _dpe.LaplaceDpEvent
MixtureOfGaussiansDpEvent = _dpe.MixtureOfGaussiansDpEvent
SelfComposedDpEvent = _dpe.SelfComposedDpEvent
ComposedDpEvent = _dpe.ComposedDpEvent
NoOpDpEvent = _dpe.NoOpDpEvent
PoissonSampledDpEvent = _dpe.PoissonSampledDpEvent
NonPrivateDpEvent = _dpe.NonPrivateDpEvent


def _event_classes() -> dict[str, type]:
    out = {}
    for name in dir(_dpe):
        obj = getattr(_dpe, name)
        if isinstance(obj, type) and issubclass(obj, _dpe.DpEvent) and attr.has(obj):
            out[name] = obj
    return out


_CLASSES = _event_classes()


# ------------------------------------------------------------------------------------------------------- JSON


def event_to_dict(event: DpEvent) -> dict[str, Any]:
    """A JSON-ready dict: ``{"type": class name, <field>: value, ...}``; nested events become nested dicts."""
    if not isinstance(event, _dpe.DpEvent):
        raise PrivacyError(f"not a dp_accounting DpEvent: {event!r}")
    name = type(event).__name__
    if _CLASSES.get(name) is not type(event):
        raise PrivacyError(f"cannot serialise {type(event).__module__}.{name}: only dp_accounting.dp_event classes")
    out: dict[str, Any] = {"type": name}
    for f in attr.fields(type(event)):
        out[f.name] = _value_to_json(getattr(event, f.name))
    return out


def _value_to_json(v: Any) -> Any:
    if isinstance(v, _dpe.DpEvent):
        return event_to_dict(v)
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, Mapping):
        return {str(k): _value_to_json(x) for k, x in v.items()}
    if isinstance(v, Sequence) or hasattr(v, "tolist"):
        seq = v.tolist() if hasattr(v, "tolist") else v
        return [_value_to_json(x) for x in seq]
    raise PrivacyError(f"cannot serialise event field value {v!r}")


def event_from_dict(d: Mapping[str, Any]) -> DpEvent:
    """Inverse of :func:`event_to_dict`. Unknown types or fields are errors naming them."""
    if not isinstance(d, Mapping) or "type" not in d:
        raise PrivacyError(f"an event must be a mapping with a 'type' key, got {d!r}")
    name = d["type"]
    cls = _CLASSES.get(name)
    if cls is None:
        raise PrivacyError(f"unknown event type {name!r}; known: {', '.join(sorted(_CLASSES))}")
    fields = {f.name for f in attr.fields(cls)}
    extra = set(d) - fields - {"type"}
    if extra:
        raise PrivacyError(f"event {name}: unknown field(s) {sorted(extra)}")
    kwargs = {k: _value_from_json(v) for k, v in d.items() if k != "type"}
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise PrivacyError(f"event {name}: {e}") from None


def _value_from_json(v: Any) -> Any:
    if isinstance(v, Mapping) and "type" in v and v["type"] in _CLASSES:
        return event_from_dict(v)
    if isinstance(v, list):
        return [_value_from_json(x) for x in v]
    return v


def event_key(event: DpEvent) -> str:
    """A canonical string for an event (for caches: dp_accounting events holding lists are unhashable)."""
    return json.dumps(event_to_dict(event), sort_keys=True, separators=(",", ":"))


# -------------------------------------------------------------------------------------------------- flattening


@dataclass(frozen=True)
class Leaves:
    """An event tree flattened: ``gaussian_z`` is the single equivalent noise multiplier of all Gaussian leaves
    (``inf`` when there are none), ``others`` the remaining leaves with their counts (identical leaves merged),
    ``non_private`` whether some leaf releases data without noise."""

    gaussian_z: float
    others: tuple[tuple[DpEvent, int], ...]
    non_private: bool

    @property
    def only_gaussian(self) -> bool:
        return not self.others and not self.non_private

    @property
    def gaussian_mu(self) -> float:
        """μ-GDP of the Gaussian part: 1/z (0 when there is none)."""
        return 0.0 if math.isinf(self.gaussian_z) else 1.0 / self.gaussian_z

    @property
    def empty(self) -> bool:
        return math.isinf(self.gaussian_z) and not self.others and not self.non_private


def flatten(events: DpEvent | Sequence[DpEvent]) -> Leaves:
    """Flatten one event or a list of events (composed independently) into :class:`Leaves`.

    A mixture of Gaussians whose sensitivity is a single value s with probability 1 is a Gaussian with
    multiplier σ/s and is merged as such; one whose only mass is at sensitivity 0 releases nothing about the
    secret and is dropped. A Poisson-subsampled event stays a leaf (identical ones merge their counts), except
    that sampling probability 0 releases nothing and a subsampled release without noise is non-private.
    """
    gauss: dict[float, int] = {}  # noise multiplier -> count (identical releases merge exactly, in any order)
    others: dict[str, list[Any]] = {}
    non_private = False

    def visit(e: DpEvent, count: int) -> None:
        nonlocal non_private
        if count <= 0:
            return
        if isinstance(e, _dpe.NoOpDpEvent):
            return
        if isinstance(e, _dpe.NonPrivateDpEvent):
            non_private = True
            return
        if isinstance(e, _dpe.SelfComposedDpEvent):
            if not isinstance(e.count, numbers.Integral) or e.count < 0:
                raise InvalidPrivacyParameter(f"SelfComposedDpEvent count must be a non-negative integer, got {e.count!r}")
            visit(e.event, count * int(e.count))
            return
        if isinstance(e, _dpe.ComposedDpEvent):
            for sub in e.events:
                visit(sub, count)
            return
        if isinstance(e, _dpe.GaussianDpEvent):
            z = float(e.noise_multiplier)
            if not z >= 0:
                raise InvalidPrivacyParameter(f"GaussianDpEvent noise_multiplier must be ≥ 0, got {z!r}")
            if z == 0:
                non_private = True
            else:
                gauss[z] = gauss.get(z, 0) + count
            return
        if isinstance(e, _dpe.MixtureOfGaussiansDpEvent):
            sens, probs = _mog_support(e)
            if len(sens) == 0:
                return
            if e.standard_deviation == 0 and len(sens) == 1 and probs[0] >= 1 - 1e-15:
                non_private = True  # a deterministic shift without noise
                return
            # (a zero-noise mixture that may not sample the secret stays a leaf: the blow-up of "revealed when
            # sampled" is finite; ε-DP accounting treats it as non-private)
            if e.standard_deviation > 0 and len(sens) == 1 and probs[0] >= 1 - 1e-15:
                z = float(e.standard_deviation) / sens[0]
                gauss[z] = gauss.get(z, 0) + count
                return
        if isinstance(e, _dpe.LaplaceDpEvent) and e.noise_multiplier == 0:
            non_private = True
            return
        if isinstance(e, _dpe.PoissonSampledDpEvent):
            q = float(e.sampling_probability)
            if not 0 <= q <= 1:
                raise InvalidPrivacyParameter(f"PoissonSampledDpEvent sampling probability must be in [0, 1], got {q!r}")
            if q == 0 or isinstance(e.event, _dpe.NoOpDpEvent):
                return  # nothing is ever sampled
            inner = e.event
            if (isinstance(inner, (_dpe.GaussianDpEvent, _dpe.LaplaceDpEvent)) and inner.noise_multiplier == 0) or \
                    isinstance(inner, _dpe.NonPrivateDpEvent):
                non_private = True  # a sampled record is released without noise (DP-SGD at σ = 0)
                return
        k = event_key(e)
        if k in others:
            others[k][1] += count
        else:
            others[k] = [e, count]

    seq = [events] if isinstance(events, _dpe.DpEvent) else list(events)
    for ev in seq:
        if not isinstance(ev, _dpe.DpEvent):
            raise PrivacyError(f"not a dp_accounting DpEvent: {ev!r}")
        visit(ev, 1)
    inv_sq = math.fsum(c / (z * z) for z, c in sorted(gauss.items()))
    z = math.inf if inv_sq == 0 else 1.0 / math.sqrt(inv_sq)
    return Leaves(gaussian_z=z, others=tuple((e, c) for e, c in others.values()), non_private=non_private)


def _mog_support(e: Any) -> tuple[list[float], list[float]]:
    """The positive sensitivities of a mixture event with positive probability, and their probabilities."""
    sens = [float(s) for s in e.sensitivities]
    probs = [float(q) for q in e.sampling_probs]
    if len(sens) != len(probs):
        raise InvalidPrivacyParameter("MixtureOfGaussiansDpEvent: sensitivities and sampling_probs differ in length")
    if any(s < 0 for s in sens) or any(q < 0 for q in probs):
        raise InvalidPrivacyParameter("MixtureOfGaussiansDpEvent: negative sensitivity or probability")
    if abs(sum(probs) - 1) > 1e-9:
        raise InvalidPrivacyParameter(f"MixtureOfGaussiansDpEvent: probabilities sum to {sum(probs)!r}, not 1")
    keep = [(s, q) for s, q in zip(sens, probs, strict=True) if q > 0 and s > 0]
    return [s for s, _ in keep], [q for _, q in keep]


def laplace_event(epsilon: float) -> DpEvent:
    """``LaplaceDpEvent(1/ε)``: a Laplace mechanism with scale b = Δ₁/ε, pure ε-DP whatever Δ₁ (the event is
    the ratio b/Δ₁); ``LaplaceDpEvent(0)`` at ε = ∞ (no noise: a non-private release)."""
    from .conversions import check_epsilon

    e = float(check_epsilon(epsilon, positive=True))
    return dp_accounting.LaplaceDpEvent(noise_multiplier=0.0 if math.isinf(e) else 1.0 / e)


def gaussian_event(noise_multiplier: float, *, count: int = 1) -> DpEvent:
    """``GaussianDpEvent(z)`` (``SelfComposedDpEvent`` of it when ``count > 1``)."""
    ev = dp_accounting.GaussianDpEvent(float(noise_multiplier))
    return ev if count == 1 else self_composed(ev, count)


def mixture_of_gaussians_event(standard_deviation: float, sensitivities: Sequence[float],
                               sampling_probs: Sequence[float]) -> DpEvent:
    """``MixtureOfGaussiansDpEvent(σ/Δ, sensitivities, probs)``: a release shifted by ``sensitivities[k]``·Δ with
    probability ``sampling_probs[k]`` under N(0, σ²) (SecPE Alg 1 line 5; :func:`privtext.privacy.secretnoise.
    mixture_event` derives the probabilities). The lists are kept as given (checked when accounted)."""
    return MixtureOfGaussiansDpEvent(standard_deviation=standard_deviation, sensitivities=list(sensitivities),
                                     sampling_probs=list(sampling_probs))


def no_op_event() -> DpEvent:
    """``NoOpDpEvent()``: a release that reveals nothing about the protected unit (e.g. a secret no record holds)."""
    return dp_accounting.NoOpDpEvent()


def composed(events: Sequence[DpEvent]) -> DpEvent:
    """``ComposedDpEvent([e₁, …])``: the independent composition of ``events``, in the order given."""
    seq = list(events)
    for ev in seq:
        if not isinstance(ev, _dpe.DpEvent):
            raise PrivacyError(f"not a dp_accounting DpEvent: {ev!r}")
    return dp_accounting.ComposedDpEvent(seq)


def self_composed(event: DpEvent, count: int) -> DpEvent:
    """``SelfComposedDpEvent(e, n)``: n independent repetitions of ``event`` (n ≥ 0; kept even at n = 1, so the
    event says how it was planned)."""
    if not isinstance(event, _dpe.DpEvent):
        raise PrivacyError(f"not a dp_accounting DpEvent: {event!r}")
    if not (isinstance(count, numbers.Integral) and not isinstance(count, bool) and count >= 0):
        raise InvalidPrivacyParameter(f"a self-composition count must be a non-negative integer, got {count!r}")
    return dp_accounting.SelfComposedDpEvent(event, int(count))


def poisson_sampled(sampling_probability: float, event: DpEvent) -> DpEvent:
    """``PoissonSampledDpEvent(q, e)``: ``event`` applied to a Poisson sample of the records (each kept with
    probability q, the sample secret)."""
    q = float(sampling_probability)
    if not 0 <= q <= 1:
        raise InvalidPrivacyParameter(f"a Poisson sampling probability must be in [0, 1], got {sampling_probability!r}")
    if not isinstance(event, _dpe.DpEvent):
        raise PrivacyError(f"not a dp_accounting DpEvent: {event!r}")
    return dp_accounting.PoissonSampledDpEvent(q, event)


def dpsgd_event(noise_multiplier: float, sampling_rate: float, steps: int) -> DpEvent:
    """T steps of DP-SGD: ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), T)`` — each step
    sums the clipped gradients of a Poisson sample (rate q) of the records and adds N(0, (σΔ)²) per coordinate
    (Abadi et al. 2016, Alg 1; Δ = the clipping norm under add/remove one record)."""
    q = float(sampling_rate)
    if not 0 < q <= 1:
        raise InvalidPrivacyParameter(f"DP-SGD sampling rate must be in (0, 1], got {sampling_rate!r}")
    if not (isinstance(steps, numbers.Integral) and steps >= 1):
        raise InvalidPrivacyParameter(f"DP-SGD steps must be a positive integer, got {steps!r}")
    step = poisson_sampled(q, dp_accounting.GaussianDpEvent(float(noise_multiplier)))
    return self_composed(step, int(steps))


def scaled_noise(event: DpEvent, factor: float) -> DpEvent:
    """``event`` with every Gaussian noise multiplier z replaced by z·``factor`` (the same tree: compositions and
    self-compositions kept). Only Gaussian events and their compositions scale: a Laplace, mixture or subsampled
    event is refused (its privacy is not a function of one multiplier). Used by the federated threat model: a
    coalition that subtracts its parties' noise shares leaves each party sum with z·√((t − k)/(t − c))."""
    if isinstance(event, _dpe.GaussianDpEvent):
        return dp_accounting.GaussianDpEvent(event.noise_multiplier * factor)
    if isinstance(event, _dpe.SelfComposedDpEvent):
        return dp_accounting.SelfComposedDpEvent(scaled_noise(event.event, factor), event.count)
    if isinstance(event, _dpe.ComposedDpEvent):
        return dp_accounting.ComposedDpEvent([scaled_noise(e, factor) for e in event.events])
    raise InvalidPrivacyParameter(f"cannot scale the noise of a {type(event).__name__}: only Gaussian events and "
                                  "compositions of them have one noise multiplier")


@dataclass(frozen=True)
class SecretEvent:
    """The event of one release for one *secret group* (secrets sharing a ρ-multiset and a (p, r) pair).

    ``event`` is the per-secret dominating event (a ``MixtureOfGaussiansDpEvent`` for SecPE); ``p``/``r`` the
    group's budget; ``secrets`` optionally the column indices of the group's secrets (reporting; checked
    against a per-secret budget when given); ``approximate`` marks the paper's single-Gaussian stand-in, which
    the ledger accounts for as given but flags in its statement; ``planned`` is how many releases of this event
    the noise was calibrated for — the ledger first checks that many (monotone: if they pass, every prefix
    passes) so that one check serves the whole run."""

    event: DpEvent
    p: float
    r: float
    secrets: tuple[int, ...] = ()
    approximate: bool = False  # True for the paper's single-Gaussian stand-in (not a proven bound)
    planned: int | None = None  # releases of this event the noise was calibrated for (a hint for the ledger)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event": event_to_dict(self.event), "p": float(self.p), "r": float(self.r),
                             "secrets": [int(s) for s in self.secrets]}
        if self.approximate:
            d["approximate"] = True
        if self.planned is not None:
            d["planned"] = int(self.planned)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SecretEvent:
        return cls(event=event_from_dict(d["event"]), p=float(d["p"]), r=float(d["r"]),
                   secrets=tuple(int(s) for s in d.get("secrets", ())), approximate=bool(d.get("approximate", False)),
                   planned=None if d.get("planned") is None else int(d["planned"]))


def secret_event(event: DpEvent, *, p: float, r: float, secrets: Sequence[int] = (), approximate: bool = False,
                 planned: int | None = None) -> SecretEvent:
    """A :class:`SecretEvent`: ``event`` is the per-secret dominating event of one release for a group of secrets
    with budget (``p``, ``r``) (see the class for the other fields)."""
    if not isinstance(event, _dpe.DpEvent):
        raise PrivacyError(f"not a dp_accounting DpEvent: {event!r}")
    return SecretEvent(event=event, p=p, r=r, secrets=tuple(secrets), approximate=approximate, planned=planned)
