"""The one run skeleton every method runs on, and what every method shares.

:meth:`MethodRun.execute` owns a run's start and finish, for every method alike (no method overrides it;
``tests/test_method_contract.py`` checks that):

1. **inputs** — the corpora, read once per run (:meth:`MethodRun.prepare`: the pre-run check reads them and hands
   them over; a resumed run reads them here), the method's split (:meth:`MethodRun.split_data`: SecPE and
   Aug-PE's secret groups detect secrets here), the held-out slice written out;
2. **label space** — the public label groups and each private record's group; a record outside the declared
   schema is refused for every method (:func:`private_groups`);
3. **neighbouring relation** — :meth:`MethodRun.neighbouring` returns the run's
   :class:`~privtext.privacy.relation.NeighbouringRelation`, fixed before the first release; every release's Δ is
   derived from it (:meth:`RunContext.gaussian` / :meth:`RunContext.laplace`);
4. **guard, ledger, keeper, prompt log** — the guard holds salted hashes of the private texts and every detected
   secret value; the ledger enforces the budget (:meth:`MethodRun.budget`); the keeper records each release before
   it is computed and keeps it for resume;
5. **backends** — the generators (:meth:`MethodRun.generator_configs`: one, or WASP's several) and the embedder;
6. **generation** — the method's policy, :meth:`MethodRun.generate`, the only part a method writes: an evolution
   loop on the engine (Aug-PE, SecPE: :class:`EvolutionMethod`), WASP's rounds, DP-KPS's one shot;
7. **finish** — the synthetic output, the audit of every prompt and of the synthetic text (private records,
   detected secret values), the private diagnostics, the statement (:meth:`MethodRun.privacy_statement`: NOT
   PRIVATE after reproducible noise, a release without noise or a failed audit), the metrics.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel

from ..atomicio import PromptLog, atomic_write_json, atomic_write_text, dumps, read_jsonl
from ..backends import BackendOptions, parse_options
from ..config import Config, GeneratorConfig
from ..data import Corpus, load_corpus, split_corpus, write_corpus
from ..data.labels import LabelSpace
from ..embed.base import Embedder
from ..embed.private import embed_private
from ..errors import ConfigError, DataError, MissingColumnError
from ..generate.base import Generator
from ..guard import PrivateGuard
from ..mechanisms.labels import allocate, dp_label_histogram, laplace_label_histogram
from ..privacy.relation import ONE_COUNT_L1, ONE_VOTE_L2, Contribution, NeighbouringRelation
from ..privacy.release import Release, ReleaseKeeper, gaussian_release, laplace_release
from ..progress import display, progress, say
from ..rng import derive, noise_rng
from ..rundir import RunDir, StageMetrics

if TYPE_CHECKING:  # type hints only (no import at run time: these modules load lazily)
    from ..engine.loop import IterationResult, Scorer
    from ..guard import AuditResult
    from ..privacy.budget import Budget
    from ..privacy.events import DpEvent, SecretEvent
    from ..privacy.ledger import Ledger
    from ..privacy.statement import Assumption
    from ..secrets.matrix import SecretMatrix

#: what a release's ``compute`` returns: the released arrays and the event the mechanism spent
Computed = tuple[dict[str, np.ndarray], "DpEvent"]
#: a JSON object: what privacy.json, private/diagnostics.json and private/metrics.json hold, and a release's meta
JsonObject = dict[str, Any]


@dataclass
class Inputs:
    """The run's corpora: what :func:`read_inputs` read and, after :meth:`MethodRun.split_data`, what the method
    made of them.

    * ``private``, ``public``, ``heldout`` — the corpora (``heldout``: the public corpus's held-out slice);
    * ``subsampled`` — the private corpus is a uniform ``data.max_private`` sample of the file;
    * ``secrets`` — the secrets the split detected (SecPE; Aug-PE's ``sensitivity: secret_group``), every holder
      propagated: the guard scans every prompt and the synthetic output for their values;
    * ``secret_free`` — the private records the split moved to the public side (SecPE: they hold no secret);
    * ``party_of`` — each private record's party (``parties.files``: one file per data holder).
    """

    private: Corpus
    public: Corpus | None
    heldout: Corpus | None = None
    subsampled: bool = False
    secrets: SecretMatrix | None = None
    secret_free: Corpus | None = None
    party_of: np.ndarray | None = None


@dataclass(frozen=True)
class Prepared:
    """The run's corpora as :meth:`MethodRun.prepare` read them, once per run: the pre-run check
    (:func:`privtext.runner.preflight`) checks them and hands them to :meth:`MethodRun.execute`, which reads
    nothing again; ``seconds`` is the reading time (the run's ``loading`` stage)."""

    inputs: Inputs
    seconds: float


def read_inputs(config: Config, *, subsample_rng: Callable[[], np.random.Generator],
                public_rng: Callable[[], np.random.Generator]) -> Inputs:
    """Load the corpora a configuration names: the private corpus (a uniform ``data.max_private`` sample drawn with
    ``subsample_rng`` — privacy randomness), the public corpus minus its held-out slice, at most
    ``data.max_public`` of it. Typed errors name the file, column or value. :meth:`MethodRun.prepare` reads a
    run's corpora with it, once, before any run directory exists."""
    d = config.data
    private = load_corpus(d.private, text_column=d.text_column, label_columns=d.label_columns,
                          id_column=d.id_column, name="private")
    check_nonempty(private, f"the private corpus {d.private}")
    subsampled = False
    if d.max_private and len(private) > d.max_private:
        # privacy randomness: which records were used stays as secret as the noise (privtext.rng)
        idx = np.sort(subsample_rng().choice(len(private), d.max_private, replace=False))
        private = private.subset(idx)
        subsampled = True
    public, heldout = read_public(config, public_rng=public_rng)
    return Inputs(private=private, public=public, heldout=heldout, subsampled=subsampled)


def read_streams(config: Config) -> tuple[Callable[[], np.random.Generator], Callable[[], np.random.Generator]]:
    """The run's streams for reading its corpora (:meth:`MethodRun.prepare`): the ``data.max_private`` sample's,
    privacy randomness (``noise_rng(seed, "max_private")``, as :meth:`MethodRun.noise_rng`), and the
    ``data.max_public`` sample's, public randomness (``derive(seed, "max_public")``, as :meth:`MethodRun.rng`)."""
    p = config.privacy
    return (lambda: noise_rng(config.seed, "max_private", reproducible=p.reproducible_noise),
            lambda: derive(config.seed, "max_public", secure=p.secure))


def read_public(config: Config, *, public_rng: Callable[[], np.random.Generator]
                ) -> tuple[Corpus | None, Corpus | None]:
    """The public corpus (None without ``data.public``) minus its held-out slice (``data.public_holdout``), at most
    ``data.max_public`` of it (a sample drawn with ``public_rng``), and the held-out slice."""
    d = config.data
    public = heldout = None
    if d.public:
        try:
            public = load_corpus(d.public, text_column=d.public_text_column or d.text_column,
                                 label_columns=d.label_columns, name="public",
                                 optional_labels=d.label_values is not None)
        except MissingColumnError as e:
            hint = "; ".join(h for h in (e.hint, _public_column_hint(config, e)) if h)
            raise MissingColumnError(e.path, e.missing, e.available, hint=hint) from None
        if d.public_holdout:
            ho = d.public_holdout
            n_ho = round(ho * len(public)) if isinstance(ho, float) and ho < 1 else int(ho)
            if not 0 < n_ho < len(public):
                raise ConfigError(f"data.public_holdout={ho} leaves no public text ({len(public)} records)")
            public, heldout = split_corpus(public, [len(public) - n_ho, n_ho], seed=_seed_int(config.seed))
        if d.max_public and len(public) > d.max_public:
            idx = np.sort(public_rng().choice(len(public), d.max_public, replace=False))
            public = public.subset(idx)
    return public, heldout


# ------------------------------------------------------------------------------------------------ label space


def _public_column_hint(config: Config, e: MissingColumnError) -> str:
    """What to set when the public corpus lacks a column the configuration names: its text column
    (``data.public_text_column``) or the label columns (``data.label_values`` for unlabelled public text)."""
    d = config.data
    text = d.public_text_column or d.text_column
    hints = []
    if text in e.missing:
        hints.append(f"if the public text is in another column, set data.public_text_column to it (the private "
                     f"corpus's text column is data.text_column = {d.text_column!r})")
    labels = [c for c in e.missing if c != text and c in d.label_columns]
    if labels:
        hints.append(f"for public text without the label column(s) {labels}, declare the label values in "
                     "data.label_values (docs/dpkps.md)")
    return "; ".join(hints)


def resolve_label_distribution(config: Config, public: Corpus | None) -> tuple[str, str]:
    """(the kind, why) that ``synthesis.label_distribution.kind: auto`` stands for: ``uniform`` when the run has
    no label columns, ``public`` when the public corpus has every label column, ``uniform`` when it lacks them and
    the label values are declared (``data.label_values``), else ``public`` (whose own checks then say what is
    missing). A kind that is not ``auto`` is returned as it is."""
    ld = config.synthesis.label_distribution
    if ld.kind != "auto":
        return ld.kind, ld.picked or ""
    columns = tuple(config.data.label_columns)
    if not columns:
        return "uniform", "kind auto: the run has no label columns (one group)"
    if _has_labels(public, columns):
        return "public", "kind auto: the public corpus has the label columns, so samples per label follow it"
    if config.data.label_values is not None:
        return "uniform", ("kind auto: the public corpus has no label columns, so every declared label combination "
                           "(data.label_values) gets an equal share")
    return "public", "kind auto: public (the public corpus is the only source of label counts)"


def label_space(config: Config, public: Corpus | None) -> LabelSpace:
    """The run's public label groups: every combination of the declared values (``data.label_values``), the
    weights' keys (``label_distribution: given``), or the combinations of the public corpus."""
    columns = tuple(config.data.label_columns)
    if not columns:
        return LabelSpace.unlabeled()
    ld = config.synthesis.label_distribution
    kind, _ = resolve_label_distribution(config, public)
    declared = config.data.label_values
    if declared is not None:
        values = tuple(itertools.product(*(tuple(declared[c]) for c in columns)))
        if kind == "public" and not _has_labels(public, columns):
            raise ConfigError(
                "synthesis.label_distribution.kind=public needs labelled public text, but the public corpus has "
                f"no column(s) {list(columns)}; with data.label_values use auto (the default), uniform, given or dp")
        return LabelSpace(columns, values)
    if kind == "given":
        if not ld.weights:
            raise ConfigError("synthesis.label_distribution.kind=given needs weights: {'a|b': w, ...}")
        values = tuple(tuple(k.split("|")) for k in ld.weights)
        bad = [k for k, v in zip(ld.weights, values, strict=True) if len(v) != len(columns)]
        if bad:
            raise ConfigError(f"label weights keys {bad} do not have {len(columns)} '|'-separated parts")
        return LabelSpace(columns, values)
    if public is None:
        raise ConfigError(
            "labelled runs need the label values from public information: give data.public (with the label "
            "columns), data.label_values, or synthesis.label_distribution: {kind: given, weights: {...}}"
        )
    return LabelSpace(columns, tuple(sorted(set(public.label_tuples(columns)))))


def private_groups(config: Config, space: LabelSpace, private: Corpus) -> tuple[np.ndarray, int]:
    """The label group of each private record (−1: outside the public label space, casts no vote) and how many
    are outside. With ``data.label_values`` a record outside the declared schema is a :class:`DataError` — for
    every method (the runner calls this before a run directory exists)."""
    groups = (space.groups_of(private.label_tuples(space.columns)) if space.columns
              else np.zeros(len(private), dtype=np.int64))
    outside = int((groups < 0).sum())
    if outside and config.data.label_values is not None:
        # the declared values are public, an undeclared one is private: neither it nor the count is printed
        raise DataError("a private record has a label not in data.label_values: declare every label value "
                        f"of the columns {list(space.columns)} (values as they appear in the private file)")
    return groups, outside


def public_label_weights(config: Config, space: LabelSpace, public: Corpus | None) -> np.ndarray:
    """Samples per label group from public information: uniform, the configured weights, or the public corpus's
    label counts (``label_distribution: public``)."""
    ld = config.synthesis.label_distribution
    if not space.columns:
        return np.ones(1)
    kind, _ = resolve_label_distribution(config, public)
    if kind in ("uniform", "dp"):
        return np.ones(len(space))
    if kind == "given":
        assert ld.weights is not None
        missing = [" | ".join(v) for v in space.values
                   if " | ".join(v) not in ld.weights and "|".join(v) not in ld.weights]
        if missing:
            raise ConfigError(f"synthesis.label_distribution.weights has no weight for {missing[:5]}")
        w = np.array([float(ld.weights[" | ".join(v)] if " | ".join(v) in ld.weights else ld.weights["|".join(v)])
                      for v in space.values])
        if (w < 0).any():
            raise ConfigError(f"label weights must be ≥ 0, got {list(w)}")
        return w
    assert public is not None
    groups = space.groups_of(public.label_tuples(space.columns))
    return np.bincount(groups[groups >= 0], minlength=len(space)).astype(np.float64)


# ------------------------------------------------------------------------------------------------ the method API


#: the units a method's progress is counted in (the report, the evaluation and the demo word it so)
ProgressUnit = Literal["iteration", "round", "one shot", "epoch"]


@dataclass(frozen=True)
class MethodDescription:
    """What the shared code needs to know of a method, declared once on its class (:attr:`MethodRun.description`)
    so that no code outside ``methods/`` compares a method's name (``tests/test_architecture.py`` checks that).
    ``privacy.json`` carries it (key ``method_description``); the report, the evaluation, the demo, the audits and
    the runner read it.

    * **progress** — ``unit``: what one step of the method is (Aug-PE and SecPE iterate, WASP runs rounds, DP-KPS
      releases once, dpft trains for epochs); ``planned``: the ``privacy.json`` parameter that holds how many units
      were planned (None for one shot); ``checkpoints``: each unit leaves a complete checkpoint of candidates and
      votes (``private/checkpoints/iter_NNN``; what ``privtext diagnose`` and the per-iteration evaluation read),
      else the units done are counted from the statement's releases, one index each; ``output``: the synthetic
      set is the last unit's selection (``"last"``) or every unit's samples (``"all"``, WASP); ``progress_words``:
      how a one-shot run's progress reads.
    * **votes** — whether the method releases vote histograms over candidates; ``release_words`` says what the
      released votes are, or (no votes) what the method releases instead.
    * **zero-shot control** — ``zero_shot``: the run itself holds generator output without private feedback (the
      ``origin == "random"`` candidates of iteration 0), the evaluation's zero-shot baseline; ``zero_shot_words``
      says why not, where it does not; ``control``: ``--set`` overrides that turn a configuration of this method
      into its no-private-signal control run (docs/compare.md), and ``control_words`` what that run is.
    * **guarantee** — ``pure`` (pure ε-DP: ``privacy: {epsilon}`` without δ is its budget), ``approximate``
      ((ε, δ)-DP or μ-GDP) or ``secret`` ((p, r)-secret protection, SecPE Def 3.1); ``audit_game``: the game
      ``privtext audit --end-to-end`` plays (``membership``: an ε lower bound from planted canaries;
      ``reconstruction``: planted secrets).
    * **section** — the name of the method's own configuration section (``augpe:``), validated by its ``Options``
      when the run is resolved; ``title`` — the method's name as prose writes it (``Aug-PE``).
    """

    section: str
    guarantee: Literal["pure", "approximate", "secret"]
    audit_game: Literal["membership", "reconstruction"]
    unit: ProgressUnit
    planned: str | None = None
    checkpoints: bool = False
    output: Literal["last", "all"] = "last"
    progress_words: str = ""
    votes: bool = False
    release_words: str = ""
    zero_shot: bool = False
    zero_shot_words: str = ""
    control: tuple[str, ...] = ()
    control_words: str = ""
    title: str = ""

    def __post_init__(self) -> None:
        for f, allowed in (("guarantee", ("pure", "approximate", "secret")),
                           ("audit_game", ("membership", "reconstruction")),
                           ("unit", ("iteration", "round", "one shot", "epoch")), ("output", ("last", "all"))):
            if getattr(self, f) not in allowed:
                raise ValueError(f"MethodDescription.{f} must be one of {allowed}, got {getattr(self, f)!r}")
        if not self.section or not isinstance(self.section, str):
            raise ValueError(f"MethodDescription.section must name the method's config section, got {self.section!r}")
        if self.unit == "one shot" and (self.planned is not None or self.checkpoints):
            raise ValueError("a one-shot method plans no units and leaves no per-unit checkpoints")
        if isinstance(self.control, str):
            raise ValueError("MethodDescription.control is a tuple of --set overrides, not one string")

    @property
    def name(self) -> str:
        """The method's name in prose: its title, else its section's name."""
        return self.title or self.section

    @property
    def iterative(self) -> bool:
        """Whether the method runs in counted units (everything but one shot)."""
        return self.unit != "one shot"

    @property
    def units(self) -> str:
        """The unit's plural (``iterations``, ``rounds``, ``epochs``)."""
        return f"{self.unit}s" if self.iterative else self.unit

    def control_command(self, config: str = "CONFIG") -> str:
        """The command line of the no-private-signal control run of ``config``."""
        import shlex

        return " ".join(["privtext run", config, *(f"--set {shlex.quote(o)}" for o in self.control)])

    def to_dict(self) -> JsonObject:
        """The description as ``privacy.json`` holds it (``method_description``): plain JSON values."""
        from dataclasses import asdict

        d = asdict(self)
        d["control"] = list(self.control)
        return d

    @classmethod
    def from_dict(cls, d: object) -> MethodDescription | None:
        """The description a ``privacy.json`` recorded, or None where it holds none (written before it was
        recorded) or one this version cannot read."""
        if not isinstance(d, dict):
            return None
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        if isinstance(kw.get("control"), list):
            kw["control"] = tuple(kw["control"])
        try:
            return cls(**kw)
        except (TypeError, ValueError):
            return None

    @classmethod
    def unknown(cls, name: str) -> MethodDescription:
        """What the shared code assumes of a method it has no description of (a run of a method that is not
        installed here, written before descriptions were recorded): an iterative vote method, as the evolution
        loop's runs are."""
        return cls(section=name, guarantee="approximate", audit_game="membership", unit="iteration",
                   planned="iterations", checkpoints=True, votes=True, release_words="the released noisy histogram values",
                   zero_shot=True)


@dataclass(frozen=True)
class LabelNoise:
    """How a method releases the DP label histogram (``synthesis.label_distribution.kind: dp``): a Gaussian with
    noise multiplier ``sigma`` (Aug-PE) or a Laplace at ``epsilon`` (DP-KPS). Δ comes from the run's relation."""

    kind: Literal["gaussian", "laplace"]
    sigma: float | None = None
    epsilon: float | None = None


@dataclass
class Synthetic:
    """What a method's generation returns: the synthetic texts, each one's label group, and (DP-KPS) the keyphrase
    sequence behind each text (post-processing of its releases; written to ``keyphrases.jsonl``)."""

    texts: list[str]
    groups: np.ndarray
    keyphrases: list[list[str]] | None = None


@dataclass
class StatementParts:
    """What a method says of its guarantee (:meth:`MethodRun.statement_parts`); the skeleton adds what every run
    states (:meth:`MethodRun.privacy_statement`). Every number must be a configured parameter, a released noisy
    value or a listed :class:`~privtext.privacy.statement.Assumption` (:mod:`privtext.privacy.statement`).

    * ``guarantee`` — the guarantee as data (kind, budget, spent, releases, ...; the relation's words are added
      when the method gives none);
    * ``headline`` — the guarantee in one sentence, as if the run were private (the skeleton says NOT PRIVATE
      where it is not);
    * ``parameters`` — the method's parameters (after the configured ones of :meth:`MethodRun.
      statement_parameters`);
    * ``assumed_public`` — values computed from private data without noise, stated as assumptions;
    * ``treated_as_public`` and ``coverage`` — sentences: what the run takes as public, what the guarantee covers
      and what it does not;
    * ``audit_words`` — what the prompt audit checked, when the method's guarantee makes it check something else
      than the default (SecPE: the secret holders only);
    * ``threat_model`` — several data holders: who is trusted (:meth:`~privtext.methods.parties.HoldsParties.
      parties_statement`).
    """

    guarantee: JsonObject
    headline: str
    parameters: JsonObject = field(default_factory=dict)
    assumed_public: list[Assumption] = field(default_factory=list)
    treated_as_public: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)
    audit_words: str = ""
    threat_model: JsonObject | None = None


@dataclass
class RunContext:
    """What the skeleton built for a method's :meth:`MethodRun.generate`: the inputs, the label space, the
    relation, the keeper, the guard, the prompt log and the backends."""

    method: MethodRun
    inputs: Inputs
    space: LabelSpace
    private_groups: np.ndarray
    relation: NeighbouringRelation
    ledger: Ledger
    keeper: ReleaseKeeper
    guard: PrivateGuard
    prompt_log: PromptLog
    generators: list[Generator]
    built_embedder: Embedder | None  # None for a method that declares it embeds nothing (MethodRun.uses_embedder)

    @property
    def embedder(self) -> Embedder:
        if self.built_embedder is None:
            raise RuntimeError(f"method {self.method.name!r} declares uses_embedder = False, yet asked for one")
        return self.built_embedder

    @property
    def generator(self) -> Generator:
        return self.generators[0]

    @property
    def public(self) -> Corpus | None:
        return self.inputs.public

    # the releases: Δ from the relation, never from the method
    def gaussian(self, key: str, *, mechanism: str, noise_multiplier: float, contribution: Contribution,
                 compute: Callable[[Release], Computed], iteration: int | None = None,
                 description: str = "", meta: JsonObject | None = None,
                 secret_events: Mapping[str, SecretEvent] | None = None) -> dict[str, np.ndarray]:
        """Describe a Gaussian release (Δ = the relation's sensitivity for ``contribution``, noise std σ·Δ), record
        it, then ``compute(release)`` (which reads private data and draws the noise with ``release.noise_std`` /
        ``release.sensitivity``) and keep it."""
        release = gaussian_release(key, mechanism=mechanism, noise_multiplier=noise_multiplier,
                                   contribution=contribution, relation=self.relation, iteration=iteration,
                                   description=description, meta=meta, secret_events=secret_events)
        return self.keeper.release(release, lambda: compute(release))

    def laplace(self, key: str, *, mechanism: str, epsilon: float, contribution: Contribution,
                compute: Callable[[Release], Computed], iteration: int | None = None,
                description: str = "", meta: JsonObject | None = None) -> dict[str, np.ndarray]:
        """Describe a Laplace release (Δ₁ from the relation, scale Δ₁/ε), record it, compute it, keep it."""
        release = laplace_release(key, mechanism=mechanism, epsilon=epsilon, contribution=contribution,
                                  relation=self.relation, iteration=iteration, description=description, meta=meta)
        return self.keeper.release(release, lambda: compute(release))

    def embed_private(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of texts from the private file (float32, one row per text; SecPE's secret-free records too),
        for every method: through the user's private embedding cache (:func:`privtext.embed.private.embed_private`; ``embedder: {private_cache: false}`` turns
        it off), so a later run on the same private file embeds none of it. What the cache did is counted in the
        run's private metrics (``private_embedding_texts``/``cached``/``embedded``/``seconds``). With exact votes
        (``runtime: auto``) the rows keep their source (the array is returned as it is, not copied), so the vote
        can re-decide a record's near-tie with its fp32 vector."""
        m = self.method
        with m.metrics.stage("embedding_private") as st, \
                progress("embedding the private texts", len(texts)) as bar:
            emb = (embed_private(self.embedder, texts) if len(texts)
                   else np.zeros((0, self.embedder.dim), dtype=np.float32))
            bar.update(completed=len(texts))
            st.count("texts", len(texts))
            stats = getattr(self.embedder, "private_stats", None)
            if isinstance(stats, dict):
                for k, v in stats.items():
                    m.metrics.counters[f"private_embedding_{k}"] = round(float(v), 3)
        if len(emb) != len(texts):
            raise ConfigError("embedder returned the wrong number of private embeddings")
        return emb

    def label_counts(self, noise: LabelNoise | None, *, total: int | None = None) -> np.ndarray:
        """Synthetic samples per label group: from public information, or (``label_distribution: dp``) from a DP
        label histogram released with ``noise`` (one count per record: Δ from the relation; clipped at 0 and
        allocated by largest remainder — post-processing)."""
        m = self.method
        config = m.config
        n = config.synthesis.num_samples if total is None else int(total)
        ld = config.synthesis.label_distribution
        space = self.space
        if ld.kind != "dp" or not space.columns:
            w = public_label_weights(config, space, self.public)
            return allocate(w, n, min_each=1 if n >= len(space) else 0)
        if noise is None:
            raise ConfigError(f"method {m.name} cannot release a DP label histogram")
        key = "labels/histogram"
        groups = self.private_groups
        if noise.kind == "gaussian":
            assert noise.sigma is not None
            sigma = noise.sigma

            def compute_g(r: Release) -> Computed:
                noisy, event = dp_label_histogram(groups, len(space), noise_multiplier=sigma,
                                                  sensitivity=r.sensitivity, rng=m.noise_rng(key))
                return {"noisy": noisy}, event

            vals = self.gaussian(key, mechanism="dp_label_histogram", noise_multiplier=sigma,
                                 contribution=ONE_VOTE_L2, compute=compute_g,
                                 description="noisy count of private records per public label group")
        else:
            assert noise.epsilon is not None
            eps = noise.epsilon

            def compute_l(r: Release) -> Computed:
                noisy, event = laplace_label_histogram(groups, len(space), epsilon=eps, sensitivity=r.sensitivity,
                                                       rng=m.noise_rng(key))
                return {"noisy": noisy}, event

            vals = self.laplace(key, mechanism="laplace_label_histogram", epsilon=eps, contribution=ONE_COUNT_L1,
                                compute=compute_l,
                                description="noisy count of private records per public label group (Laplace)")
        from ..privacy.statement import released_number

        m.released["label_histogram"] = {space.key(g): released_number(v) for g, v in enumerate(vals["noisy"])}
        return allocate(np.clip(vals["noisy"], 0, None), n, min_each=1 if n >= len(space) else 0)


class Method(Protocol):
    """What the runner needs of a method: a registry name, an options model for its config section, static
    checks, the corpora read once (``prepare``), and a constructor over (config, run directory) whose ``execute``
    writes the run. Every registered
    method is a :class:`MethodRun` subclass and runs on its skeleton."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]]
    description: ClassVar[MethodDescription]

    @classmethod
    def check_learning(cls, config: Config, options: BaseModel) -> None: ...

    @classmethod
    def check_config(cls, config: Config, options: BaseModel) -> None: ...

    @classmethod
    def parse_options(cls, config: Config) -> BaseModel: ...

    @classmethod
    def prepare(cls, config: Config) -> Prepared: ...

    def __init__(self, config: Config, run: RunDir, *,
                 callbacks: Sequence[Callable[[IterationResult], None]] = ()) -> None: ...

    def execute(self, prepared: Prepared | None = None) -> Path: ...


class MethodRun:
    """One run of a method in a run directory (fresh or resumed). Subclasses write :meth:`generate` and
    :meth:`statement_parts` and, where they need to, the other hooks below; never :meth:`execute`."""

    name: ClassVar[str] = "method"
    #: what the shared code needs to know of the method (:class:`MethodDescription`); every method declares one
    description: ClassVar[MethodDescription]
    #: the model of the method's own config section (``config.<description.section>``)
    Options: ClassVar[type[BaseModel]] = BackendOptions
    #: whether :meth:`generate` embeds text; the skeleton builds (and loads) the embedder only where it does
    uses_embedder: ClassVar[bool] = True
    #: the method's settings for ``privtext demo`` (the clinic notes, offline backends): top-level configuration
    #: sections that replace the demo's (``None`` removes one); ``None``: the demo does not offer the method. The
    #: budget follows the description's guarantee and a secret-protection method gets the demo's secret lists as
    #: its detector (privtext.demo)
    demo: ClassVar[JsonObject | None] = None

    @classmethod
    def parse_options(cls, config: Config) -> BaseModel:
        """The method's section of ``config`` validated by :attr:`Options` (errors name the key)."""
        section = cls.description.section
        return parse_options(cls.Options, config.section(section), where=section)

    @classmethod
    def learns_from_votes(cls, options: BaseModel) -> tuple[bool, str]:
        """Whether ``evolution.learn`` may train the generator on this method's releases, and (where it may not)
        why, for the error: learning trains on released votes over generated candidates, so by default a method
        learns when it releases votes (:attr:`MethodDescription.votes`). A method whose options change that
        overrides this."""
        d = cls.description
        return d.votes, "" if d.votes else f"it releases {d.release_words}, no votes over generated candidates"

    @classmethod
    def check_learning(cls, config: Config, options: BaseModel) -> None:
        """``evolution.learn`` and ``evolution.final`` checked against :meth:`learns_from_votes` and the generators
        (:func:`privtext.learn.options.check_learn_config`), before any run directory exists; the runner calls it
        before :meth:`check_config`."""
        from ..learn.options import check_learn_config

        learns, why = cls.learns_from_votes(options)
        check_learn_config(config, learns=learns, method=cls.name, why=why)

    @classmethod
    def check_config(cls, config: Config, options: BaseModel) -> None:
        """Static checks of a configuration for this method (budget form, detectors that must load), run before
        any run directory exists, after :meth:`check_learning`. Raise :class:`ConfigError` naming the key."""

    @classmethod
    def prepare(cls, config: Config) -> Prepared:
        """Read the run's corpora (:func:`read_inputs`), once per run: the pre-run check
        (:func:`privtext.runner.preflight`) calls this before the run directory exists and hands the result to
        :meth:`execute`; a resumed run calls it from :meth:`execute`. The streams are the run's own: the
        ``data.max_private`` sample from the privacy stream ``max_private`` (:meth:`noise_rng`), the
        ``data.max_public`` sample from the public stream ``max_public`` (:meth:`rng`). Hook: a method whose
        private records come from elsewhere (``parties.files``: :class:`privtext.methods.parties.HoldsParties`)
        reads them here."""
        t0 = time.perf_counter()
        private_rng, public_rng = read_streams(config)
        inputs = read_inputs(config, subsample_rng=private_rng, public_rng=public_rng)
        return Prepared(inputs, time.perf_counter() - t0)

    #: the budget the ledger enforces (:meth:`budget_of`), set by :meth:`execute` before the first release
    budget: Budget

    def __init__(self, config: Config, run: RunDir, *, callbacks: Sequence[Callable[[IterationResult], None]] = ()):
        self.config = config
        self.run = run
        self.options = self.parse_options(config)
        #: called after every iteration with a :class:`privtext.engine.loop.IterationResult`
        self.callbacks = tuple(callbacks)
        self.metrics = StageMetrics()
        self._wall_before = 0.0
        self._llm_before: dict[str, float] = {}
        if run.metrics.exists():  # resumed: keep the earlier processes' times and counts
            try:
                prev = json.loads(run.metrics.read_text(encoding="utf-8"))
                self.metrics = StageMetrics.from_dict(prev)
                self._wall_before = float(prev.get("wall_seconds", 0.0))
                self._llm_before = {k: v for k, v in prev.get("counters", {}).items() if k.startswith("llm_")}
            except (OSError, ValueError):
                pass
        self.seed = config.seed
        self.secure = config.privacy.secure
        self.label_columns = tuple(config.data.label_columns)
        self.privacy_notes: JsonObject = {}
        self.subsampled = False
        #: the run's neighbouring relation (set by the skeleton before the first release)
        self.relation: NeighbouringRelation = NeighbouringRelation.add_remove()
        #: noisy values published in privacy.json (rounded; see privtext.privacy.statement)
        self.released: JsonObject = {}
        #: exact statistics of the private data (private diagnostics: never in a shareable output)
        self.diagnostics: JsonObject = {}
        #: the private records' ids (the prompt audit's findings name records by id in private/diagnostics.json)
        self._record_ids: tuple[str, ...] | None = None

    # ------------------------------------------------------------------ helpers
    def log(self, msg: str) -> None:
        self.run.log(msg)

    def rng(self, *keys: object) -> np.random.Generator:
        """Non-private randomness (generation, tie-breaks, public k-means): seeded unless ``privacy.secure``."""
        return derive(self.seed, *keys, secure=self.secure)

    def noise_rng(self, *keys: object) -> np.random.Generator:
        """Privacy randomness of one release (noise, private sampling): a ChaCha20 CSPRNG keyed by OS entropy,
        or derived from the seed when ``privacy.reproducible_noise`` (NOT private; see privtext.rng)."""
        return noise_rng(self.seed, *keys, reproducible=self.config.privacy.reproducible_noise)

    def diagnostic(self, name: str, key: str | None, value: object) -> None:
        """Keep an exact private statistic for ``private/diagnostics.json`` (never for the release)."""
        if key is None:
            self.diagnostics[name] = value
        else:
            self.diagnostics.setdefault(name, {})[key] = value

    # ------------------------------------------------------------------ hooks (a method overrides these)
    def budget_of(self) -> Budget:
        """The budget the ledger enforces (default: the configured one)."""
        from ..privacy import Budget

        return Budget.from_config(self.config.privacy)

    def load_inputs(self, prepared: Prepared | None = None) -> Inputs:
        """The run's corpora: ``prepared`` (what the pre-run check read), else read now (:meth:`prepare`)."""
        d = self.config.data
        prepared = prepared if prepared is not None else self.prepare(self.config)
        self.metrics.add("loading", prepared.seconds)
        inputs = prepared.inputs
        private, public, heldout = inputs.private, inputs.public, inputs.heldout
        self.subsampled = bool(d.max_private and inputs.subsampled)
        self.log(f"data: {len(private)} private records, {len(public) if public else 0} public"
                 + (f", {len(heldout)} held out" if heldout else ""))
        self.diagnostic("records", None, {"private": len(private), "public": len(public) if public else 0,
                                          "heldout": len(heldout) if heldout else 0})
        return Inputs(private=private, public=public, heldout=heldout, subsampled=inputs.subsampled,
                      party_of=inputs.party_of)

    def split_data(self, inputs: Inputs) -> Inputs:
        """Hook: what the method makes of its corpora before the label space and the relation are fixed, returned
        (not kept on ``self``): SecPE moves the secret-free records to the public side, a method that detects
        secrets returns them in ``Inputs.secrets`` (the guard scans for their values). Others keep the corpora as
        read."""
        return inputs

    def neighbouring(self, inputs: Inputs) -> NeighbouringRelation:
        """Hook: the run's neighbouring relation, fixed before the first release (default add/remove one)."""
        return NeighbouringRelation.add_remove()

    def generator_configs(self) -> list[GeneratorConfig]:
        """Hook: the generator sections the run builds (one by default; WASP: several)."""
        return [self.config.generator]

    def generate(self, ctx: RunContext) -> Synthetic:
        """Hook: the method's generation policy — the only place a method touches private data, and only through
        ``ctx.gaussian`` / ``ctx.laplace`` releases."""
        raise NotImplementedError

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """Hook: what the method says of its guarantee (:class:`StatementParts`). Only configured parameters,
        released noisy values and listed assumptions may appear (see :mod:`privtext.privacy.statement`)."""
        raise NotImplementedError

    def statement_parameters(self) -> JsonObject:
        """The configured run parameters listed in ``privacy.json`` (the evolution loop's, for PE methods)."""
        ev = self.config.evolution
        syn = self.config.synthesis
        return {"iterations": ev.iterations, "num_samples": syn.num_samples, "variations": ev.variations,
                "selection": ev.selection, "label_distribution": syn.label_distribution.kind,
                "calibration": self.config.privacy.calibration}

    def metrics_extra(self) -> JsonObject:
        """Hook: more private metrics for ``private/metrics.json`` (WASP: its rounds)."""
        return {}

    # ------------------------------------------------------------------ backends
    def build_backends(self, public: Corpus | None, guard: PrivateGuard,
                       prompt_log: PromptLog) -> tuple[list[Generator], Embedder | None]:
        from ..embed import build_embedder
        from ..generate import GeneratorContext, build_generator

        gens: list[Generator] = []
        with self.metrics.stage("setup_generator"):
            for cfg in self.generator_configs():
                gens.append(build_generator(cfg, GeneratorContext(
                    public=public, label_columns=self.label_columns, prompt_log=prompt_log,
                    family=cfg.prompt_family, guard=guard, seed=self.seed, cache_dir=self.run.cache)))
        if not self.uses_embedder:
            return gens, None
        ec = self.config.embedder
        cache = (Path(ec.cache_dir) if ec.cache_dir else self.run.embed_cache) if ec.cache else None
        emb = build_embedder(ec, cache_dir=cache, cluster=self.config.cluster)
        return gens, emb

    # ------------------------------------------------------------------ the run (every method's)
    def execute(self, prepared: Prepared | None = None) -> Path:
        """The run skeleton (module docstring). Methods do not override this. ``prepared``: the corpora the
        pre-run check read (:meth:`prepare`; read here when not given, as on resume)."""
        from ..privacy import Ledger

        t_start = time.perf_counter()
        run = self.run
        inputs = self.split_data(self.load_inputs(prepared))
        if inputs.heldout is not None and not run.heldout.exists():
            write_corpus(inputs.heldout, run.heldout)
        space = label_space(self.config, inputs.public)
        groups, outside = private_groups(self.config, space, inputs.private)
        if outside:
            self.log(f"{outside} private records have label combinations absent from the public label space; "
                     "they cast no vote")
        self.diagnostic("private_records_outside_label_space", None, outside)
        self.relation = self.neighbouring(inputs)
        guard = PrivateGuard(inputs.private.texts, inputs.public.texts if inputs.public else (),
                             secret_values=inputs.secrets, state_dir=run.guard_state)
        guard.add_public(public_prompt_texts(self.config, space), source="the prompt templates and label values")
        self._record_ids = inputs.private.ids  # the findings name records by id (private/diagnostics.json)
        self.budget = self.budget_of()
        ledger = Ledger.load(run.ledger, self.budget)
        keeper = ReleaseKeeper(ledger, lambda r: run.release_path(r.key, r.iteration), self.log)
        prompt_log = PromptLog(run.prompts)
        prompt_log.observer = guard.note_generated  # text a generator wrote is public by provenance (guard.py)
        gens: list[Generator] = []
        try:
            gens, emb = self.build_backends(inputs.public, guard, prompt_log)
            ctx = RunContext(method=self, inputs=inputs, space=space, private_groups=groups, relation=self.relation,
                             ledger=ledger, keeper=keeper, guard=guard, prompt_log=prompt_log, generators=gens,
                             built_embedder=emb)
            with display():
                out = self.generate(ctx)
        finally:
            prompt_log.close()
            guard.close()
            self._save_metrics(t_start, gens)
        synthetic = Corpus(
            ids=tuple(f"syn-{i}" for i in range(len(out.texts))), texts=tuple(out.texts),
            labels={c: tuple(space.values[g][j] for g in out.groups) for j, c in enumerate(space.columns)},
            name="synthetic")
        write_corpus(synthetic, run.synthetic, include_ids=True)
        if out.keyphrases is not None:
            atomic_write_text(run.keyphrases, "".join(
                dumps({"id": synthetic.ids[i], "keyphrases": list(seq),
                       **{c: synthetic.labels[c][i] for c in space.columns}}) + "\n"
                for i, seq in enumerate(out.keyphrases)))
        audit = guard.scan(rec for rec in read_jsonl(run.prompts))
        output_audit = guard.scan_texts(synthetic.texts)
        self.write_diagnostics(ledger, audit, output_audit)
        atomic_write_json(run.privacy, self.privacy_statement(ledger, audit, output_audit))
        self._save_metrics(t_start, gens, final=True, records=len(synthetic))
        run.log(f"done: {len(synthetic)} synthetic records; prompt audit clean={audit.clean}; output audit "
                f"clean={output_audit.clean}")
        say(f"[green]done[/]: {len(synthetic)} records → {run.synthetic}")
        return run.root

    # ------------------------------------------------------------------ the statement (release) and diagnostics
    def privacy_statement(self, ledger: Ledger, audit: AuditResult,
                          output_audit: AuditResult | None = None) -> JsonObject:
        """What ``privacy.json`` holds: the method's :meth:`statement_parts` with what every run states (the
        releases, the noise source, the audits, the coverage of a subsample, the files), the headline made NOT
        PRIVATE after reproducible noise, a release without noise or a failed audit."""
        from ..privacy.events import event_to_dict
        from ..privacy.statement import (
            PRIVATE_FOLDER_WORDS,
            PUBLIC_CORPUS_ASSUMPTION,
            RUN_FILES_RELEASE,
            PrivacyStatement,
        )

        parts = self.statement_parts(ledger)
        pc = self.config.privacy
        reproducible = pc.reproducible_noise
        # a release without noise that touches private data (SecPE's clusterings with no secret found name no
        # secret group and hold no private record: they are not private releases)
        no_noise = any(e.release.noise_std == 0 and (e.release.secret_events is None or e.release.secret_events)
                       for e in ledger.entries)
        headline = parts.headline
        private = True
        if reproducible:
            private = False
            headline = (f"NOT PRIVATE: the noise was derived from seed {self.seed} (privacy.reproducible_noise: "
                        "true), so anyone who reads the configuration can recompute and remove it. With noise from "
                        f"OS entropy this configuration would give: {headline}")
        elif no_noise:
            private = False
            headline = f"NOT PRIVATE: at least one release was made without noise (σ = 0). Nominal: {headline}"
        if headline.startswith("NOT PROVEN"):
            private = False
        if not audit.clean:
            private = False
            headline = ("NOT PRIVATE: the prompt audit found private text that no public source explains in prompts "
                        "sent to a generator (`privtext diagnose RUN --prompts` shows it; docs/privacy.md says what "
                        "to do). No guarantee holds for this run; without that text its noisy releases would give: "
                        f"{headline}")
        output_clean = output_audit is None or output_audit.clean
        if not output_clean:
            private = False
            headline = ("NOT PRIVATE: a detected secret value that no public text holds appears in the synthetic "
                        "output (counts in private/diagnostics.json). No guarantee holds for this run; without it "
                        f"its noisy releases would give: {headline}")
        noise = {
            "source": ("derived from the seed (reproducible, NOT private)" if reproducible else
                       "ChaCha20 CSPRNG keyed with 256 bits of OS entropy per release; keys are never stored"),
            "reproducible": reproducible,
            "words": ("Noise: ChaCha20 (a cryptographically secure generator) keyed with fresh OS entropy for "
                      "every release; neither key nor raw draws leave private/." if not reproducible else ""),
        }
        audit_words = parts.audit_words or (
            "Every prompt sent to a generator was checked for private text that no public source explains (whole "
            "private records, 8-word sequences of a private record, detected secret values): none was found."
            if audit.clean else
            "The prompt audit FOUND private text in prompts (counts and lines in private/diagnostics.json).")
        if not audit.clean and parts.audit_words:
            audit_words = "The prompt audit FOUND private text in prompts (counts and lines in private/diagnostics.json)."
        releases = [{"key": e.key, "mechanism": e.release.mechanism, "iteration": e.release.iteration,
                     "noise_std": e.release.noise_std, "sensitivity": e.release.sensitivity,
                     "event": event_to_dict(e.release.event), "description": e.release.description}
                    for e in ledger.entries]
        guarantee = dict(parts.guarantee)
        guarantee.setdefault("neighbouring_relation", self.relation.words())
        if parts.threat_model:
            guarantee["threat_model"] = parts.threat_model
        parameters = {**self.statement_parameters(), **parts.parameters}
        picked = self.config.synthesis.label_distribution.picked
        if picked and self.label_columns:  # kind: auto, resolved by the runner (privtext.runner.preflight)
            parameters["label_distribution_picked"] = picked
        treated = list(parts.treated_as_public)
        if self.config.data.public:
            treated.append(PUBLIC_CORPUS_ASSUMPTION)
        st = PrivacyStatement(
            method=self.name, method_description=self.description.to_dict(), private=private, headline=headline,
            guarantee=guarantee,
            parameters=parameters, treated_as_public=treated, coverage=self._coverage(parts),
            assumed_public=list(parts.assumed_public), released=dict(self.released),
            releases=releases, noise=noise,
            prompt_audit={"passed": audit.clean, "words": audit_words,
                          "output_passed": output_clean,
                          "output_words": ("The synthetic text was checked for every detected secret value that no "
                                           "public text holds: none was found." if output_clean else
                                           "The synthetic text HOLDS a detected secret value that no public text "
                                           "holds (counts in private/diagnostics.json).")},
            files={**RUN_FILES_RELEASE, "private/": PRIVATE_FOLDER_WORDS},
        )
        return st.to_dict()

    def _coverage(self, parts: StatementParts) -> list[str]:
        cov = list(parts.coverage)
        if self.subsampled:
            cov.append(f"The guarantee covers the random sample of {self.config.data.max_private} private records "
                       "the run used (data.max_private), as a data set on its own: the sample was drawn from OS "
                       "entropy and is not released, but no guarantee is stated for adding or removing a record "
                       "of the input file.")
        return cov

    def write_diagnostics(self, ledger: Ledger | None, audit: AuditResult | None = None,
                          output_audit: AuditResult | None = None) -> None:
        """Exact private statistics for ``private/diagnostics.json`` (mode 0600; never shared)."""
        d = {"method": self.name, **self.diagnostics, "notes": self.privacy_notes,
             "ledger": ledger.account() if ledger is not None and len(ledger) else None}
        if audit is not None:
            d["prompt_audit"] = audit.to_dict()
            ids = self._record_ids
            for f in d["prompt_audit"].get("findings", []):
                if f.get("record") is not None and ids is not None:
                    f["record_id"] = ids[f["record"]]
        if output_audit is not None:
            d["output_audit"] = output_audit.to_dict()
        atomic_write_json(self.run.diagnostics, d)

    def _save_metrics(self, t_start: float, gens: Sequence[Generator], *, final: bool = False,
                      records: int | None = None) -> None:
        from ..generate.base import GenerationStats

        d = self.metrics.to_dict()
        d["method"] = self.name
        d["wall_seconds"] = round(self._wall_before + time.perf_counter() - t_start, 3)
        d["resumed"] = self._wall_before > 0
        total = GenerationStats()
        for g in gens:
            stats = getattr(g, "stats", None)
            if stats is not None:
                total.merge(stats)
        if gens:
            for k in ("calls", "prompts", "prompt_tokens", "completion_tokens", "texts", "retries"):
                key = f"llm_{k}"
                d["counters"][key] = self._llm_before.get(key, 0) + getattr(total, k, 0)
        if records is not None:
            d["counters"]["synthetic_records"] = records
        d["complete"] = final
        d.update(self.metrics_extra())
        atomic_write_json(self.run.metrics, d)


# ------------------------------------------------------------------------------------------------ evolution


class EvolutionMethod(MethodRun):
    """A method whose generation is the Private Evolution loop on the engine (Aug-PE, SecPE): it supplies a
    scorer (the one step that reads private data) and how the label histogram is released, if it can be."""

    def scorer(self, ctx: RunContext) -> tuple[Scorer, LabelNoise | None]:
        """Hook: (the scorer, how a DP label histogram is released or None when the method cannot release one)."""
        raise NotImplementedError

    def generate(self, ctx: RunContext) -> Synthetic:
        from ..engine.loop import Engine

        scorer, label_noise = self.scorer(ctx)
        counts = ctx.label_counts(label_noise)
        space = ctx.space
        shown = ", ".join(f"{space.key(g)}={c}" for g, c in list(enumerate(counts))[:12])
        more = f", ... ({len(counts)} label groups)" if len(counts) > 12 else ""
        self.log(f"samples per label: {shown}{more}")
        engine = Engine(run=self.run, evolution=self.config.evolution, generator=ctx.generator,
                        embedder=ctx.embedder, scorer=scorer, labels=space, counts=counts, metrics=self.metrics,
                        seed=self.seed, secure=self.secure, log=self.log, callbacks=self.callbacks)
        final, _ = engine.run()
        return Synthetic(texts=list(final.texts), groups=np.asarray(final.group, dtype=np.int64))


def public_prompt_texts(config: Config, space: LabelSpace) -> list[str]:
    """Public text a prompt may hold besides the public corpus (the guard's public sources): the prompt
    templates (shipped and configured families) and the label columns and values of the run's label space."""
    from ..generate.prompts import template_texts

    gens = config.generators or [config.generator]
    texts = template_texts([g.prompt_family for g in gens])
    texts.extend(space.columns)
    texts.extend(v for values in space.values for v in values)
    return texts


def _has_labels(corpus: Corpus | None, columns: Sequence[str]) -> bool:
    return corpus is not None and all(c in corpus.labels for c in columns)


def _seed_int(seed: int | None) -> int:
    return 0 if seed is None else int(seed)


def check_nonempty(corpus: Corpus, what: str) -> None:
    if len(corpus) == 0:
        raise DataError(f"{what} is empty")


__all__ = ["EvolutionMethod", "Inputs", "JsonObject", "LabelNoise", "Method", "MethodRun", "Prepared", "RunContext",
           "StatementParts", "Synthetic", "check_nonempty", "label_space", "private_groups", "public_label_weights",
           "read_inputs", "read_public", "read_streams",
           "resolve_label_distribution"]
