"""The release primitive: a noisy release is *described* (:class:`Release`: key, mechanism, every event it spends),
*recorded* in the ledger before any private data is read, then *computed* by its mechanism, which reports the
event it spent, and *kept* so that it is never drawn twice (:class:`ReleaseKeeper`). Every noisy value in
privtext comes into existence through :meth:`ReleaseKeeper.release`.

Events come from one factory per mechanism kind (:func:`privtext.privacy.events.gaussian_event`,
:func:`privtext.privacy.events.laplace_event`), used by calibration and by the mechanisms alike; a release is
described by one of two builders, :func:`gaussian_release` and :func:`laplace_release`, which take the sensitivity
from the run's neighbouring relation (:mod:`privtext.privacy.relation`) and a mechanism's per-record
:class:`~privtext.privacy.relation.Contribution` — never from the method.

Two keepers implement one protocol (:class:`Keeper`): :class:`ReleaseKeeper` for a run (ledger, budget, values
kept for resume) and :class:`DirectReleases` for library use without a run directory.
"""

from __future__ import annotations

import math
import numbers
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..atomicio import atomic_path
from ..errors import PrivacyError, ResumeError
from .events import (
    DpEvent,
    SecretEvent,
    dpsgd_event,
    event_from_dict,
    event_key,
    event_to_dict,
    gaussian_event,
    laplace_event,
)
from .noise import releasing
from .relation import Contribution, NeighbouringRelation

#: what a keeper does with a release recorded but never saved (:attr:`Release.redraw`)
REDRAW_POLICIES = ("same_event", "new_event", "refuse")


@dataclass(frozen=True)
class Release:
    """One noisy release, described before it is drawn.

    ``event`` is the record-level event (for a Gaussian: ``GaussianDpEvent(noise_std / sensitivity)``);
    ``secret_events`` the per-secret-group events of secret-protection accounting (SecPE), or None.

    ``redraw`` — what :class:`ReleaseKeeper` does when the ledger holds this release but its value never reached
    disk (the process died in between): ``"same_event"`` draws it under its single entry (the first draw was
    never seen outside the process), ``"new_event"`` records a second event ``KEY#redraw-N`` first (budget
    permitting), ``"refuse"`` raises :class:`~privtext.errors.ResumeError`. ``None`` (default): ``"new_event"`` for
    a sum over several parties by a secure aggregation (``meta["parties"]``, ``meta["aggregation"]`` not
    ``"plain"``: the aggregating server saw the first draw), else ``"same_event"`` (the plain in-process sum was
    seen by no one outside the process).
    """

    key: str
    mechanism: str
    event: DpEvent
    noise_std: float
    sensitivity: float
    iteration: int | None = None
    description: str = ""
    secret_events: Mapping[str, SecretEvent] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    redraw: str | None = None

    @property
    def redraw_policy(self) -> str:
        """The effective ``redraw`` (see the class docstring)."""
        if self.redraw is not None:
            return self.redraw
        meta = self.meta or {}
        seen = bool(meta.get("parties")) and meta.get("aggregation", "secagg") != "plain"
        return "new_event" if seen else "same_event"

    def validate(self) -> None:
        if not isinstance(self.key, str) or not self.key or "\n" in self.key:
            raise PrivacyError(f"a release key must be a non-empty one-line string, got {self.key!r}")
        if not isinstance(self.event, DpEvent):
            raise PrivacyError(f"release {self.key!r}: event must be a dp_accounting DpEvent, got {self.event!r}")
        if not (isinstance(self.noise_std, numbers.Real) and self.noise_std >= 0 and math.isfinite(self.noise_std)):
            raise PrivacyError(f"release {self.key!r}: noise_std must be a finite number ≥ 0, got {self.noise_std!r}")
        if not (isinstance(self.sensitivity, numbers.Real) and self.sensitivity > 0):
            raise PrivacyError(f"release {self.key!r}: sensitivity must be positive, got {self.sensitivity!r}")
        if self.redraw not in (None, *REDRAW_POLICIES):
            raise PrivacyError(f"release {self.key!r}: redraw must be one of {', '.join(REDRAW_POLICIES)}, got "
                               f"{self.redraw!r}")
        if self.secret_events is not None:
            for gid, se in self.secret_events.items():
                if not isinstance(gid, str) or not isinstance(se, SecretEvent):
                    raise PrivacyError(f"release {self.key!r}: secret_events must map group ids to SecretEvent")

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "mechanism": self.mechanism, "event": event_to_dict(self.event),
            "noise_std": float(self.noise_std), "sensitivity": float(self.sensitivity), "iteration": self.iteration,
            "description": self.description,
            "secret_events": None if self.secret_events is None else
            {g: se.to_dict() for g, se in self.secret_events.items()},
            "meta": dict(self.meta),
            **({"redraw": self.redraw} if self.redraw is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Release:
        se = d.get("secret_events")
        return cls(
            key=d["key"], mechanism=d.get("mechanism", ""), event=event_from_dict(d["event"]),
            noise_std=float(d.get("noise_std", 0.0)), sensitivity=float(d.get("sensitivity", 1.0)),
            iteration=d.get("iteration"), description=d.get("description", ""),
            secret_events=None if se is None else {g: SecretEvent.from_dict(v) for g, v in se.items()},
            meta=dict(d.get("meta") or {}), redraw=d.get("redraw"),
        )


def gaussian_release(key: str, *, mechanism: str, noise_multiplier: float, contribution: Contribution,
                     relation: NeighbouringRelation, iteration: int | None = None, description: str = "",
                     meta: Mapping[str, Any] | None = None, secret_events: Mapping[str, SecretEvent] | None = None
                     ) -> Release:
    """A Gaussian release with noise multiplier σ: Δ = ``relation.sensitivity(contribution)`` (L2), noise std σ·Δ,
    event ``GaussianDpEvent(σ)`` (the Gaussian mechanism's privacy depends on std/Δ only)."""
    if contribution.norm != "l2":
        raise PrivacyError(f"release {key!r}: a Gaussian release needs an L2 contribution bound, got "
                           f"{contribution.norm}")
    delta = relation.sensitivity(contribution)
    sigma = float(noise_multiplier)
    return Release(key=key, mechanism=mechanism, event=gaussian_event(sigma), noise_std=sigma * delta,
                   sensitivity=delta, iteration=iteration,
                   description=f"{description} (L2 sensitivity Δ={delta:.6g} under {relation.kind})".strip(),
                   secret_events=secret_events, meta={**dict(meta or {}), "relation": relation.to_dict()})


def dpsgd_release(key: str, *, noise_multiplier: float, sampling_rate: float, steps: int,
                  contribution: Contribution, relation: NeighbouringRelation, mechanism: str = "dpsgd",
                  iteration: int | None = None, description: str = "", meta: Mapping[str, Any] | None = None
                  ) -> Release:
    """``steps`` DP-SGD steps as one release (Abadi et al. 2016, Alg 1): each step sums the per-record gradients
    of a Poisson sample (rate q) clipped to L2 norm C, and adds N(0, (σΔ)²) to every coordinate of the sum.

    Δ = ``relation.sensitivity(contribution)`` with ``contribution = Contribution(C, "l2", ...)``: adding or
    removing one record adds or removes one clipped gradient, of norm ≤ C, from the sum of a step (Δ = C); the
    noise std is σ·Δ. Event: ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), steps)``
    (:func:`~privtext.privacy.events.dpsgd_event`), accounted for with dp_accounting's PLD of the Poisson-
    subsampled Gaussian under add/remove one record. That analysis holds for that relation only: a group of k
    records is sampled with probability 1 − (1 − q)^k, not q, and a replaced record changes a step by up to 2C
    with a different privacy-loss pair, so every other relation is refused here."""
    if contribution.norm != "l2":
        raise PrivacyError(f"release {key!r}: DP-SGD needs an L2 contribution bound (the clipping norm), got "
                           f"{contribution.norm}")
    if relation.kind != "add_remove":
        raise PrivacyError(f"release {key!r}: the Poisson-subsampled Gaussian is accounted for under add/remove "
                           f"one record; DP-SGD under the relation {relation.kind!r} is not supported")
    delta = relation.sensitivity(contribution)
    sigma = float(noise_multiplier)
    event = dpsgd_event(sigma, sampling_rate, steps)
    return Release(key=key, mechanism=mechanism, event=event, noise_std=sigma * delta, sensitivity=delta,
                   iteration=iteration,
                   description=f"{description} (L2 sensitivity Δ={delta:.6g} under {relation.kind})".strip(),
                   meta={**dict(meta or {}), "sampling_rate": float(sampling_rate), "steps": int(steps),
                         "relation": relation.to_dict()})


def laplace_release(key: str, *, mechanism: str, epsilon: float, contribution: Contribution,
                    relation: NeighbouringRelation, iteration: int | None = None, description: str = "",
                    meta: Mapping[str, Any] | None = None) -> Release:
    """A Laplace release at pure ε: Δ₁ = ``relation.sensitivity(contribution)`` (L1), scale b = Δ₁/ε (0 at
    ε = ∞), noise std √2·b, event ``LaplaceDpEvent(1/ε)``."""
    if contribution.norm != "l1":
        raise PrivacyError(f"release {key!r}: a Laplace release needs an L1 contribution bound, got "
                           f"{contribution.norm}")
    delta = relation.sensitivity(contribution)
    eps = float(epsilon)
    scale = 0.0 if math.isinf(eps) else delta / eps
    return Release(key=key, mechanism=mechanism, event=laplace_event(eps), noise_std=math.sqrt(2.0) * scale,
                   sensitivity=delta, iteration=iteration,
                   description=f"{description} (L1 sensitivity Δ₁={delta:.6g} under {relation.kind})".strip(),
                   meta={**dict(meta or {}), "epsilon": eps, "laplace_scale": scale, "norm": "L1",
                         "relation": relation.to_dict()})


class Keeper(Protocol):
    """What a method's releases go through: ``release(release, compute)`` records ``release`` before
    ``compute()`` reads private data and returns the kept arrays."""

    def release(self, release: Release, compute: Callable[[], tuple[dict[str, np.ndarray], Any]]
                ) -> dict[str, np.ndarray]: ...


class DirectReleases:
    """The keeper for library use without a run directory: each release is described (appended to
    :attr:`recorded`) before its mechanism reads private data, then computed, and the mechanism's event is checked
    against the described one (:func:`check_spent`). A run uses :class:`ReleaseKeeper` (ledger, budget, values
    kept for resume)."""

    def __init__(self) -> None:
        self.recorded: list[Release] = []

    def release(self, release: Release, compute: Callable[[], tuple[dict[str, np.ndarray], Any]]
                ) -> dict[str, np.ndarray]:
        release.validate()
        self.recorded.append(release)
        with releasing(release.key):
            values, spent = compute()
        check_spent(release, spent)
        return values


class ReleaseKeeper:
    """Runs each noisy release exactly once per run, and records it before its value exists.

    ``release(release, compute)`` — ``release`` describes the value (key, mechanism, every event it spends),
    ``compute()`` reads private data, draws the noise and returns ``(arrays, event)``: the arrays to keep and the
    event the mechanism itself says it spent. The value is kept at ``path_for(release)`` (the run directory
    decides where; :meth:`privtext.rundir.RunDir.release_path`).

    1. if the value was saved before (its path exists), it is loaded and returned — no noise is drawn and
       nothing is written to the ledger (the ledger must already hold ``key``, else the run is inconsistent);
    2. otherwise the event is appended to the ledger (fsync'd; an over-budget release is refused here, before
       any private data is read) unless the ledger already holds ``key`` — that happens only when a previous
       process died after recording the event and before the value reached disk. Then :attr:`Release.
       redraw_policy` decides: ``same_event`` — such a value was never saved, used or shown outside the process,
       and the step is redrawn under its single ledger entry; ``new_event`` — the first draw may have been seen
       (a SecAgg+ server saw the parties' sum), so a second event ``KEY#redraw-N`` is recorded first (refused
       like any release over the budget); ``refuse`` — :class:`~privtext.errors.ResumeError`;
    3. ``compute()`` reads private data and draws the noise. The event it returns must equal the recorded
       release's event (canonical JSON), or the value is refused (:class:`PrivacyError`) before it is saved or
       used — the ledger cannot drift from what the code drew. Its arrays are saved atomically, then returned.
    """

    def __init__(self, ledger: Any, path_for: Callable[[Release], Path], log: Callable[[str], None] | None = None):
        self.ledger = ledger
        self.path_for = path_for
        self.log = log or (lambda m: None)

    def release(
        self,
        release: Release,
        compute: Callable[[], tuple[dict[str, np.ndarray], Any]],
    ) -> dict[str, np.ndarray]:
        key = release.key
        path = self.path_for(release)
        if path.exists():
            if not self.ledger.has(key):
                raise ResumeError(f"released value {path} exists but the ledger has no event {key!r}")
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        if self.ledger.has(key):
            recorded = self.ledger.get(key).release
            if event_key(recorded.event) != event_key(release.event):
                raise PrivacyError(f"release {key!r}: the ledger recorded another event than this run describes")
            policy = release.redraw_policy
            if policy == "refuse":
                raise ResumeError(
                    f"release {key!r} was recorded but its value never reached disk, and it may have been seen "
                    "before the process died (redraw: refuse): it is not drawn again; start a new run")
            if policy == "new_event":
                n = 1
                while self.ledger.has(f"{key}#redraw-{n}"):
                    n += 1
                self.ledger.record(replace(release, key=f"{key}#redraw-{n}",
                                           meta={**release.meta, "redraw_of": key},
                                           description=f"redraw {n} of {key} (its first draw may have been seen): "
                                                       f"{release.description}"))
                self.log(f"release {key}: recorded but never saved, and its first draw may have been seen; "
                         f"drawing it again under a second event {key}#redraw-{n}")
            else:
                self.log(f"release {key}: event already in the ledger; its value never reached disk, drawing it now")
        else:
            self.ledger.record(release)
        _fault(f"after_record:{key}")
        with releasing(key):
            values, spent = compute()
        check_spent(self.ledger.get(key).release, spent)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, **values)
        _fault(f"after_save:{key}")
        return values


def check_spent(release: Any, event: Any) -> None:
    """Refuse a value whose mechanism reports a different event than the one recorded for it."""
    if event_key(event) != event_key(release.event):
        raise PrivacyError(
            f"release {release.key!r}: the mechanism spent {event_key(event)} but the ledger recorded "
            f"{event_key(release.event)}; the value is discarded"
        )


def _fault(point: str) -> None:
    """Test hook: ``PRIVTEXT_FAULT=after_record:votes/iter_002`` kills the process (SIGKILL) at that point, to
    prove that a crash between recording an event and saving its value neither loses nor duplicates anything
    (also ``dpsgd_worker:<rank>:step_<NNN>``: a DP-SGD worker process, mechanisms/dpsgd_workers.py)."""
    if os.environ.get("PRIVTEXT_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["REDRAW_POLICIES", "DirectReleases", "Keeper", "Release", "ReleaseKeeper", "check_spent",
           "dpsgd_release", "gaussian_release", "laplace_release"]
