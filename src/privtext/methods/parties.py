"""Several data holders for the vote-based methods: the ``parties:`` section shared by ``augpe`` (the PrE-Text
setting, :mod:`privtext.federated.votes`) and ``wasp`` (§4.7, Alg 2; :mod:`privtext.federated.topq`).

:class:`HoldsParties` is mixed into :class:`~privtext.methods.augpe.AugPE` (and so into WASP, its subclass):
it checks the section, loads one private file per party or cuts a Dirichlet(α) split, builds each party's
records for voting, gives the public coordinate bound B and writes what the statement says about the parties.
The release itself (recorded before any party computes) is each method's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from ..backends import BackendOptions
from ..config import Config
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..federated.topq import PartyVotes
    from ..privacy.ledger import Ledger
    from .base import Prepared, StatementParts


class PartiesOptions(BackendOptions):
    """The ``parties:`` section of ``augpe`` and ``wasp``: several data holders whose vote vectors meet only
    through a secure sum (see :mod:`privtext.federated.topq` and :mod:`privtext.federated.votes`)."""

    count: int | None = Field(default=None, ge=2, le=1000, description="L parties cut from data.private by a "
                              "Dirichlet(alpha) label split (experiments); or give files")
    alpha: float = Field(default=1.0, gt=0, description="Dirichlet concentration of the label split")
    files: list[str] | None = Field(default=None, description="one private file per party (data.private is then "
                                    "not read)")
    aggregation: Literal["secagg", "plain"] = Field(
        default="secagg", description="secagg: Flower SecAgg+, each party its own process; plain: summed in one "
        "process (NOT a secure aggregation; tests, machines without flwr)")
    min_survivors: int | None = Field(default=None, ge=1, description="t: each party adds noise std σ/√(t − c), so "
                                      "a round with ≥ t survivors carries ≥ σ (default L: no drop-out tolerated)")
    collusion: int = Field(default=0, ge=0, description="c: the guarantee holds against a server colluding with up "
                           "to c parties (each party adds σ/√(t − c)); 0: an honest-but-curious server alone")
    level: Literal["record", "user"] = Field(default="record", description="record: add/remove one record; user: "
                                             "add/remove one party with all its records (WASP App E.4)")
    max_records: int | None = Field(default=None, ge=1, description="user level: PUBLIC cap m on each party's "
                                    "records (each party keeps a random m); Δ = m·Δ_record")
    normalise: bool = Field(default=False, description="user level: each party's vote vector scaled to unit L2; "
                            "Δ = 1 whatever its size")
    value_bound: float | None = Field(default=None, gt=0, description="public bound B on a coordinate of a party's "
                                      "vector (clipped before noise); default 1 (normalise), m (max_records) or 1024")
    timeout: float = Field(default=120.0, gt=0, description="seconds per SecAgg+ stage")


def party_count(pt: PartiesOptions) -> int:
    return pt.count if pt.count is not None else len(pt.files or [])


def check_parties(config: Config, pt: PartiesOptions, section: str) -> None:
    """Refuse a ``{section}.parties`` block that cannot be run or accounted (errors name the key)."""
    p = config.privacy
    if (pt.count is None) == (pt.files is None):
        raise ConfigError(f"{section}.parties needs exactly one of count (a Dirichlet split of data.private) and "
                          f"files (one file per party); got count={pt.count!r}, files={pt.files!r}")
    L = party_count(pt)
    if L < 2:
        raise ConfigError(f"{section}.parties needs at least 2 parties, got {L}")
    t = pt.min_survivors if pt.min_survivors is not None else L
    lo = 2 if pt.aggregation == "secagg" else 1
    if not lo <= t <= L:
        raise ConfigError(f"{section}.parties.min_survivors must be in [{lo}, {L}] with aggregation "
                          f"{pt.aggregation}, got {t}")
    if not pt.collusion < t:
        raise ConfigError(f"{section}.parties.collusion must be below min_survivors={t} (each party adds σ/√(t − c)); "
                          f"got {pt.collusion}")
    if pt.level == "user" and pt.max_records is None and not pt.normalise:
        raise ConfigError(f"{section}.parties.level: user needs max_records (a public cap m, Δ = m·Δ_record) or "
                          "normalise: true (Δ = 1)")
    if pt.level == "record" and (pt.normalise or pt.max_records is not None):
        raise ConfigError(f"{section}.parties.normalise and max_records are user-level options: set "
                          f"{section}.parties.level: user")
    if pt.normalise and p.calibration == "paper":
        raise ConfigError("privacy.calibration: paper has no sensitivity for normalised user votes; use "
                          f"calibration: pld with {section}.parties.normalise")
    if p.kind == "noise" and not (p.noise_multiplier or 0) > 0:
        raise ConfigError(f"{section}.parties: privacy.noise_multiplier must be > 0 (each party adds its share of "
                          "the noise; a non-private reference run has no parties)")
    if config.data.max_private:
        raise ConfigError(f"data.max_private subsamples one private file; with {section}.parties each party keeps "
                          f"its records (use {section}.parties.max_records at user level)")
    if config.cluster.backend != "local":
        raise ConfigError(f"cluster.backend: {config.cluster.backend} counts one holder's votes on a cluster; with "
                          f"{section}.parties every party counts its own votes (set cluster.backend: local)")
    if config.synthesis.label_distribution.kind == "dp":
        raise ConfigError(f"{section}.parties: a DP label histogram would need its own aggregation; set "
                          "synthesis.label_distribution.kind to public, uniform or given (not dp)")


class HoldsParties:
    """Mixed into a vote-based method whose options have ``parties: PartiesOptions | None``."""

    options: Any
    config: Config
    name: Any
    seed: int | None

    def parties_options(self) -> PartiesOptions | None:
        return getattr(self.options, "parties", None)

    @classmethod
    def prepare(cls, config: Config) -> Prepared:
        """With ``parties.files`` the private corpus is the parties' files, in order (``data.private`` is not
        read); ``Inputs.party_of`` gives each private record's party. The public side as configured
        (:meth:`privtext.methods.base.MethodRun.prepare`)."""
        pt = getattr(cls.parse_options(config), "parties", None)  # type: ignore[attr-defined]
        if pt is None or pt.files is None:
            return super().prepare(config)  # type: ignore[misc,no-any-return]
        from ..data import Corpus
        from ..federated import parties_from_files
        from .base import Inputs, Prepared, read_public, read_streams

        t0 = time.perf_counter()
        d = config.data
        files = [str(Path(f).expanduser().resolve()) for f in pt.files]
        public, heldout = read_public(config, public_rng=read_streams(config)[1])  # the public side as configured
        parties = parties_from_files(files, text_column=d.text_column, label_columns=list(d.label_columns),
                                     id_column=d.id_column)
        # ids are the party's own (files may reuse them): prefixed with the party index
        private = Corpus(ids=tuple(f"party{p.index}:{i}" for p in parties for i in p.data.ids),  # type: ignore[attr-defined]
                         texts=tuple(t for p in parties for t in p.data.texts),  # type: ignore[attr-defined]
                         labels={c: tuple(v for p in parties for v in p.data.labels[c])  # type: ignore[attr-defined]
                                 for c in d.label_columns}, name="private (parties)")
        party_of = np.concatenate([np.full(len(party), party.index, dtype=np.int64) for party in parties])
        return Prepared(Inputs(private=private, public=public, heldout=heldout, party_of=party_of),
                        time.perf_counter() - t0)

    def build_parties(self, private_emb: np.ndarray, private_groups: np.ndarray,
                      party_of: np.ndarray | None) -> list[PartyVotes]:
        """Each party's records (embeddings, label groups) for voting: the file split, or a Dirichlet(α) split of
        the label groups (seeded by the run's seed: an experiment's set-up, never released); at user level with
        a cap m each party keeps a uniform random m of its records (``cap_records``). ``party_of``: each record's
        party with ``parties.files`` (``Inputs.party_of``), else None."""
        from ..federated import cap_records, dirichlet_split
        from ..federated.topq import PartyVotes

        pt = self.parties_options()
        assert pt is not None
        if party_of is not None:
            idx = [np.nonzero(party_of == k)[0] for k in range(int(party_of.max()) + 1)]
        else:
            assert pt.count is not None
            idx = dirichlet_split([str(g) for g in private_groups], pt.count, alpha=pt.alpha,
                                  seed=int(self.seed or 0))
        if pt.level == "user" and pt.max_records is not None:
            idx = [ix[cap_records(len(ix), pt.max_records, self.rng(f"{self.name}-party-cap", k))]  # type: ignore[attr-defined]
                   for k, ix in enumerate(idx)]
        self.diagnostic("party_sizes", None, [len(ix) for ix in idx])  # type: ignore[attr-defined]  # private only
        return [PartyVotes(emb=np.ascontiguousarray(private_emb[ix]), groups=np.asarray(private_groups[ix]))
                for ix in idx]

    def value_bound(self) -> float:
        """The public bound B (a party's vote bin gets ≤ 1 per record of that label): 1 with normalised votes,
        the cap m at user level, else 1024 (clipping above B keeps the sensitivity: 1-Lipschitz per party)."""
        pt = self.parties_options()
        assert pt is not None
        if pt.value_bound is not None:
            return float(pt.value_bound)
        if pt.normalise:
            return 1.0
        return float(pt.max_records) if pt.max_records is not None else 1024.0

    def user_multiplier(self) -> int:
        """m when a party's vector is a sum of ≤ m record vectors (user level with a cap), else 1."""
        pt = self.parties_options()
        return int(pt.max_records) if (pt is not None and pt.level == "user" and not pt.normalise
                                       and pt.max_records is not None) else 1

    def drop_hook(self) -> dict[int, str] | None:
        """Test hook: ``PRIVTEXT_PARTY_DROP=party:stage`` (or the older ``PRIVTEXT_WASP_DROP``) makes that party
        drop out of every round (SecAgg+: it crashes at that stage; plain: it is left out of the sum)."""
        v = os.environ.get("PRIVTEXT_PARTY_DROP") or os.environ.get("PRIVTEXT_WASP_DROP")
        if not v:
            return None
        k, _, stage = v.partition(":")
        return {int(k): stage or "collect_masked_vectors"}

    def parties_statement(self, parts: StatementParts, *, votes: bool = True,
                          ledger: Ledger | None = None) -> StatementParts:
        """What the statement says about the parties: their public parameters, the neighbouring relation at
        user level, whether the sum was secure (in the headline when it was not), and the threat model
        (:func:`privtext.federated.threat.threat_model`: honest-but-curious server, the collusion c the noise
        covers and, given the run's ``ledger``, ε against a server colluding with more parties)."""
        from ..federated.threat import threat_model

        pt = self.parties_options()
        if pt is None:
            return parts
        L = party_count(pt)
        t = pt.min_survivors if pt.min_survivors is not None else L
        secure = pt.aggregation == "secagg"
        parts.parameters["parties"] = {
            "count": L, "alpha": pt.alpha if pt.count is not None else None, "from_files": pt.files is not None,
            "aggregation": pt.aggregation, "securely_aggregated": secure,
            "min_survivors": t, "collusion": pt.collusion,
            "level": pt.level, "max_records": pt.max_records, "normalise": pt.normalise,
            "value_bound": self.value_bound() if votes else None}
        # the run's budget: an (ε, δ) budget reports at its δ, the others at their reporting δ
        delta = (getattr(self, "budget", None) or self.budget_of()).report_delta  # type: ignore[attr-defined]
        tm = threat_model(aggregation=pt.aggregation, parties=L, min_survivors=t, collusion=pt.collusion,
                          releases=list(ledger.entries) if (ledger is not None and votes) else None,
                          delta=delta)
        parts.threat_model = tm
        parts.guarantee["threat_model"] = tm["model"]
        if pt.level == "user":
            unit = ("adding or removing one data party with all its records" +
                    (" (votes normalised to unit L2 per party)" if pt.normalise else
                     f" (each party capped at {pt.max_records} records)"))
            parts.guarantee["neighbouring_relation"] = unit
            parts.headline = parts.headline.replace("adding or removing one private record", unit)
        agg_words = (f"The votes of {L} data parties were summed by Flower SecAgg+ (each party in its own "
                     "process, adding its share of the noise); no party's histogram was seen by the server."
                     if secure else
                     f"NOT SECURELY AGGREGATED: the votes of {L} data parties were summed in one process "
                     f"({self.name}.parties.aggregation: plain); the guarantee covers the released sums, not the "
                     "process that computed them.")
        parts.coverage = [*parts.coverage, agg_words, *tm["sentences"]]
        if not secure:
            parts.headline = parts.headline + " (parties NOT securely aggregated: aggregation plain)"
        return parts


__all__ = ["HoldsParties", "PartiesOptions", "check_parties", "party_count"]
