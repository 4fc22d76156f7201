"""The Generator interface: the one narrow door through which every method talks to a foundation model.

A generator implements Aug-PE's two APIs and the prompts of the other methods:

* :meth:`Generator.random` — RANDOM_API: ``n`` new texts, optionally conditioned on public label information;
* :meth:`Generator.variation` — VARIATION_API: one variation per input text (paraphrase or fill-in-the-blanks);
* :meth:`Generator.seeded` — DP-KPS: one document per privatised keyphrase list, containing the phrases;
* :meth:`Generator.contrastive` — WASP (Tab 7): few-shot prompt with worse and better examples.

Every draw takes an explicit ``rng: numpy.random.Generator``; a backend never touches global RNG state (torch's
global generator is forked and restored around seeded calls). Every prompt is appended to the run's prompt log
*before* it is sent (the end-of-run audit reads it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from ..backends import BackendOptions, check_n, check_rng, check_texts
from ..data.labels import LabelInfo
from ..errors import ConfigError, DataError

if TYPE_CHECKING:
    from ..atomicio import PromptLog
    from ..data.corpus import Corpus
    from ..guard import PrivateGuard
    from .length import LengthTarget
    from .prompts import PromptFamily

@dataclass(frozen=True)
class VariationSpec:
    """Aug-PE's two VARIATION_API forms.

    ``paraphrase`` rewrites the text in a style (``style=None`` draws one of the family's styles per text);
    ``blank`` masks each word with probability ``mask_prob``, merges runs of masks into one ``_`` and asks for
    the blanks to be filled to about the original length.
    """

    kind: Literal["paraphrase", "blank"] = "blank"
    mask_prob: float = 0.5
    style: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("paraphrase", "blank"):
            raise ConfigError(f"VariationSpec.kind must be 'paraphrase' or 'blank', got {self.kind!r}")
        mp = self.mask_prob
        if isinstance(mp, bool) or not isinstance(mp, (int, float, np.floating, np.integer)) or not (0.0 <= mp <= 1.0):
            raise ConfigError(f"VariationSpec.mask_prob must be a probability in [0, 1], got {mp!r}")
        if self.style is not None and not isinstance(self.style, str):
            raise ConfigError(f"VariationSpec.style must be a string or None, got {self.style!r}")


@dataclass
class GenerationStats:
    """Counters a generator keeps (the engine reads them into metrics.json)."""

    calls: int = 0  # backend invocations (batches, HTTP requests that succeeded, model.generate calls)
    prompts: int = 0  # prompts sent
    prompt_tokens: int = 0
    completion_tokens: int = 0
    texts: int = 0  # texts returned
    retries: int = 0  # retried requests (HTTP faults, empty or malformed replies)
    seconds: float = 0.0  # wall time inside the generator's public methods

    def to_dict(self) -> dict[str, Any]:
        """The counters as a dict (what the engine writes to metrics.json)."""
        return asdict(self)

    def merge(self, other: GenerationStats) -> None:
        """Add every counter of ``other`` to this one's (e.g. a fan-out's per-endpoint generators into one total)."""
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)


@runtime_checkable
class Generator(Protocol):
    """What a method may ask of a foundation model: Aug-PE's RANDOM_API and VARIATION_API, DP-KPS's seeded documents
    and WASP's contrastive prompt, each returning exactly one text per request; see the module docstring.
    :class:`BaseGenerator` implements the checks and bookkeeping; backends fill in its ``_op`` methods."""

    name: str
    stats: GenerationStats

    def random(self, label: LabelInfo | None, n: int, *, rng: np.random.Generator) -> list[str]:
        """``n`` new texts (RANDOM_API), conditioned on the public ``label`` when given."""

    def variation(
        self, texts: Sequence[str], label: LabelInfo | None, spec: VariationSpec, *, rng: np.random.Generator
    ) -> list[str]:
        """One variation of each of ``texts`` (VARIATION_API), as ``spec`` asks (paraphrase or fill-in-the-blanks),
        in order."""

    def seeded(self, keyphrases: Sequence[Sequence[str]], doc_type: str, *, rng: np.random.Generator,
               examples: Sequence[Sequence[str]] | None = None) -> list[str]:
        """One document of type ``doc_type`` per keyphrase list (DP-KPS), with per-list public ``examples`` shown in
        its prompt."""

    def contrastive(
        self, good: Sequence[str], bad: Sequence[str], label: LabelInfo | None, n: int, *, rng: np.random.Generator
    ) -> list[str]:
        """``n`` texts from a few-shot prompt with worse (``bad``) and better (``good``) examples (WASP Tab 7)."""

    def close(self) -> None:
        """Release the backend's resources; later calls raise :class:`~privtext.errors.BackendError`."""


@dataclass
class GeneratorContext:
    """What a backend may know about the run. ``public`` is the only text a generator may be trained on."""

    public: Corpus | None = None
    label_columns: Sequence[str] = ()
    prompt_log: PromptLog | None = None
    family: str = "auto"
    guard: PrivateGuard | None = None
    seed: int | None = 0
    cache_dir: Path | None = None
    #: target lengths from released values (a DP length histogram, privtext.mechanisms.lengths): when set, it
    #: replaces the configured target and the prompt family's prior
    length: LengthTarget | None = None

    def training_corpus(self, backend: str) -> tuple[Corpus, list[str]]:
        """The public corpus a trained generator (``ngram``, ``lm``) learns from, and its label columns among the
        run's; a :class:`~privtext.errors.ConfigError` without one (never private text)."""
        if self.public is None or len(self.public) == 0:
            raise ConfigError(f"the {backend} generator is trained on public text only and needs a public corpus "
                              "(set data.public); it never trains on private text")
        return self.public, [c for c in self.label_columns if c in self.public.labels]


# --------------------------------------------------------------------------------------------- options models


# ------------------------------------------------------------------------------------------------ validation


def check_label(label: Any) -> LabelInfo | None:
    """``label`` as a :class:`~privtext.data.labels.LabelInfo` (a mapping column → value is converted); ``None`` for
    ``None`` or an empty label. Raises :class:`~privtext.errors.ConfigError` for anything else."""
    if label is None or isinstance(label, LabelInfo):
        return label or None
    if isinstance(label, Mapping):
        return LabelInfo.from_mapping(label) or None
    raise ConfigError(f"label must be a LabelInfo, a mapping column -> value, or None; got {type(label).__name__}")


def check_spec(spec: Any) -> VariationSpec:
    """``spec`` as a :class:`VariationSpec` (a mapping is passed to its constructor, which checks the fields);
    raises :class:`~privtext.errors.ConfigError` for anything else."""
    if isinstance(spec, VariationSpec):
        return spec
    if isinstance(spec, Mapping):
        return VariationSpec(**spec)
    raise ConfigError(f"spec must be a VariationSpec, got {type(spec).__name__}")


def check_examples(examples: Any, n: int) -> list[list[str]]:
    """Per-prompt public example texts for ``seeded``: ``None`` → no examples; else one list per keyphrase list."""
    if examples is None:
        return [[] for _ in range(n)]
    if isinstance(examples, (str, bytes)):
        raise DataError("examples must be one list of example texts per keyphrase list, got a single string")
    out = [check_texts(e, what=f"examples[{i}]") for i, e in enumerate(check_texts_lists(examples))]
    if len(out) != n:
        raise DataError(f"{len(out)} example lists for {n} keyphrase lists")
    return out


def check_texts_lists(x: Any) -> list[Any]:
    """``x`` as a list (the per-prompt example lists of ``seeded``); raises :class:`~privtext.errors.DataError` when
    it is not iterable."""
    try:
        return list(x)
    except TypeError:
        raise DataError(f"examples must be a sequence of lists of texts, got {type(x).__name__}") from None


def check_keyphrases(keyphrases: Any) -> list[list[str]]:
    """The keyphrase lists with every phrase stripped; raises :class:`~privtext.errors.DataError` for a single
    string (at the top or as one list) or an empty or non-string phrase, naming its position."""
    if isinstance(keyphrases, (str, bytes)):
        raise DataError("keyphrases must be a sequence of keyphrase lists, got a single string")
    out = []
    for i, kp in enumerate(keyphrases):
        if isinstance(kp, (str, bytes)):
            raise DataError(
                f"keyphrases[{i}] is the string {kp!r}; pass one list of phrases per document, e.g. [[{kp!r}]]"
            )
        phrases = list(kp)
        for j, p in enumerate(phrases):
            if not isinstance(p, str) or not p.strip():
                raise DataError(f"keyphrases[{i}][{j}] must be a non-empty string, got {p!r}")
        out.append([p.strip() for p in phrases])
    return out


def check_doc_type(doc_type: Any) -> str:
    """``doc_type`` stripped; raises :class:`~privtext.errors.ConfigError` unless it is a non-empty string."""
    if not isinstance(doc_type, str) or not doc_type.strip():
        raise ConfigError(f"doc_type must be a non-empty string such as 'medical record', got {doc_type!r}")
    return doc_type.strip()


# ------------------------------------------------------------------------------------------------ base class


class BaseGenerator:
    """Shared plumbing: argument checks, stats, prompt logging. Backends implement the ``_op`` methods."""

    backend: ClassVar[str] = "base"
    Options: ClassVar[type[BaseModel]] = BackendOptions
    #: target lengths and the cap every output honours (set by build_generator: released, configured, or the
    #: prompt family's prior; None: the backend's own lengths)
    length: LengthTarget | None = None

    def __init__(self, *, family: PromptFamily | None = None, prompt_log: PromptLog | None = None,
                 name: str | None = None):
        from .prompts import load_family

        self.family = family if family is not None else load_family("generic")
        self.prompt_log = prompt_log
        self.name = name or self.backend
        self.stats = GenerationStats()
        self._closed = False

    def wants_prior(self, prior: LengthTarget) -> bool:
        """Whether a prompt family's length prior should steer this generator (a model prompted without any
        length knowledge: yes). The n-gram backend declines it when its public text already has such lengths."""
        return True

    # factories used by build_generator
    @classmethod
    def from_options(cls, options: Any, ctx: GeneratorContext, *, family: PromptFamily, name: str | None) -> Any:
        """The generator for parsed ``options`` in a run (``ctx``); a backend that needs more of the run than its
        prompt log (a public corpus to train on, the guard) overrides this."""
        return cls(options=options, family=family, prompt_log=ctx.prompt_log, name=name)

    # ---- logging
    def _log(self, operation: str, prompt: Any, meta: Mapping[str, Any] | None = None) -> None:
        if self.prompt_log is not None:
            self.prompt_log.log(backend=self.backend, operation=operation, prompt=prompt, meta=meta)

    @contextmanager
    def _timed(self) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stats.seconds += time.perf_counter() - t0

    def _check_open(self) -> None:
        if self._closed:
            from ..errors import BackendError

            raise BackendError(f"generator {self.name!r} is closed")

    # ---- public API
    def random(self, label: LabelInfo | None, n: int, *, rng: np.random.Generator) -> list[str]:
        """``n`` new texts (RANDOM_API) after checking the arguments; no backend call for ``n == 0``. Raises
        :class:`~privtext.errors.BackendError` when closed or when the backend returns another count."""
        n = check_n(n)
        label = check_label(label)
        check_rng(rng)
        return self._produce(n, lambda: self._random(label, n, rng))

    def variation(
        self, texts: Sequence[str], label: LabelInfo | None, spec: VariationSpec, *, rng: np.random.Generator
    ) -> list[str]:
        """One variation per text (VARIATION_API) after checking the arguments, in order. Raises
        :class:`~privtext.errors.BackendError` when closed or when the backend returns another count."""
        texts = check_texts(texts)
        label = check_label(label)
        spec = check_spec(spec)
        check_rng(rng)
        return self._produce(len(texts), lambda: self._variation(texts, label, spec, rng))

    def seeded(self, keyphrases: Sequence[Sequence[str]], doc_type: str, *, rng: np.random.Generator,
               examples: Sequence[Sequence[str]] | None = None) -> list[str]:
        """One document per keyphrase list. ``examples`` (DP-KPS few-shot, App B.2.5): per list, PUBLIC example
        texts shown in its prompt (``None`` or empty lists: none)."""
        kps = check_keyphrases(keyphrases)
        doc_type = check_doc_type(doc_type)
        ex = check_examples(examples, len(kps))
        check_rng(rng)
        return self._produce(len(kps), lambda: self._seeded(kps, doc_type, rng, ex))

    def contrastive(
        self, good: Sequence[str], bad: Sequence[str], label: LabelInfo | None, n: int, *, rng: np.random.Generator
    ) -> list[str]:
        """``n`` texts from WASP's contrastive prompt after checking the arguments; raises
        :class:`~privtext.errors.DataError` when ``n`` > 0 and ``good`` is empty (``bad`` may be)."""
        good = check_texts(good, what="good")
        bad = check_texts(bad, what="bad")
        n = check_n(n)
        label = check_label(label)
        check_rng(rng)
        self._check_open()
        if n and not good:
            raise DataError("contrastive generation needs at least one good example (bad examples may be empty)")
        return self._produce(n, lambda: self._contrastive(good, bad, label, n, rng))

    def _produce(self, n: int, make: Callable[[], list[str]]) -> list[str]:
        """What every operation does once its arguments are checked: refuse a closed generator, return nothing
        for ``n == 0`` without calling the backend, else time the backend's ``make()`` and check it gave ``n``
        texts (:meth:`_finish`)."""
        self._check_open()
        if n == 0:
            return []
        with self._timed():
            out = make()
        self._finish(out, n)
        return out

    def close(self) -> None:
        """Mark the generator closed (backends also free their model or connections); later calls raise
        :class:`~privtext.errors.BackendError`."""
        self._closed = True

    def __enter__(self) -> BaseGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _finish(self, out: list[str], expected: int) -> None:
        if len(out) != expected:  # a backend bug, never a user error
            from ..errors import BackendError

            raise BackendError(f"{self.name}: backend returned {len(out)} texts for {expected} requested")
        self.stats.texts += len(out)
        tell = getattr(self.prompt_log, "generated", None)  # a PromptLog tells the run's guard (guard.py)
        if tell is not None:
            if getattr(self, "trained_on_checked_public", False):
                tell(out, public_model=True)
            else:
                tell(out)

    # ---- to implement
    def _random(self, label: LabelInfo | None, n: int, rng: np.random.Generator) -> list[str]:
        raise NotImplementedError

    def _variation(self, texts: list[str], label: LabelInfo | None, spec: VariationSpec,
                   rng: np.random.Generator) -> list[str]:
        raise NotImplementedError

    def _seeded(self, keyphrases: list[list[str]], doc_type: str, rng: np.random.Generator,
                examples: list[list[str]]) -> list[str]:
        raise NotImplementedError

    def _contrastive(self, good: list[str], bad: list[str], label: LabelInfo | None, n: int,
                     rng: np.random.Generator) -> list[str]:
        raise NotImplementedError


class LocalModelOptions(BackendOptions):
    """The options of a model run on this machine that every engine takes: the ``transformers`` and ``vllm``
    backends, and ``local``, which passes exactly these on to the engine it picks (one place for their defaults
    and bounds)."""

    model: str = Field(description="a local folder or a hub name in the local cache")
    tokenizer: str | None = Field(default=None, description="defaults to model")
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=0, ge=0, description="0 disables top-k")
    repetition_penalty: float = Field(default=1.0, gt=0)
    chat_template: Literal["auto", "always", "never"] = "auto"
    system_prompt: str | None = Field(default=None, description="replaces the prompt family's system message")
    trust_remote_code: bool = False


def check_local_model(options: Any, engine: str) -> None:
    """A local model's ``preflight``, before a run directory exists: its model (and its tokenizer, when another one
    is named) can be loaded here, offline included."""
    from ..backends.hub import check_model_available

    check_model_available(options.model, what=f"generator ({engine})")
    if options.tokenizer:
        check_model_available(options.tokenizer, what=f"generator tokenizer ({engine})")


class PromptedGenerator(BaseGenerator):
    """A model behind prompts (transformers, vLLM, OpenAI-compatible): every operation renders one prompt per
    output from the prompt family and hands the batch to :meth:`_complete`, which the backend implements.

    Local models (transformers, vLLM) set ``tokenizer`` and ``use_chat`` and render with :meth:`render`: the
    tokenizer's chat template when it has one (and ``chat_template`` is not ``never``), the plain prompt text
    otherwise; ``options.system_prompt`` replaces the family's system line when given."""

    tokenizer: Any = None
    use_chat: bool = False

    def __init__(self, *, options: Any = None, **kw: Any):
        super().__init__(**kw)
        self.options = options
        if options is not None and self.name == self.backend:  # named by its model: "vllm:Qwen/Qwen2.5-7B"
            self.name = f"{self.backend}:{options.model}"

    def _choose_chat(self, mode: str, model: str) -> bool:
        """Whether prompts go through ``tokenizer``'s chat template (``chat_template``: ``auto`` when the tokenizer
        has one, ``never``, or ``always``, a :class:`~privtext.errors.ConfigError` when it has none)."""
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if mode == "always" and not has_template:
            raise ConfigError(f"chat_template: always, but the tokenizer of {model!r} has no chat template")
        return has_template and mode != "never"

    def render(self, prompt: Any) -> tuple[str, Any]:
        """(text fed to the model, what is logged: chat messages or the plain text)."""
        from .prompts import Prompt

        override = getattr(getattr(self, "options", None), "system_prompt", None)
        p = Prompt(user=prompt.user, system=override if override is not None else prompt.system)
        if not self.use_chat:
            return p.text(), p.text()
        messages = p.messages()
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception:  # templates that reject a system role: fold it into the user turn
            messages = [{"role": "user", "content": p.text().strip()}]
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return str(text), messages

    def _complete(self, operation: str, prompts: list[Any], rng: np.random.Generator) -> list[str]:
        raise NotImplementedError

    def _capped(self, out: list[str]) -> list[str]:
        """Outputs cut at the length target's cap (a model may run past the length it was asked for)."""
        if self.length is None:
            return out
        from .length import cap_words

        return [cap_words(t, self.length.max_words) for t in out]

    def _random(self, label: LabelInfo | None, n: int, rng: np.random.Generator) -> list[str]:
        prompts = [self.family.random_prompt(label, rng, target_words=self.length.draw(rng) if self.length else None)
                   for _ in range(n)]
        return self._capped(self._complete("random", prompts, rng))

    def _variation(self, texts: list[str], label: LabelInfo | None, spec: VariationSpec,
                   rng: np.random.Generator) -> list[str]:
        if spec.kind == "blank":
            prompts = [self.family.blank_variation_prompt(t, spec.mask_prob, label, rng) for t in texts]
        else:
            prompts = [self.family.paraphrase_prompt(t, label, spec.style, rng) for t in texts]
        return self._capped(self._complete("variation", prompts, rng))

    def _seeded(self, keyphrases: list[list[str]], doc_type: str, rng: np.random.Generator,
                examples: list[list[str]]) -> list[str]:
        return self._capped(self._complete("seeded", [self.family.seeded_prompt(k, doc_type, examples=e)
                                                      for k, e in zip(keyphrases, examples, strict=True)], rng))

    def _contrastive(self, good: list[str], bad: list[str], label: LabelInfo | None, n: int,
                     rng: np.random.Generator) -> list[str]:
        prompts = [self.family.contrastive_prompt(good, bad, label, rng) for _ in range(n)]
        return self._capped(self._complete("contrastive", prompts, rng))
