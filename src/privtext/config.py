"""Run configuration: one YAML file validated by pydantic.

Unknown keys are errors that name the key (with a suggestion when it looks like a typo); ``--set a.b=c`` overrides
any value from the command line (the value is parsed as YAML, so ``--set privacy.epsilon=2`` is a number).

Backend sections (``generator``, ``embedder``) carry backend-specific keys; they are checked against the chosen
backend's own options model when the backend is built, with the same kind of error.

A method's own section (``augpe:``, ``dpft:``, ...) is any other top-level mapping (:class:`MethodSection`). This
module sits below the methods and knows none of them: when a run is resolved (``privtext.runner.resolve_config``,
before anything is written) every such section must name a registered method's section
(:meth:`Config.check_sections`: an unknown one is an error with a suggestion among the keys below and the
registered sections), the run's own section is validated by its method's ``Options`` model, and a budget form the
method cannot account for (``privacy: {epsilon}`` without δ, pure ε-DP) is refused by its description.
"""

from __future__ import annotations

import difflib
import math
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class OpenSection(BaseModel):
    """A section whose extra keys belong to a backend and are validated by it."""

    model_config = ConfigDict(extra="allow")

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class DataConfig(Section):
    private: str
    public: str | None = None
    text_column: str = "text"
    label_columns: list[str] = Field(default_factory=list)
    id_column: str | None = None
    public_text_column: str | None = Field(
        default=None, description="the text column of the public corpus when it is not named like the private "
        "one (default: data.text_column)")
    max_private: int | None = Field(
        default=None, gt=0, description="use a uniform random sample of at most this many private records (drawn "
        "from OS entropy; the guarantee then covers that sample only, see docs/privacy.md)")
    max_public: int | None = Field(default=None, gt=0)
    public_holdout: float | int = Field(
        default=0, ge=0, description="records (or fraction) of the public corpus held out for evaluation"
    )
    label_values: dict[str, list[str]] | None = Field(
        default=None, description="the public label schema {COLUMN: [v1, v2, ...]} (values as they appear in the "
        "private file): the label groups without labelled public text. Every column it names must be in "
        "data.label_columns and every label column needs its values here (a column declared in one place and not "
        "the other is an error)")

    @model_validator(mode="before")
    @classmethod
    def _label_text(cls, d: Any) -> Any:
        if isinstance(d, dict) and isinstance(d.get("label_values"), dict):  # YAML numbers (5.0) are label text
            d = {**d, "label_values": {k: [v if isinstance(v, str) else str(v) for v in vs]
                                       if isinstance(vs, list) else vs for k, vs in d["label_values"].items()}}
        return d

    @model_validator(mode="after")
    def _check_label_values(self) -> DataConfig:
        lv = self.label_values
        if lv is None:
            return self
        # a label declared in one place and absent from the other is an error (issue 35): never a silent default
        cols = list(self.label_columns)
        undeclared = [c for c in lv if c not in cols]
        if undeclared and not cols:
            raise ValueError(
                f"data.label_values declares the column(s) {undeclared} but data.label_columns is not set: add "
                f"data.label_columns: [{', '.join(undeclared)}] (the columns of the private file the synthetic records are labelled "
                "with)")
        if undeclared:
            raise ValueError(
                f"data.label_values declares the column(s) {undeclared} that data.label_columns {cols} does not "
                f"list: add them to data.label_columns, or remove them from data.label_values")
        valueless = [c for c in cols if c not in lv]
        if valueless:
            raise ValueError(
                f"data.label_columns lists {valueless} but data.label_values gives no values for "
                f"{'it' if len(valueless) == 1 else 'them'}: add data.label_values.{valueless[0]}: [v1, v2, ...] "
                "(the values as they appear in the private file), or remove it from data.label_columns")
        for col, vals in lv.items():
            if not vals:
                raise ValueError(f"data.label_values.{col} is empty: list the public label values")
            dup = sorted({v for v in vals if vals.count(v) > 1})
            if dup:
                raise ValueError(f"data.label_values.{col} lists {dup} more than once")
        return self


class GeneratorConfig(OpenSection):
    backend: str = "ngram"
    name: str | None = None
    prompt_family: str = "auto"
    target_words: int | list[int] | None = Field(
        default=None, description="target length of generated texts in words: N (about N) or [low, high]; a public "
        "parameter (state what you know of the domain, never a length computed from the private data): it "
        "replaces the prompt family's length prior, and 1.5 × high caps every text (privtext.generate.length)")

    def label(self, index: int) -> str:
        """The generator's name in a run of several (WASP): ``name``, else ``<backend>-<index>``."""
        return self.name or f"{self.backend}-{index}"


class EmbedderConfig(OpenSection):
    backend: str = "sentence-transformers"
    model: str | None = Field(default=None, description="model name or path; backend default when omitted "
                              "(all-MiniLM-L6-v2 for sentence-transformers)")
    cache: bool = True
    cache_dir: str | None = Field(
        default=None, description="embedding cache folder shared across runs (default RUN/cache/embeddings); it "
        "holds embeddings of private texts: keep it where the private data may be")
    private_cache: bool = Field(
        default=True, description="keep the private corpus's embeddings in the user's private cache "
        "($PRIVTEXT_CACHE_HOME/private, else ~/.cache/privtext/private; mode 0700, salted keys) and reuse them on "
        "later runs; `privtext cache clear` deletes it")


class SecretBudget(Section):
    p: float = Field(gt=0, lt=1)
    r: float = Field(gt=0, le=1)

    @model_validator(mode="after")
    def _r_above_p(self) -> SecretBudget:
        if self.r <= self.p:
            raise ValueError(
                f"r={self.r} must exceed p={self.p}: a posterior bound at or below the prior protects nothing"
            )
        return self


class PrivacyConfig(Section):
    """Exactly one budget form: (epsilon, delta), mu, secret (p, r), or noise_multiplier (no target)."""

    epsilon: float | None = Field(default=None, gt=0)
    delta: float | None = Field(default=None, gt=0, lt=1)
    mu: float | None = Field(default=None, gt=0)
    secret: SecretBudget | None = None
    noise_multiplier: float | None = Field(default=None, ge=0)
    calibration: Literal["pld", "paper"] = "pld"
    secure: bool = Field(default=False, description="every random stream from OS entropy (refuses a seed)")
    reproducible_noise: bool = Field(
        default=False, description="derive the privacy noise from the seed (tests and experiments only: NOT "
        "private, anyone with the seed can recompute the noise); by default noise comes from a ChaCha20 CSPRNG "
        "keyed by OS entropy")
    allow_weak: bool = Field(
        default=False, description="accept a budget too large to protect anything meaningful (ε above 20, μ whose "
        "ε at δ = 1e-5 is above 20, SecPE r above 0.5 or r/p above e^20; privtext.privacy.statement): for "
        "experiments; the statement then says so. Budgets above ε = 10 run with a warning either way")

    @model_validator(mode="after")
    def _one_form(self) -> PrivacyConfig:
        forms = {
            "epsilon": self.epsilon is not None,
            "mu": self.mu is not None,
            "secret": self.secret is not None,
            "noise_multiplier": self.noise_multiplier is not None,
        }
        given = [k for k, v in forms.items() if v]
        if len(given) != 1:
            raise ValueError(
                "privacy needs exactly one of {epsilon (with delta), mu, secret: {p, r}, noise_multiplier}; "
                f"got {given or 'none'}"
            )
        if self.delta is not None and self.epsilon is None:
            raise ValueError("privacy.delta is only used with privacy.epsilon")
        if self.secure and self.reproducible_noise:
            raise ValueError("privacy.secure and privacy.reproducible_noise contradict each other: choose one")
        level, why = self.strength()
        if level == "void" and not self.allow_weak:
            limit = (f"r above {REFUSE_R:g} or r/p above e^{REFUSE_EPSILON:g}: an attacker may recover a declared "
                     "secret at least as often as a coin flip, or hundreds of millions of times more often than "
                     "they could guess it" if self.kind == "secret" else
                     f"ε above {REFUSE_EPSILON:g}: the chance of any conclusion about one record may change by a "
                     f"factor above e^{REFUSE_EPSILON:g} ≈ {math.exp(REFUSE_EPSILON):.3g}")
            raise ValueError(
                f"privacy budget {why} is too large to protect anything meaningful ({limit}); lower it, or set "
                "privacy.allow_weak: true to run it anyway as an experiment (the statement will say it protects "
                "nothing meaningful)")
        return self

    def strength(self) -> tuple[str, str]:
        """``("ok" | "weak" | "void", the figure)`` of this budget (:func:`budget_level`): weak above ε = 10, void
        (refused without ``allow_weak``) above ε = 20; the fixed-noise form has no target and is judged in the
        statement from the ε its releases reach (privtext.privacy.statement.plain_meaning)."""
        if self.secret is not None:
            return budget_level("secret", p=self.secret.p, r=self.secret.r)
        if self.noise_multiplier is not None:
            return "ok", ""
        return budget_level(self.kind, epsilon=self.epsilon, mu=self.mu)

    @property
    def kind(self) -> str:
        """``dp`` (ε, δ), ``pure`` (ε alone: pure ε-DP, for a method whose description says so), ``gdp``,
        ``secret`` or ``noise``."""
        if self.epsilon is not None:
            return "dp" if self.delta is not None else "pure"
        if self.mu is not None:
            return "gdp"
        if self.secret is not None:
            return "secret"
        return "noise"


#: above this ε (of (ε, δ)-DP or pure ε-DP) a guarantee is called weak (privacy.json's plain words, a warning)
WEAK_EPSILON = 10.0
#: above this ε a configuration is refused unless ``privacy.allow_weak: true`` (a factor e^20 ≈ 4.9e8)
REFUSE_EPSILON = 20.0
#: μ whose ε at δ = 1e-5 is WEAK_EPSILON / REFUSE_EPSILON (GDP Remark C.1: privtext.privacy.conversions.
#: gdp_mu_for_dp(10 and 20, 1e-5); tests/test_privacy_statement.py recomputes them)
WEAK_MU = 2.000446
REFUSE_MU = 3.447783
#: SecPE's (p, r): a reconstruction chance r above WEAK_R (or r/p above e^WEAK_EPSILON) is weak; above REFUSE_R (a
#: coin flip) or r/p above e^REFUSE_EPSILON refused without ``allow_weak``
WEAK_R = 0.1
REFUSE_R = 0.5


def budget_level(kind: str, *, epsilon: float | None = None, mu: float | None = None, p: Any = None,
                 r: Any = None) -> tuple[str, str]:
    """``("ok" | "weak" | "void", why)`` for a budget as configured (``void``: too large to protect anything
    meaningful; ``why`` names the figure). μ is judged by the ε it gives at δ = 1e-5 (:data:`WEAK_MU`,
    :data:`REFUSE_MU`)."""
    if kind == "secret" and p is not None and r is not None:
        ps = [float(x) for x in (p if isinstance(p, Sequence) else [p])]
        rs = [float(x) for x in (r if isinstance(r, Sequence) else [r])]
        ratio = max(b / a for a, b in zip(ps, rs, strict=True)) if len(ps) == len(rs) else max(rs) / min(ps)
        why = f"r = {max(rs):.4g} (r/p = {ratio:.4g})"
        if max(rs) > REFUSE_R or ratio > math.exp(REFUSE_EPSILON):
            return "void", why
        if max(rs) > WEAK_R or ratio > math.exp(WEAK_EPSILON):
            return "weak", why
        return "ok", ""
    if kind == "gdp" and mu is not None:
        m = float(mu)
        why = f"μ = {m:.4g} (its ε at δ = 1e-05 is above {REFUSE_EPSILON if m > REFUSE_MU else WEAK_EPSILON:g})"
        return ("void", why) if m > REFUSE_MU else ("weak", why) if m > WEAK_MU else ("ok", "")
    if epsilon is not None:
        e = float(epsilon)
        why = f"ε = {e:.4g}"
        return ("void", why) if e > REFUSE_EPSILON else ("weak", why) if e > WEAK_EPSILON else ("ok", "")
    return "ok", ""


class LabelDistributionConfig(Section):
    """How many synthetic samples each label gets.

    * ``auto`` (default) — ``public`` when the public corpus has the label columns (or there is no other public
      source of labels to go by), ``uniform`` when it has none and the label values are declared in
      ``data.label_values`` (or when the run has no labels); the runner picks one before the run directory exists,
      writes it into the run's configuration and says which (the log, ``privacy.json``'s parameters);
    * ``uniform`` — equal shares over the label combinations seen in the *public* corpus (or ``values``);
    * ``public`` — proportional to the public corpus;
    * ``given`` — the proportions in ``weights`` (keys ``"a|b"`` for label tuples);
    * ``dp`` — a noisy histogram of private labels, released with Gaussian noise and recorded in the ledger
      (costs privacy budget; ``budget_fraction`` of the total is set aside for it).
    """

    kind: Literal["auto", "uniform", "public", "given", "dp"] = "auto"
    weights: dict[str, float] | None = None
    budget_fraction: float = Field(default=0.1, gt=0, lt=1)
    picked: str | None = Field(
        default=None, description="written by privtext when kind was auto: which kind it picked and why (shown "
        "in privacy.json); not a setting")


class VariationConfig(Section):
    """Aug-PE's VARIATION_API forms: ``paraphrase`` (style prompts) or ``blank`` (fill-in-the-blanks)."""

    kind: Literal["paraphrase", "blank"] = "blank"
    mask_prob: float = Field(default=0.5, gt=0, lt=1)
    mask_prob_schedule: list[float] | None = None


class SynthesisConfig(Section):
    """What every method makes, whatever its mechanism (``synthesis:``): how many synthetic records, and how they
    are shared among the label groups."""

    num_samples: int = Field(default=2000, gt=0, description="synthetic records the run writes")
    label_distribution: LabelDistributionConfig = Field(default_factory=LabelDistributionConfig)


#: keys that moved to another section: (old path, new path); still read at the old place, with a deprecation note
MOVED_KEYS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("evolution", "num_samples"), ("synthesis", "num_samples")),
    (("evolution", "label_distribution"), ("synthesis", "label_distribution")),
)


class ConfigDeprecationWarning(DeprecationWarning):
    """A configuration key that moved (:data:`MOVED_KEYS`): still read. :func:`config_from_dict` (what the CLI
    reads a file with) also prints it as a note on stderr, so a user running a command sees it."""


def move_deprecated_keys(d: dict[str, Any], *, source: str = "config",
                         positions: Mapping[tuple[Any, ...], tuple[int, int]] | None = None,
                         overrides: Mapping[tuple[str, ...], str] | None = None) -> list[str]:
    """Move every key of :data:`MOVED_KEYS` that ``d`` (a raw configuration, changed in place) gives at its old
    place to its new place, and return one note per key moved. A key given at both places with different values
    is a :class:`ConfigError` naming both (where the file or ``--set`` holds them); the same value at both places
    is read once."""
    notes = []
    for old, new in MOVED_KEYS:
        parent = d.get(old[0])
        if not isinstance(parent, dict) or old[1] not in parent:
            continue
        value = parent.pop(old[1])
        target = d.get(new[0])
        if target is None:
            target = d[new[0]] = {}
        if not isinstance(target, dict):
            continue  # not a mapping: the validation names it
        old_key, new_key = ".".join(old), ".".join(new)
        if new[1] in target and target[new[1]] != value:
            w_old = _where(old, positions=positions, overrides=overrides)
            w_new = _where(new, positions=positions, overrides=overrides)
            raise ConfigError(f"{source}: {w_old} = {value!r} and {w_new} = {target[new[1]]!r} disagree: "
                              f"{old_key} is the old place of {new_key}; give {new_key} only")
        target[new[1]] = value
        notes.append(f"{source}: {old_key} is deprecated: it moved to {new_key} (the same for every method); "
                     f"read as {new_key}")
    return notes


class EvolutionConfig(Section):
    """The evolution loop's settings (Aug-PE, SecPE, WASP). The number of synthetic records and their label mix,
    which every method uses, are :class:`SynthesisConfig` (``synthesis:``); the old keys
    ``evolution.num_samples`` and ``evolution.label_distribution`` are moved there when the configuration is read
    (:func:`move_deprecated_keys`)."""

    iterations: int = Field(default=5, ge=1)
    variations: int = Field(default=6, ge=1, description="L: candidates per selected sample")
    include_selected: bool = Field(default=True, description="keep each selected sample: L-1 variations (else L)")
    initial_multiplier: int | None = Field(
        default=None, ge=1, description="RANDOM_API draws N_syn × this at t=0 (default L, as SecPE Alg 3 line 4)")
    initial_pool: Literal["auto", "per_label", "shared"] = Field(
        default="auto", description="t=0: per_label — RANDOM_API draws n_g·m candidates for each label group g; "
        "shared — one pool of Σ n_g·m unconditioned candidates (no label in the call) that every label group votes "
        "over and selects from; auto — shared when there are several label groups and the generator cannot "
        "condition on the label (label_conditioned is False: the n-gram model of unlabelled public text, "
        "DP-vocabulary prompts), else per_label. Same generator calls either way")
    selection: Literal["rank", "sample"] = "rank"
    threshold: float = Field(default=0.0, ge=0, description="H: votes are clipped at H, then H is subtracted")
    lookahead: int = Field(default=0, ge=0, description="k variations averaged into a candidate's embedding")
    lookahead_include_self: bool = True
    variation: VariationConfig = Field(default_factory=VariationConfig)
    learn: dict[str, Any] = Field(
        default_factory=dict, description="learning from the released votes after each iteration (post-processing; "
        "docs/learn.md): {kind: none | dpo | ngram_counts | rerank, pairs, dpo, ngram, rerank}, validated by "
        "privtext.learn.options.LearnOptions; empty: kind none")
    final: Literal["population", "model", "both"] = Field(
        default="population", description="the synthetic set: the evolved population's last selection, samples the "
        "trained generator writes from the public prompts (model, POPri), or half of each label from each (both)")


class VotingConfig(Section):
    """Nearest-neighbour search for votes. ``center: candidates`` centres private and candidate embeddings on
    the candidates' mean (public) and renormalises before the search, which removes hub candidates
    (see privtext.mechanisms.voting); ``none`` is Aug-PE's plain search."""

    backend: Literal["auto", "faiss", "numpy", "torch", "ivf", "ivf-gemm", "hnsw"] = "auto"
    metric: Literal["l2", "cosine"] = "l2"
    center: Literal["candidates", "none"] = "candidates"
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="torch backend: where the matrix products run (auto: CUDA when available)")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        default="auto", description="torch backend: GEMM precision; votes stay exact (near-ties re-decided in "
        "fp32/float64); auto: fp16 on CUDA, bf16 on CPUs with AMX or AVX-512-BF16, else fp32")
    chunk_size: int | None = Field(default=None, gt=0, description="private rows per block (default: from a "
                                   "64 MB block on CPU, 512 MB on CUDA)")
    nprobe: int | None = Field(default=None, gt=0, description="lists probed (default: ivf 16, ivf-gemm 2)")
    nlist: int | None = Field(default=None, gt=0)
    hnsw_m: int = Field(default=32, gt=1)
    ef_search: int = Field(default=256, gt=0)


class ClusterConfig(Section):
    """Where exact vote counts are computed: in this process, or shard by shard on a Ray cluster the data holder
    controls (``privtext.mechanisms.distributed``); noise is added once, centrally, either way. With ``embed:
    true`` the private and candidate texts are also embedded on that cluster with Ray Data
    (``privtext.embed.distributed``; the embedding cache stays on the driver)."""

    backend: Literal["local", "ray"] = "local"
    address: str | None = Field(default=None, description="an existing Ray cluster ('auto', 'ray://host:port'); "
                                "None starts a local one")
    shards: int | None = Field(default=None, gt=0, description="private shards per vote (default: the cluster's CPUs)")
    num_cpus: int | None = Field(default=None, gt=0, description="CPUs of a local cluster started for the run")
    embed: bool = Field(default=False, description="embed private and candidate texts on the cluster (Ray Data "
                        "map_batches; every worker builds the embedder from the embedder section)")
    embed_batch_size: int = Field(default=256, gt=0, description="texts per map_batches call")
    embed_concurrency: int | None = Field(default=None, gt=0, description="embedding tasks at once (default: "
                                          "the cluster's CPUs)")

    @model_validator(mode="after")
    def _embed_needs_ray(self) -> ClusterConfig:
        if self.embed and self.backend != "ray":
            raise ValueError(f"cluster.embed: true needs cluster.backend: ray (got backend {self.backend!r})")
        return self


class MethodSection(OpenSection):
    """A method's own options (``augpe:``, ``secpe:``, ...): every top-level mapping that is not one of
    :class:`Config`'s sections. Validated by the method's ``Options`` model when the run is resolved (unknown keys
    are errors naming the key), so a new method needs no line here (module docstring)."""


class Config(Section):
    #: top-level keys besides the fields below are method sections (:class:`MethodSection`), checked against the
    #: registered methods when the run is resolved (:meth:`check_sections`)
    model_config = ConfigDict(extra="allow", validate_assignment=True)
    __pydantic_extra__: dict[str, MethodSection] = Field(init=False)

    #: the YAML file this configuration was read from (None when built in code); never dumped
    _source_path: str | None = PrivateAttr(default=None)
    #: where the configuration came from and where its keys were (file positions, ``--set`` overrides), so an error
    #: found when the run is resolved points where a validation error would
    _source: str = PrivateAttr(default="config")
    _positions: Mapping[tuple[Any, ...], tuple[int, int]] | None = PrivateAttr(default=None)
    _overrides: Mapping[tuple[str, ...], str] | None = PrivateAttr(default=None)

    method: str = "augpe"
    seed: int | None = 0
    name: str | None = None
    data: DataConfig
    generator: GeneratorConfig = Field(default_factory=GeneratorConfig)
    generators: list[GeneratorConfig] | None = None
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    privacy: PrivacyConfig
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    evolution: EvolutionConfig = Field(default_factory=EvolutionConfig)
    voting: VotingConfig = Field(default_factory=VotingConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    output: str = "runs/run"

    @model_validator(mode="before")
    @classmethod
    def _sections_are_mappings(cls, d: Any) -> Any:
        """A top-level key that is not a field is a method's section, so its value must be a mapping. Keys that
        moved (:data:`MOVED_KEYS`) are read at their new place (:func:`move_deprecated_keys`; a
        :class:`ConfigDeprecationWarning` each)."""
        if isinstance(d, Mapping) and any(isinstance(d.get(o[0]), Mapping) and o[1] in d[o[0]]
                                          for o, _ in MOVED_KEYS):
            d = _deepcopy({k: dict(v) if isinstance(v, Mapping) else v for k, v in d.items()})
            for note in move_deprecated_keys(d):
                warnings.warn(note, ConfigDeprecationWarning, stacklevel=2)
        if isinstance(d, Mapping):
            for k, v in d.items():
                if k not in cls.model_fields and not isinstance(v, (Mapping, MethodSection)):
                    raise PydanticCustomError("unknown_key", "unknown key {key}", {"key": str(k)})
        return d

    @field_validator("method")
    @classmethod
    def _method_name(cls, v: str) -> str:
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"method must be a non-empty name, got {v!r}")
        return v.strip().lower()

    @model_validator(mode="after")
    def _seed_vs_secure(self) -> Config:
        if self.privacy.secure and self.seed is not None:
            raise ValueError(
                f"privacy.secure draws every stream from OS entropy and refuses a seed; set seed: null (got {self.seed})"
            )
        if self.privacy.reproducible_noise and self.seed is None:
            raise ValueError("privacy.reproducible_noise derives the noise from the seed: set a seed")
        return self

    def sections(self) -> dict[str, MethodSection]:
        """The method sections the configuration holds (top-level mappings that are not a field), by name."""
        return dict(self.__pydantic_extra__ or {})

    def section(self, name: str) -> dict[str, Any]:
        """The options of the method section ``name`` as given (empty when the configuration has none)."""
        sec = (self.__pydantic_extra__ or {}).get(name)
        return sec.options() if sec is not None else {}

    def check_sections(self, known: Collection[str]) -> None:
        """Refuse every method section that is not in ``known`` (the registered methods' sections): one
        :class:`ConfigError` naming each, where the file or ``--set`` holds it, with a suggestion among the
        top-level keys and ``known``."""
        unknown = [k for k in self.sections() if k not in known]
        if not unknown:
            return
        valid = [*type(self).model_fields, *sorted(known)]
        msgs = [_unknown_key((k,), valid, _where((k,), positions=self._positions, overrides=self._overrides))
                for k in unknown]
        raise ConfigError(f"{self._source}: " + "; ".join(msgs))

    def with_absolute_paths(self, base_dir: str | os.PathLike[str] | None = None) -> Config:
        """This config with its file paths resolved against ``base_dir`` (default: the working directory), so a
        run directory's config.yaml can be resumed from anywhere."""
        d = self.dump()
        _resolve_paths(d, os.fspath(base_dir) if base_dir is not None else os.getcwd())
        return Config.model_validate(d)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=False)

    @property
    def source_path(self) -> str | None:
        """The YAML file this configuration was read from, if any."""
        return self._source_path

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.dump(), sort_keys=False, allow_unicode=True)

    def shareable_yaml(self) -> str:
        """The configuration for a run's release (``config.yaml``): every absolute path (the data files, a cache
        folder, the output) reduced to its file name, so no local folder layout leaves with the run; the full
        configuration stays in ``private/config.yaml`` (what ``privtext resume`` reads)."""

        def strip(x: Any) -> Any:
            if isinstance(x, dict):
                return {k: strip(v) for k, v in x.items()}
            if isinstance(x, list):
                return [strip(v) for v in x]
            if isinstance(x, str) and (os.path.isabs(x) or x.startswith("~")) and "\n" not in x:
                return os.path.basename(os.path.normpath(os.path.expanduser(x))) or x
            return x

        return yaml.safe_dump(strip(self.dump()), sort_keys=False, allow_unicode=True)


# ----------------------------------------------------------------------------------------------------- loading


def _known_keys(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        ann = model.model_fields[part].annotation
        sub = None
        for cand in (ann, *getattr(ann, "__args__", ())):
            for c in (cand, *getattr(cand, "__args__", ())):
                if isinstance(c, type) and issubclass(c, BaseModel):
                    sub = c
        model = sub
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def yaml_positions(text: str) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(1-based line, column) of every key and list item of a YAML mapping, by its path (``("privacy",
    "epsilon")``), so configuration errors can point into the file."""
    out: dict[tuple[Any, ...], tuple[int, int]] = {}

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = (*path, k.value)
                out[key] = (k.start_mark.line + 1, k.start_mark.column + 1)
                walk(v, key)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                out[(*path, i)] = (v.start_mark.line + 1, v.start_mark.column + 1)
                walk(v, (*path, i))

    try:
        walk(yaml.compose(text), ())
    except yaml.YAMLError:
        pass
    return out


def _override_for(loc: Sequence[Any], overrides: Mapping[tuple[str, ...], str]) -> str | None:
    """The ``--set`` that set the value at ``loc`` (or a section above it), or every ``--set`` inside the section
    at ``loc`` (an error about a whole section: ``data.label_values`` against ``data.label_columns``), if any."""
    key = tuple(str(p) for p in loc)
    above = [(path, text) for path, text in overrides.items() if key[:len(path)] == path]
    if above:
        return max(above, key=lambda x: len(x[0]))[1]
    inside = [text for path, text in overrides.items() if path[:len(key)] == key]
    return ", --set ".join(inside) if inside else None


def _where(loc: Sequence[Any], *, positions: Mapping[tuple[Any, ...], tuple[int, int]] | None,
           overrides: Mapping[tuple[str, ...], str] | None) -> str:
    """The dotted key ``loc`` and where it was given: the ``--set`` that gave it, or the (line, column) of the
    deepest key of its path that the file holds — never a line of the file that holds something else."""
    where = ".".join(str(p) for p in loc) or "(top level)"
    given = _override_for(loc, overrides) if overrides and loc else None
    if given is not None:
        return f"{where} (from --set {given})"
    if positions:
        for n in range(len(loc), 0, -1):
            pos = positions.get(tuple(loc[:n]))
            if pos is not None:
                return f"{where} (line {pos[0]}, column {pos[1]})"
    return where


def _unknown_key(loc: Sequence[Any], valid: Sequence[str], where: str, *, note: str = "") -> str:
    """``unknown key 'a.b'`` with where it was given and a suggestion among ``valid`` (else the valid keys); a key
    that moved (:data:`MOVED_KEYS`) is suggested at its new place."""
    dotted = ".".join(map(str, loc))
    msg = f"unknown key {dotted!r}" + where[len(dotted):]
    moved = {old[-1]: ".".join(new) for old, new in MOVED_KEYS if tuple(map(str, loc[:-1])) == old[:-1]}
    hint = difflib.get_close_matches(str(loc[-1]), [*valid, *moved], n=1)
    if hint and hint[0] in moved:
        msg += f" (did you mean {moved[hint[0]]!r}?)"
    elif hint:
        msg += f" (did you mean {'.'.join([*map(str, loc[:-1]), hint[0]])!r}?)"
    elif valid:
        msg += f" (valid keys here: {', '.join(valid)}{'; ' + note if note else ''})"
    return msg


def format_validation_error(err: ValidationError, *, source: str = "config",
                            positions: Mapping[tuple[Any, ...], tuple[int, int]] | None = None,
                            overrides: Mapping[tuple[str, ...], str] | None = None) -> str:
    """One line naming every invalid key: where the file holds it (line, column), or the ``--set`` that gave it
    (``overrides``: key path → the ``--set`` text), never a line of the file that holds something else."""
    msgs = []
    for e in err.errors():
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        if e["type"] == "unknown_key":  # a top-level key whose value is no section (Config._sections_are_mappings)
            loc = [*loc, (e.get("ctx") or {}).get("key", "?")]
        where = _where(loc, positions=positions, overrides=overrides)
        if e["type"] in ("extra_forbidden", "unknown_key"):
            parent = _model_at(loc[:-1])
            valid = _known_keys(parent) if parent else []
            note = "a method's own section is a mapping" if e["type"] == "unknown_key" else ""
            msgs.append(_unknown_key(loc, valid, where, note=note))
        elif e["type"] == "missing":
            msgs.append(f"missing required key {'.'.join(map(str, loc))!r}")
        else:
            text = e["msg"].removeprefix("Value error, ")
            msgs.append(f"{where}: {text} (got {e.get('input')!r})" if e["type"] != "value_error" else f"{where}: {text}")
    return f"{source}: " + "; ".join(msgs)


def section_config(model: type[M], cfg: M | Mapping[str, Any], *, source: str) -> M:
    """``cfg`` as the section model ``model``: passed through, or validated from a mapping (errors as one
    ConfigError naming the keys). Used by build_generator and build_embedder."""
    if isinstance(cfg, model):
        return cfg
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"{source} config must be a {model.__name__} or a mapping, got {type(cfg).__name__}")
    try:
        return model.model_validate(dict(cfg))
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source=source)) from None


def _set_path(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    if not all(parts):
        raise ConfigError(f"--set key {dotted!r} is not a dotted path like evolution.iterations")
    cur: Any = d
    for i, p in enumerate(parts[:-1]):
        if isinstance(cur, list):
            try:
                cur = cur[int(p)]
                continue
            except (ValueError, IndexError):
                raise ConfigError(f"--set {dotted}: {'.'.join(parts[: i + 1])} is not a valid list index") from None
        nxt = cur.get(p)
        if nxt is None:
            nxt = cur[p] = {}
        elif not isinstance(nxt, (dict, list)):
            raise ConfigError(f"--set {dotted}: {'.'.join(parts[: i + 1])} is a value, not a section")
        cur = nxt
    cur[parts[-1]] = value


def parse_overrides(overrides: Sequence[str]) -> list[tuple[str, Any]]:
    out = []
    for o in overrides:
        if "=" not in o:
            raise ConfigError(f"--set expects KEY=VALUE, got {o!r}")
        k, v = o.split("=", 1)
        try:
            val = yaml.safe_load(v) if v != "" else ""
        except yaml.YAMLError:
            val = v
        out.append((k.strip(), val))
    return out


def config_from_dict(
    raw: Mapping[str, Any], *, overrides: Sequence[str] = (), source: str = "config", base_dir: str | None = None,
    positions: Mapping[tuple[Any, ...], tuple[int, int]] | None = None,
) -> Config:
    d = _deepcopy(dict(raw))
    given: dict[tuple[str, ...], str] = {}
    for (k, v), text in zip(parse_overrides(overrides), overrides, strict=True):
        _set_path(d, k, v)
        given[tuple(k.split("."))] = text.strip()
    if base_dir is not None:
        _resolve_paths(d, base_dir)
    for note in move_deprecated_keys(d, source=source, positions=positions, overrides=given):
        _note(note)
        warnings.warn(note, ConfigDeprecationWarning, stacklevel=2)
    try:
        cfg = Config.model_validate(d)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source=source, positions=positions, overrides=given)) from None
    cfg._source, cfg._positions, cfg._overrides = source, positions, given
    return cfg


def _note(text: str) -> None:
    """A one-line note on stderr for whoever runs the command (quiet mode hides it)."""
    from rich.markup import escape

    from .progress import say

    say(f"[yellow]note:[/] {escape(text)}")


def _deepcopy(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _deepcopy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deepcopy(v) for v in x]
    return x


def _resolve_paths(d: dict[str, Any], base_dir: str) -> None:
    """Make relative file paths absolute against ``base_dir``: the data files (``hf:`` specs are left alone) and
    the embedding cache folder. The one path resolver: :func:`config_from_dict` (``base_dir``) and
    :meth:`Config.with_absolute_paths` use it."""

    def fix(section: Any, key: str) -> None:
        if isinstance(section, dict):
            v = section.get(key)
            if isinstance(v, str) and v and not v.startswith("hf:") and not os.path.isabs(v):
                section[key] = os.path.normpath(os.path.join(base_dir, v))

    fix(d.get("data"), "private")
    fix(d.get("data"), "public")
    fix(d.get("embedder"), "cache_dir")


def load_config(path: str | os.PathLike[str], *, overrides: Sequence[str] = ()) -> Config:
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such config file")
    try:
        text = p.read_text(encoding="utf-8")
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: not valid YAML: {problem}"
                          + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else "")) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not valid UTF-8") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level, got {type(raw).__name__}")
    cfg = config_from_dict(raw, overrides=overrides, source=str(p), positions=yaml_positions(text))
    cfg._source_path = str(p.resolve())
    return cfg
