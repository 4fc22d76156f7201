"""What every method shares: loading data, the label plan, backends, the ledger and the run directory's files.

A method subclasses :class:`MethodRun` and implements :meth:`MethodRun.prepare_privacy` (calibrate noise, build
the scorer) and, if it needs to, :meth:`MethodRun.split_data` (SecPE decides public/private by secrets).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
from pydantic import BaseModel

from ..atomicio import PromptLog, atomic_write_json, read_jsonl
from ..backends import BackendOptions, parse_options
from ..config import Config
from ..data import Corpus, load_corpus, split_corpus, write_corpus
from ..data.labels import LabelSpace
from ..embed.base import Embedder
from ..engine.loop import Engine, Scorer
from ..errors import ConfigError, DataError
from ..generate.base import Generator
from ..guard import PrivateGuard
from ..mechanisms.labels import allocate, dp_label_histogram
from ..privacy.events import gaussian_event
from ..privacy.release import Release, ReleaseKeeper
from ..progress import say
from ..rng import derive, noise_rng
from ..rundir import RunDir, StageMetrics


@dataclass
class Inputs:
    private: Corpus
    public: Corpus | None
    heldout: Corpus | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_inputs(config: Config, *, subsample_rng: Callable[[], np.random.Generator],
                public_rng: Callable[[], np.random.Generator]) -> Inputs:
    """Load the corpora a configuration names: the private corpus (a uniform ``data.max_private`` sample drawn with
    ``subsample_rng`` — privacy randomness), the public corpus minus its held-out slice, at most
    ``data.max_public`` of it. Typed errors name the file, column or value. Used by the run and by the runner's
    pre-flight check (which reads the data before any run directory exists)."""
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
    public = heldout = None
    if d.public:
        public = load_corpus(d.public, text_column=d.public_text_column or d.text_column,
                             label_columns=d.label_columns, name="public",
                             optional_labels=d.label_values is not None)
        if d.public_holdout:
            ho = d.public_holdout
            n_ho = round(ho * len(public)) if isinstance(ho, float) and ho < 1 else int(ho)
            if not 0 < n_ho < len(public):
                raise ConfigError(f"data.public_holdout={ho} leaves no public text ({len(public)} records)")
            public, heldout = split_corpus(public, [len(public) - n_ho, n_ho], seed=_seed_int(config.seed))
        if d.max_public and len(public) > d.max_public:
            idx = np.sort(public_rng().choice(len(public), d.max_public, replace=False))
            public = public.subset(idx)
    return Inputs(private=private, public=public, heldout=heldout, extra={"subsampled": subsampled})


class Method(Protocol):
    """What the runner needs of a method: a registry name, an options model for its config section, and a
    constructor over (config, run directory) whose :meth:`execute` writes the run and returns its folder.
    :class:`MethodRun` implements it for the evolution methods (Aug-PE, SecPE); a method with another loop
    (DP-KPS: one prompt per record) implements it directly."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]]

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        """Static checks of a configuration for this method (budget form, detectors that must load), run before
        any run directory exists. Raise :class:`ConfigError` naming the key."""

    @classmethod
    def parse_options(cls, config: Config) -> Any: ...

    def __init__(self, config: Config, run: RunDir, *, callbacks: Sequence[Callable[[Any], None]] = ()) -> None: ...

    def execute(self) -> Path: ...


class MethodRun:
    """One run of a method in a run directory (fresh or resumed)."""

    name: ClassVar[str] = "method"
    #: the model of the method's own config section (``config.<name>``)
    Options: ClassVar[type[BaseModel]] = BackendOptions

    @classmethod
    def parse_options(cls, config: Config) -> Any:
        """The method's section of ``config`` validated by :attr:`Options` (errors name the key)."""
        section = getattr(config, cls.name, None)
        raw = section.options() if section is not None else {}
        return parse_options(cls.Options, raw, where=cls.name)

    def __init__(self, config: Config, run: RunDir, *, callbacks: Sequence[Callable[[Any], None]] = ()):
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
        self.privacy_notes: dict[str, Any] = {}
        self.subsampled = False
        #: noisy values published in privacy.json (rounded; see privtext.privacy.statement)
        self.released: dict[str, Any] = {}
        #: exact statistics of the private data (private diagnostics: never in a shareable output)
        self.diagnostics: dict[str, Any] = {}
        #: σ·Δ of the DP label histogram is σ_label·label_sensitivity (Aug-PE's secret-group mode sets Δ = k)
        self.label_sensitivity = 1.0

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

    def diagnostic(self, name: str, key: str | None, value: Any) -> None:
        """Keep an exact private statistic for ``private/diagnostics.json`` (never for the release)."""
        if key is None:
            self.diagnostics[name] = value
        else:
            self.diagnostics.setdefault(name, {})[key] = value

    # ------------------------------------------------------------------ data
    def load_inputs(self) -> Inputs:
        d = self.config.data
        with self.metrics.stage("loading"):
            inputs = read_inputs(self.config, subsample_rng=lambda: self.noise_rng("max_private"),
                                 public_rng=lambda: self.rng("max_public"))
        private, public, heldout = inputs.private, inputs.public, inputs.heldout
        self.subsampled = bool(d.max_private and inputs.extra.get("subsampled"))
        self.log(f"data: {len(private)} private records, {len(public) if public else 0} public"
                 + (f", {len(heldout)} held out" if heldout else ""))
        self.diagnostic("records", None, {"private": len(private), "public": len(public) if public else 0,
                                          "heldout": len(heldout) if heldout else 0})
        return Inputs(private=private, public=public, heldout=heldout)

    def split_data(self, inputs: Inputs) -> Inputs:
        """Hook: SecPE moves secret-free records to the public side. Aug-PE keeps the split as configured."""
        return inputs

    def label_space(self, public: Corpus | None) -> LabelSpace:
        if not self.label_columns:
            return LabelSpace.unlabeled()
        ld = self.config.evolution.label_distribution
        declared = self.config.data.label_values
        if declared is not None:  # the public schema: every combination of the declared values
            import itertools

            values = tuple(itertools.product(*(tuple(declared[c]) for c in self.label_columns)))
            if ld.kind == "public" and not _has_labels(public, self.label_columns):
                raise ConfigError(
                    "evolution.label_distribution.kind=public needs labelled public text, but the public corpus has "
                    f"no column(s) {list(self.label_columns)}; with data.label_values use uniform, given or dp")
            return LabelSpace(self.label_columns, values)
        if ld.kind == "given":
            if not ld.weights:
                raise ConfigError("evolution.label_distribution.kind=given needs weights: {'a|b': w, ...}")
            values = tuple(tuple(k.split("|")) for k in ld.weights)
            bad = [k for k, v in zip(ld.weights, values, strict=True) if len(v) != len(self.label_columns)]
            if bad:
                raise ConfigError(f"label weights keys {bad} do not have {len(self.label_columns)} '|'-separated parts")
            return LabelSpace(self.label_columns, values)
        if public is None:
            raise ConfigError(
                "labelled runs need the label values from public information: give data.public (with the label "
                "columns) or evolution.label_distribution: {kind: given, weights: {...}}"
            )
        values = tuple(sorted(set(public.label_tuples(self.label_columns))))
        return LabelSpace(self.label_columns, values)

    def private_groups(self, space: LabelSpace, private: Corpus) -> np.ndarray:
        """The label group of each private record (−1: outside the public label space, casts no vote). With
        ``data.label_values`` a record outside the declared schema is a :class:`DataError`."""
        groups = (space.groups_of(private.label_tuples(space.columns)) if space.columns
                  else np.zeros(len(private), dtype=np.int64))
        outside = int((groups < 0).sum())
        if outside and self.config.data.label_values is not None:
            # the declared values are public, an undeclared one is private: neither it nor the count is printed
            raise DataError("a private record has a label not in data.label_values: declare every label value "
                            f"of the columns {list(space.columns)} (values as they appear in the private file)")
        if outside:
            self.log(f"{outside} private records have label combinations absent from the public label space; "
                     "they cast no vote")
        self.diagnostic("private_records_outside_label_space", None, outside)
        return groups

    def public_label_weights(self, space: LabelSpace, public: Corpus | None) -> np.ndarray:
        ld = self.config.evolution.label_distribution
        if not space.columns:
            return np.ones(1)
        if ld.kind == "uniform":
            return np.ones(len(space))
        if ld.kind == "given":
            assert ld.weights is not None
            missing = [" | ".join(v) for v in space.values
                       if " | ".join(v) not in ld.weights and "|".join(v) not in ld.weights]
            if missing:
                raise ConfigError(f"evolution.label_distribution.weights has no weight for {missing[:5]}")
            w = np.array([float(ld.weights[" | ".join(v)] if " | ".join(v) in ld.weights else ld.weights["|".join(v)])
                          for v in space.values])
            if (w < 0).any():
                raise ConfigError(f"label weights must be ≥ 0, got {list(w)}")
            return w
        assert public is not None
        groups = space.groups_of(public.label_tuples(space.columns))
        return np.bincount(groups[groups >= 0], minlength=len(space)).astype(np.float64)

    def label_counts(self, space: LabelSpace, public: Corpus | None, private_groups: np.ndarray,
                     keeper: ReleaseKeeper, label_sigma: float | None) -> np.ndarray:
        n = self.config.evolution.num_samples
        ld = self.config.evolution.label_distribution
        if ld.kind != "dp" or not space.columns:
            w = self.public_label_weights(space, public)
            return allocate(w, n, min_each=1 if n >= len(space) else 0)
        if label_sigma is None:
            raise ConfigError(f"method {self.name} cannot release a DP label histogram")
        key = "labels/histogram"
        delta = float(self.label_sensitivity)
        release = Release(key=key, mechanism="dp_label_histogram", event=gaussian_event(label_sigma),
                          noise_std=label_sigma * delta, sensitivity=delta, iteration=None,
                          description=f"noisy count of private records per public label group (Δ={delta:g})")

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            noisy, event = dp_label_histogram(private_groups, len(space), noise_multiplier=label_sigma,
                                              sensitivity=delta, rng=self.noise_rng(key))
            return {"noisy": noisy}, event

        vals = keeper.release(release, compute)
        from ..privacy.statement import released_number

        self.released["label_histogram"] = {space.key(g): released_number(v) for g, v in enumerate(vals["noisy"])}
        return allocate(np.clip(vals["noisy"], 0, None), n, min_each=1 if n >= len(space) else 0)

    # ------------------------------------------------------------------ backends
    def build_backends(self, public: Corpus | None, guard: PrivateGuard,
                       prompt_log: PromptLog) -> tuple[Generator, Embedder]:
        from ..embed import build_embedder
        from ..generate import GeneratorContext, build_generator

        with self.metrics.stage("setup_generator"):
            gen = build_generator(
                self.config.generator,
                GeneratorContext(public=public, label_columns=self.label_columns, prompt_log=prompt_log,
                                 family=self.config.generator.prompt_family, guard=guard, seed=self.seed,
                                 cache_dir=self.run.cache),
            )
        ec = self.config.embedder
        cache = (Path(ec.cache_dir) if ec.cache_dir else self.run.embed_cache) if ec.cache else None
        emb = build_embedder(ec, cache_dir=cache, cluster=self.config.cluster)
        return gen, emb

    # ------------------------------------------------------------------ method hooks
    def prepare_privacy(self, inputs: Inputs, space: LabelSpace, private_groups: np.ndarray, embedder: Embedder,
                        keeper: ReleaseKeeper) -> tuple[Scorer, float | None]:
        """Return (the scorer, σ of a DP label histogram or None when the method cannot release one)."""
        raise NotImplementedError

    def make_ledger(self) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------------ the run
    def execute(self) -> Path:
        t_start = time.perf_counter()
        run = self.run
        inputs = self.split_data(self.load_inputs())
        if inputs.heldout is not None and not run.heldout.exists():
            write_corpus(inputs.heldout, run.heldout)
        public = inputs.public
        space = self.label_space(public)
        private_groups = self.private_groups(space, inputs.private)
        guard = PrivateGuard(inputs.private.texts, public.texts if public else ())
        ledger = self.make_ledger()
        keeper = ReleaseKeeper(ledger, lambda r: run.release_path(r.key, r.iteration), self.log)
        prompt_log = PromptLog(run.prompts)
        try:
            gen, emb = self.build_backends(public, guard, prompt_log)
            scorer, label_sigma = self.prepare_privacy(inputs, space, private_groups, emb, keeper)
            counts = self.label_counts(space, public, private_groups, keeper, label_sigma)
            shown = ", ".join(f"{space.key(g)}={c}" for g, c in list(enumerate(counts))[:12])
            more = f", ... ({len(counts)} label groups)" if len(counts) > 12 else ""
            self.log(f"samples per label: {shown}{more}")
            engine = Engine(run=run, evolution=self.config.evolution, generator=gen, embedder=emb, scorer=scorer,
                            labels=space, counts=counts, metrics=self.metrics, seed=self.seed,
                            secure=self.secure, log=self.log, callbacks=self.callbacks)
            final, summaries = engine.run()
        finally:
            prompt_log.close()
            self._save_metrics(t_start, locals().get("gen"))
        out = Corpus(
            ids=tuple(f"syn-{i}" for i in range(len(final))),
            texts=tuple(final.texts),
            labels={c: tuple(space.values[g][j] for g in final.group) for j, c in enumerate(space.columns)},
            name="synthetic",
        )
        write_corpus(out, run.synthetic, include_ids=True)
        audit = guard.scan(rec for rec in read_jsonl(run.prompts))
        self.write_diagnostics(ledger, audit)
        statement = self.privacy_statement(ledger, audit)
        atomic_write_json(run.privacy, statement)
        self._save_metrics(t_start, gen, final=True, records=len(out))
        run.log(f"done: {len(out)} synthetic records; prompt audit clean={audit.clean}")
        say(f"[green]done[/]: {len(out)} records → {run.synthetic}")
        return run.root

    # ------------------------------------------------------------------ the statement (release) and diagnostics
    def statement_parts(self, ledger: Any) -> dict[str, Any]:
        """Method hook: ``guarantee`` (dict), ``headline`` (the guarantee in one sentence, as if private),
        ``parameters``, ``assumed_public`` (list of :class:`~privtext.privacy.statement.Assumption`),
        ``treated_as_public`` and ``coverage`` (lists of sentences). Only configured parameters, released noisy
        values and listed assumptions may appear (see :mod:`privtext.privacy.statement`)."""
        raise NotImplementedError

    def statement_parameters(self) -> dict[str, Any]:
        """The configured run parameters listed in ``privacy.json`` (the evolution loop's, for PE methods)."""
        ev = self.config.evolution
        return {"iterations": ev.iterations, "num_samples": ev.num_samples, "variations": ev.variations,
                "selection": ev.selection, "label_distribution": ev.label_distribution.kind,
                "calibration": self.config.privacy.calibration}

    def privacy_statement(self, ledger: Any, audit: Any) -> dict[str, Any]:
        from ..privacy.events import event_to_dict
        from ..privacy.statement import PRIVATE_FOLDER_WORDS, RUN_FILES_RELEASE, PrivacyStatement

        parts = self.statement_parts(ledger)
        pc = self.config.privacy
        reproducible = pc.reproducible_noise
        # a release without noise that touches private data (SecPE's clusterings with no secret found name no
        # secret group and hold no private record: they are not private releases)
        no_noise = any(e.release.noise_std == 0 and (e.release.secret_events is None or e.release.secret_events)
                       for e in ledger.entries)
        headline = parts["headline"]
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
            headline = ("NOT PRIVATE: the prompt audit found private text in prompts sent to a generator "
                        f"(details in private/diagnostics.json). {headline}")
        noise = {
            "source": ("derived from the seed (reproducible, NOT private)" if reproducible else
                       "ChaCha20 CSPRNG keyed with 256 bits of OS entropy per release; keys are never stored"),
            "reproducible": reproducible,
            "words": ("Noise: ChaCha20 (a cryptographically secure generator) keyed with fresh OS entropy for "
                      "every release; neither key nor raw draws leave private/." if not reproducible else ""),
        }
        audit_words = parts.get("audit_words") or (
            "Every prompt sent to a generator was checked against the private records (whole records and "
            "private-only 8-word sequences): none was found." if audit.clean else
            "The prompt audit FOUND private text in prompts (counts and lines in private/diagnostics.json).")
        releases = [{"key": e.key, "mechanism": e.release.mechanism, "iteration": e.release.iteration,
                     "noise_std": e.release.noise_std, "sensitivity": e.release.sensitivity,
                     "event": event_to_dict(e.release.event), "description": e.release.description}
                    for e in ledger.entries]
        st = PrivacyStatement(
            method=self.name, private=private, headline=headline, guarantee=parts["guarantee"],
            parameters={**self.statement_parameters(), **parts.get("parameters", {})},
            treated_as_public=list(parts.get("treated_as_public", [])), coverage=self._coverage(parts),
            assumed_public=list(parts.get("assumed_public", [])), released=dict(self.released),
            releases=releases, noise=noise,
            prompt_audit={"passed": audit.clean, "words": audit_words},
            files={**RUN_FILES_RELEASE, "private/": PRIVATE_FOLDER_WORDS},
        )
        return st.to_dict()

    def _coverage(self, parts: dict[str, Any]) -> list[str]:
        cov = list(parts.get("coverage", []))
        if self.subsampled:
            cov.append(f"The guarantee covers the random sample of {self.config.data.max_private} private records "
                       "the run used (data.max_private), as a data set on its own: the sample was drawn from OS "
                       "entropy and is not released, but no guarantee is stated for adding or removing a record "
                       "of the input file.")
        return cov

    def write_diagnostics(self, ledger: Any, audit: Any | None = None) -> None:
        """Exact private statistics for ``private/diagnostics.json`` (mode 0600; never shared)."""
        from ..atomicio import atomic_write_json as _write

        d = {"method": self.name, **self.diagnostics, "notes": self.privacy_notes,
             "ledger": ledger.account() if ledger is not None and len(ledger) else None}
        if audit is not None:
            d["prompt_audit"] = audit.to_dict()
        _write(self.run.diagnostics, d)

    def _save_metrics(self, t_start: float, gen: Any, *, final: bool = False, records: int | None = None) -> None:
        d = self.metrics.to_dict()
        d["method"] = self.name
        d["wall_seconds"] = round(self._wall_before + time.perf_counter() - t_start, 3)
        d["resumed"] = self._wall_before > 0
        stats = getattr(gen, "stats", None)
        if stats is not None:
            for k in ("calls", "prompts", "prompt_tokens", "completion_tokens", "texts", "retries"):
                key = f"llm_{k}"
                d["counters"][key] = self._llm_before.get(key, 0) + getattr(stats, k, 0)
        if records is not None:
            d["counters"]["synthetic_records"] = records
        d["complete"] = final
        atomic_write_json(self.run.metrics, d)


def _has_labels(corpus: Corpus | None, columns: Sequence[str]) -> bool:
    return corpus is not None and all(c in corpus.labels for c in columns)


def _seed_int(seed: int | None) -> int:
    return 0 if seed is None else int(seed)


def check_nonempty(corpus: Corpus, what: str) -> None:
    if len(corpus) == 0:
        raise DataError(f"{what} is empty")
