"""The privacy ledger: one event per noisy release, checked against the budget and fsync'd *before* the release
is computed, reloadable on resume.

Contract
--------
* :meth:`Ledger.record` takes a :class:`Release` — a description of the noisy value that is about to be drawn,
  never the data. It composes the new event with every recorded one; if the result would exceed the budget it
  raises :class:`~privtext.errors.BudgetExceededError` and writes nothing, so a refused release never reads
  private data. Otherwise it appends one JSON line to ``ledger.jsonl`` (:func:`privtext.atomicio.append_jsonl`,
  fsync'd) and only then returns. :class:`privtext.privacy.release.ReleaseKeeper` is the one code path that
  records a release and then computes it.
* Keys are unique: exactly one event per release (:class:`DuplicateReleaseError`). A resumed run asks
  :meth:`Ledger.has` before recording.
* :meth:`Ledger.load` (and the constructor, on an existing file) reads the file back; a torn last line — a
  crash in the middle of an append, whose release was therefore never used — is dropped and cut from the file.

Accounting per budget kind (:mod:`privtext.privacy.accounting`):

* ``dp`` — all record-level events composed in dp_accounting's PLD; ε(δ) ≤ ε_budget.
* ``gdp`` — μ = (Σ (Δ/σ_i)²)^½ over Gaussian events (exact); other events are refused with a clear error.
* ``secret`` — per secret group g: the composition of g's :class:`SecretEvent` events (from every release that
  names g) and of the record-level events of releases that name no group (those are taken to affect every
  secret: their sensitivity must already cover all records holding one secret); B_g(p_g) ≤ r_g, decided by
  :func:`~privtext.privacy.accounting.secret_check` (a cheap valid upper bound when it suffices, else the
  pessimistic PLD). The reported ``posterior`` is that bound (``bound`` says which). Groups a
  release does not name are unaffected by it. With no group recorded at all, the record-level events are
  checked at every (p, r) pair of the budget.
* ``noise`` — never refuses; ε at ``report_delta`` is reported.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..atomicio import append_jsonl, jsonable
from ..errors import BudgetExceededError, PrivacyError, RunError
from .accounting import epsilon_for_delta, gdp_mu_of, secret_check
from .budget import Budget
from .conversions import gdp_epsilon
from .events import DpEvent, SecretEvent, event_key
from .release import Release

T = TypeVar("T")

#: relative tolerance used when matching a secret group's (p, r) with the budget's
_PAIR_RTOL = 1e-9


class DuplicateReleaseError(PrivacyError):
    """A release key is already in the ledger: each release has exactly one event."""


@dataclass(frozen=True)
class LedgerEntry:
    seq: int
    time: float
    release: Release
    spent_after: dict[str, Any]

    @property
    def key(self) -> str:
        return self.release.key

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "time": self.time, **self.release.to_dict(), "spent_after": self.spent_after}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LedgerEntry:
        return cls(seq=int(d["seq"]), time=float(d.get("time", 0.0)), release=Release.from_dict(d),
                   spent_after=dict(d.get("spent_after") or {}))


class Ledger:
    """Append-only, persisted record of every noisy release of a run (see the module docstring).

    ``Ledger(path, budget)`` opens (and reads) ``path`` if it exists, else starts empty; ``path=None`` keeps the
    ledger in memory (library use, tests)."""

    def __init__(self, path: str | os.PathLike[str] | None, budget: Budget):
        if not isinstance(budget, Budget):
            raise PrivacyError(f"budget must be a privtext.privacy.Budget, got {type(budget).__name__}")
        self.path = Path(path) if path is not None else None
        self.budget = budget
        self._entries: list[LedgerEntry] = []
        self._keys: dict[str, int] = {}
        self._lock = threading.RLock()
        self._spent_cache: dict[str, Any] | None = None
        if self.path is not None and self.path.exists():
            for e in self._read(self.path):
                if e.key in self._keys:
                    raise RunError(f"{self.path}: release key {e.key!r} appears twice")
                self._keys[e.key] = len(self._entries)
                self._entries.append(e)
            if self._entries:
                spent = self._compute([e.release for e in self._entries])
                if spent["exceeded"]:
                    raise BudgetExceededError(
                        f"{self.path}: the {len(self._entries)} recorded releases already exceed the budget "
                        f"{budget.describe()} ({_spent_words(spent)}); was the budget changed since the run started?"
                    )
                self._spent_cache = spent

    @classmethod
    def load(cls, path: str | os.PathLike[str], budget: Budget) -> Ledger:
        """Reopen a run's ledger (an absent or empty file gives an empty ledger)."""
        return cls(path, budget)

    # ------------------------------------------------------------------ file
    @staticmethod
    def _read(path: Path) -> list[LedgerEntry]:
        raw = path.read_bytes()
        if not raw:
            return []
        cut = len(raw)
        if not raw.endswith(b"\n"):  # torn last line: its append never completed, so its release was never used
            cut = raw.rfind(b"\n") + 1
            with open(path, "r+b") as f:
                f.truncate(cut)
                f.flush()
                os.fsync(f.fileno())
        out = []
        for i, line in enumerate(raw[:cut].decode("utf-8").split("\n")):
            if not line.strip():
                continue
            try:
                out.append(LedgerEntry.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                raise RunError(f"{path}:{i + 1}: corrupt ledger line ({e})") from e
        return out

    # ------------------------------------------------------------------ queries
    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def has(self, key: str) -> bool:
        return key in self._keys

    def get(self, key: str) -> LedgerEntry:
        if key not in self._keys:
            raise KeyError(f"no release {key!r} in the ledger")
        return self._entries[self._keys[key]]

    def spent(self) -> dict[str, Any]:
        """What the recorded releases cost, in the budget's terms (plus ``exceeded``)."""
        with self._lock:
            if self._spent_cache is None:
                self._spent_cache = self._compute([e.release for e in self._entries])
            return dict(self._spent_cache)

    def remaining(self) -> dict[str, Any]:
        """What is left: ε (dp), μ = √(μ_b² − μ²) (gdp), r_g − B_g per group (secret); nothing for noise."""
        s = self.spent()
        b = self.budget
        if b.kind == "dp":
            return {"kind": "dp", "epsilon": max(0.0, b.epsilon - s["epsilon"]), "delta": b.delta}
        if b.kind == "pure":
            return {"kind": "pure", "epsilon": max(0.0, b.epsilon - s["epsilon"])}
        if b.kind == "gdp":
            return {"kind": "gdp", "mu": math.sqrt(max(0.0, b.mu**2 - s["mu"] ** 2))}
        if b.kind == "secret":
            return {"kind": "secret",
                    "groups": {g: max(0.0, v["r"] - v["posterior"]) for g, v in s["groups"].items()}}
        return {"kind": "noise", "note": "no budget cap"}

    # ------------------------------------------------------------------ recording
    def check(self, release: Release) -> dict[str, Any]:
        """Dry run of :meth:`record`: the spend after ``release``; raises as :meth:`record` would."""
        release.validate()
        with self._lock:
            if release.key in self._keys:
                raise DuplicateReleaseError(
                    f"release {release.key!r} is already in the ledger: every release has exactly one event "
                    "(a resumed run must skip recorded releases)"
                )
            spent = self._compute([e.release for e in self._entries] + [release])
            if spent["exceeded"]:
                raise BudgetExceededError(
                    f"release {release.key!r} ({release.mechanism}) refused before any private data was read: "
                    f"it would exceed the budget {self.budget.describe()} ({_spent_words(spent)})"
                )
            return spent

    def record(self, release: Release) -> LedgerEntry:
        """Check ``release`` against the budget, then append it (fsync'd). Returns the entry."""
        with self._lock:
            spent = self.check(release)
            entry = LedgerEntry(seq=len(self._entries), time=round(time.time(), 3), release=release,
                                spent_after=jsonable(spent))
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                append_jsonl(self.path, entry.to_dict(), fsync=True)
            self._keys[release.key] = len(self._entries)
            self._entries.append(entry)
            self._spent_cache = spent
            return entry

    # ------------------------------------------------------------------ accounting
    def _compute(self, releases: list[Release]) -> dict[str, Any]:
        b = self.budget
        events = [r.event for r in releases]
        if b.kind == "dp":
            eps = epsilon_for_delta(events, b.delta) if events else 0.0
            return {"kind": "dp", "epsilon": eps, "delta": b.delta, "releases": len(releases),
                    "exceeded": bool(eps > b.epsilon)}
        if b.kind == "pure":
            from .pure import pure_epsilon

            eps = math.fsum(pure_epsilon(e) for e in events)
            # basic composition is exact for pure DP; a relative slack of 1e-9 absorbs the rounding of ε = Σ ε_i
            return {"kind": "pure", "epsilon": eps, "releases": len(releases),
                    "exceeded": bool(eps > b.epsilon * (1 + 1e-9))}
        if b.kind == "gdp":
            mu = gdp_mu_of(events) if events else 0.0
            return {"kind": "gdp", "mu": mu, "epsilon_at_report_delta": _gdp_eps(mu, b.report_delta),
                    "report_delta": b.report_delta, "releases": len(releases), "exceeded": bool(mu > b.mu)}
        if b.kind == "noise":
            eps = epsilon_for_delta(events, b.report_delta) if events else 0.0
            return {"kind": "noise", "epsilon_at_report_delta": eps, "report_delta": b.report_delta,
                    "releases": len(releases), "exceeded": False}
        return self._compute_secret(releases)

    def _compute_secret(self, releases: list[Release]) -> dict[str, Any]:
        b = self.budget
        global_events = [r.event for r in releases if r.secret_events is None]
        groups: dict[str, dict[str, Any]] = {}
        for r in releases:
            for gid, se in (r.secret_events or {}).items():
                g = groups.get(gid)
                if g is None:
                    self._check_pair(gid, se)
                    groups[gid] = {"p": se.p, "r": se.r, "secrets": se.secrets, "events": [se.event], "releases": 1,
                                   "planned": se.planned}
                else:
                    if not (_close(g["p"], se.p) and _close(g["r"], se.r)) or (
                            se.secrets and g["secrets"] and tuple(se.secrets) != tuple(g["secrets"])):
                        raise PrivacyError(
                            f"release {r.key!r}: secret group {gid!r} changed its (p, r) or secrets since an earlier "
                            "release; a group must keep its identity for the whole run"
                        )
                    g["events"].append(se.event)
                    g["releases"] += 1
        out: dict[str, dict[str, Any]] = {}
        exceeded = False
        for gid, g in groups.items():
            ok, bu, how = self._group_check(g["events"], global_events, g["planned"], g["p"], g["r"])
            out[gid] = {"p": g["p"], "r": g["r"], "posterior": bu, "bound": how,
                        "releases": g["releases"] + len(global_events), "secrets": len(g["secrets"])}
            exceeded |= not ok
        if not groups and global_events:
            for i, (p, r) in enumerate(b.pairs):
                ok, bu, how = secret_check(global_events, p, r)
                out[f"all:{i}"] = {"p": p, "r": r, "posterior": bu, "bound": how, "releases": len(global_events),
                                   "secrets": None}
                exceeded |= not ok
        worst = max(out.items(), key=lambda kv: kv[1]["posterior"] / kv[1]["r"], default=None)
        return {"kind": "secret", "groups": out, "releases": len(releases),
                "worst_group": None if worst is None else worst[0],
                "max_posterior_over_r": 0.0 if worst is None else worst[1]["posterior"] / worst[1]["r"],
                "exceeded": bool(exceeded)}

    @staticmethod
    def _group_check(events: list[DpEvent], global_events: list[DpEvent], planned: int | None, p: float,
                     r: float) -> tuple[bool, float, str]:
        """secret_check of a group's composition; when all its events are one identical event and the release
        plan says ``planned`` of them, check ``planned`` first: if that many pass, so do fewer (monotone)."""
        if planned is not None and not global_events and 0 < len(events) < planned:
            keys = {event_key(e) for e in events}
            if len(keys) == 1:
                ok, bu, how = secret_check([events[0]] * int(planned), p, r)
                if ok:
                    return ok, bu, f"{how} (all {planned} planned releases)"
        return secret_check(events + global_events, p, r)

    def _check_pair(self, gid: str, se: SecretEvent) -> None:
        b = self.budget
        if se.secrets and b.per_secret:
            for j in se.secrets:
                pj, rj = b.pair_of(int(j))
                if not (_close(pj, se.p) and _close(rj, se.r)):
                    raise PrivacyError(
                        f"secret group {gid!r}: its (p={se.p:g}, r={se.r:g}) differs from the budget's "
                        f"(p={pj:g}, r={rj:g}) for secret {j}"
                    )
            return
        if not any(_close(p, se.p) and _close(r, se.r) for p, r in b.pairs):
            raise PrivacyError(
                f"secret group {gid!r}: its (p={se.p:g}, r={se.r:g}) is not a (p, r) pair of the budget "
                f"{b.describe()}; the ledger cannot tell which secrets it protects"
            )

    # ------------------------------------------------------------------ statement
    def account(self) -> dict[str, Any]:
        """The ledger's full account in numbers (budget, spent — per secret group included —, remaining, the
        release list): a private diagnostic (``private/diagnostics.json``). The shareable words are
        :class:`privtext.privacy.statement.PrivacyStatement`'s."""
        b = self.budget
        s = self.spent()
        approx = any(se.approximate for e in self._entries for se in (e.release.secret_events or {}).values())
        mech: dict[str, int] = {}
        for e in self._entries:
            mech[e.release.mechanism] = mech.get(e.release.mechanism, 0) + 1
        out: dict[str, Any] = {
            "budget": b.to_dict(),
            "spent": jsonable(s),
            "remaining": jsonable(self.remaining()),
            "releases": len(self._entries),
            "releases_by_mechanism": mech,
            "release_list": [
                {"key": e.key, "mechanism": e.release.mechanism, "noise_std": e.release.noise_std,
                 "sensitivity": e.release.sensitivity, "iteration": e.release.iteration,
                 "secret_groups": len(e.release.secret_events or {})}
                for e in self._entries
            ],
            "accountant": (
                "pure ε: the sum of the Laplace releases' ε (basic composition, exact for pure DP)" if b.kind == "pure"
                else "dp_accounting PLD (pessimistic, connect-the-dots); exact GDP composition for Gaussians; "
                     "SecPE blow-up B(p) = min_ε e^ε p + δ(ε) for secret protection"),
            "neighbouring_relation": (
                "add or remove one private record" if b.kind != "secret"
                else "the same private data with and without one declared secret (SecPE Def 3.1)"
            ),
            "ledger": str(self.path) if self.path is not None else None,
        }
        if approx:
            out["warning"] = ("some secret-group events use the paper's single-Gaussian approximation, which is not "
                              "an upper bound on the blow-up: the stated (p, r) is not proven for those groups")
        rec = [e.release.event for e in self._entries]
        if b.kind in ("secret", "gdp") and rec:
            try:
                out["record_level_epsilon"] = {"delta": b.report_delta,
                                               "epsilon": epsilon_for_delta(rec, b.report_delta)}
            except PrivacyError:  # pragma: no cover - events outside the PLD accountant
                pass
        return jsonable(out)


# ---------------------------------------------------------------------------------------------- helpers


def _close(a: float, b: float) -> bool:
    return math.isclose(float(a), float(b), rel_tol=_PAIR_RTOL, abs_tol=0.0)


def _gdp_eps(mu: float, delta: float) -> float:
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    return float(gdp_epsilon(delta, mu))


def _spent_words(s: Mapping[str, Any]) -> str:
    k = s["kind"]
    if k == "dp":
        return f"ε would be {s['epsilon']:.6g} at δ={s['delta']:g}"
    if k == "pure":
        return f"pure ε would be {s['epsilon']:.6g}"
    if k == "gdp":
        return f"μ would be {s['mu']:.6g}"
    if k == "secret":
        g = s["worst_group"]
        if g is None:
            return "no secret group"
        v = s["groups"][g]
        return f"secret group {g}: posterior bound {v['posterior']:.6g} > r={v['r']:g} at p={v['p']:g}"
    return ""


__all__ = ["DuplicateReleaseError", "Ledger", "LedgerEntry", "Release"]
