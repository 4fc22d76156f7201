"""DP-KPS as a library (dpkps.txt §2, Fig 3): DP vocabulary → per-class DP-KDE sketches → keyphrase sequences →
one generator prompt per sequence (the library; the run is :mod:`privtext.methods.dpkps`).

Pipeline
--------
1. **DP vocabulary** (App A.1, :func:`privtext.mechanisms.vocabulary.dp_vocabulary`): each private document's
   first r public-vocabulary terms, Laplace histogram of scale r/ε_vocab, top ``vocab_size`` → Ṽ. ε_vocab.
2. **Embed Ṽ** with the run's embedder (public: Ṽ is released). Rows are renormalised to unit length (Thm A.1
   assumes unit-norm blocks).
3. **Per-class DP-KDE sketches** (§2, App A.2, :mod:`privtext.mechanisms.kde`): a document's keyphrases are the
   Ṽ terms it contains, in order of first occurrence (first ``max_terms``), its unit of mass spread over them
   uniformly or ∝ their public idf (``term_weighting``). ``sketch="rff"``: one Gaussian-kernel sketch per block
   count of the sequence mode (independent: 1; iterative: ⌈log₂ L⌉ (log) or L (linear)), each ε_kde/K, every
   sketch holding all classes (parallel composition over the disjoint classes); the random Fourier features of
   each sketch are public randomness with bandwidth h·√m. ``sketch="histogram"`` (``auto`` for independent
   sequences): one release of the per-class term histogram over Ṽ, the DP-KDE of the discrete kernel
   (:func:`~privtext.mechanisms.kde.dp_term_histogram`: Δ₁ = 1, noise √2/ε_kde per term where the RFF score's
   is 2√I/ε_kde; docs/dpkps.md "Class signal" for the measurements).
4. **Sequences** (post-processing): ``n_per_class`` sequences of L terms per class, independent or iterative;
   ``contrast`` α multiplies a class's weights by its lift over the all-class estimate to the power α.
5. **Prompts** (post-processing): ``generator.seeded(sequences, doc_type)`` — one prompt per sequence, naming
   only the document type and the terms (the family's ``seeded`` template), never the class; each text takes
   the class of the sketch its sequence came from.

Releases: each noisy release is described (:func:`dpkps_plan`: :func:`~privtext.privacy.release.laplace_release`,
Δ₁ from the neighbouring relation), recorded and computed through ``keeper.release`` (a run's
:class:`~privtext.privacy.release.ReleaseKeeper`, or :class:`~privtext.privacy.release.DirectReleases`
for library use), so nothing private is read before its event is recorded and a resumed run reloads the kept
values instead of drawing noise again. ``method: dpkps`` is :mod:`privtext.methods.dpkps`.

Guarantee: pure (ε_vocab + ε_kde)-DP for add/remove-one-document neighbours (``neighbouring="replace_one"``:
the same ε for replace-one neighbours, with twice the noise). The event is
``ComposedDpEvent([LaplaceDpEvent(1/ε_vocab), ComposedDpEvent([LaplaceDpEvent(K/ε_kde)] * K)])`` (K = 1 for the
histogram), built without data by :func:`dpkps_event`; :func:`dpkps_plan` lists the releases in order. The
options added for class signal change no sensitivity: idf selection and idf weights are per-document maps using
public document frequencies (a document still counts ≤ r distinct terms; its weights still sum to 1), and
contrast sampling reads released values only.

What is treated as public: the public vocabulary, the class names (``classes``: the label schema, never derived
from the private labels), ``n_per_class``, every parameter of :class:`DPKPSOptions`, the embedder and generator,
and the random features. Private: the texts and their labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field

from ...backends import BackendOptions
from ...data.vocabulary import PublicVocabulary
from ...errors import ConfigError, DataError, InvalidPrivacyParameter
from ...mechanisms.kde import (
    BlockProjections,
    KDESketch,
    RandomFourierFeatures,
    TermHistogram,
    TermRecords,
    dp_kde_sketch_terms,
    dp_term_histogram,
    ensemble_blocks,
    ensemble_epsilons,
    histogram_contribution,
    kde_ensemble_event,
    sketch_contribution,
    sketch_sensitivity,
)
from ...mechanisms.vocabulary import (
    VocabularyRelease,
    check_epsilon,
    check_neighbouring,
    dp_vocabulary,
    vocabulary_contribution,
    vocabulary_event,
)
from ...privacy.relation import NeighbouringRelation
from ...privacy.release import DirectReleases, Release, laplace_release
from .sampling import sample_histogram_sequences, sample_sequences


def _pos_int(name: str, v: Any, *, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ConfigError(f"dpkps.{name} must be a positive integer, got {v!r}")


#: |Ṽ| when ``dpkps.vocab_size`` is not set and the public vocabulary has at least as many terms
DEFAULT_VOCAB_SIZE = 400


class DPKPSOptions(BackendOptions):
    """Every public parameter of DP-KPS: the ``dpkps:`` config section of a run, and the parameters of the library
    functions below (one class, one set of defaults: what ``privtext run`` uses).

    ``r`` is the paper's (§3 "Method components": r = 10). ``vocab_size`` (400) and ``length`` (8) are smaller
    than the paper's |Ṽ| = 1000, L = 10: chosen on the Yelp validation slice (docs/dpkps.md). ``bandwidth``,
    ``n_features`` and ``threshold`` default to what worked there with MiniLM: the paper's h = 1 made the sampled
    sequences chance-level even without noise (the KDE of unit-norm word embeddings is nearly flat at h = 1), and
    the Laplace noise of a score grows like √I, so few features are better at ε ≤ 15 on corpora of thousands of
    records. ``sketch``, ``term_weighting`` and ``contrast`` default to what carried class signal on Yelp
    (N = 2000, ε = 10; docs/dpkps.md "Class signal"): the term histogram (``bandwidth`` and ``n_features`` then
    unused), idf weights when the public vocabulary has document counts, lift exponent 1. ``sketch="rff",
    term_weighting="uniform", contrast=0`` is the paper's estimator and distribution.

    ``epsilon_vocab`` and ``epsilon_kde`` may be left out of a run's section (the run splits its budget:
    :func:`privtext.methods.dpkps.method.budget_split`); the library functions need both
    (:meth:`with_epsilons`, :meth:`from_total`). Pydantic checks each field on construction; :meth:`check`
    checks how they combine (called by the run before anything is written and by every library function)."""

    epsilon_vocab: float | None = Field(default=None, gt=0, description="ε of the DP vocabulary (with epsilon_kde)")
    epsilon_kde: float | None = Field(default=None, gt=0, description="ε of all DP-KDE sketches together")
    vocab_share: float = Field(default=1 / 6, gt=0, lt=1, description="ε_vocab / (ε − ε_labels) when the two "
                               "epsilons are not given")
    r: int = Field(default=10, ge=1, description="terms per document in the vocabulary histogram (App A.1's S)")
    vocab_size: int | None = Field(
        default=None, ge=1, description="|Ṽ|, the DP vocabulary's size (default: 400, or the whole public vocabulary "
        "when it has fewer terms)")
    length: int = Field(default=8, ge=1, description="L, keyphrases per sequence")
    sequence: Literal["independent", "iterative"] = "independent"
    ensemble: Literal["log", "linear"] = "log"
    n_features: int = Field(default=256, ge=1, description="I, random Fourier features per sketch")
    bandwidth: float = Field(default=0.3, gt=0, description="h, per block (the paper: 1)")
    max_terms: int | None = Field(default=64, ge=1, description="keyphrases per document used by the sketches")
    noise: Literal["sum", "paper"] = "sum"
    weighting: Literal["mean", "sum"] = "mean"
    max_points: int | None = Field(default=None, ge=1, description="per-document cap for weighting='sum'")
    neighbouring: Literal["add_remove", "replace_one"] = "add_remove"
    allow_repeats: bool = Field(default=False, description="may a term appear twice in one sequence")
    threshold: float = Field(default=2.0, ge=0, description="κ: scores below κ noise standard deviations get no "
                             "probability (0: the paper)")
    sketch: Literal["auto", "histogram", "rff"] = Field(
        default="auto", description="the density release: histogram (the discrete-kernel DP-KDE on the DP "
        "vocabulary; noise √2/ε per term) or rff (the paper's Gaussian DP-KDE with random Fourier features; noise "
        "2√I/ε per score); auto: histogram for independent sequences, rff for iterative ones (docs/dpkps.md)")
    term_weighting: Literal["auto", "uniform", "idf"] = Field(
        default="auto", description="how a document's unit of sketch mass is spread over its terms: uniform, or "
        "∝ the terms' public idf (auto: idf when the public vocabulary has document counts)")
    contrast: float = Field(default=1.0, ge=0, description="sampling: class weights × (lift over the all-class "
                            "estimate)^contrast; 0 is the paper's distribution")
    vocab_selection: Literal["first", "idf"] = Field(
        default="first", description="which r terms of a document the DP vocabulary counts: its first r (the "
        "paper) or its r of highest public idf")
    glossary: str | None = Field(default=None, description="public vocabulary file (one term a line); default: "
                                 "words and phrases of the public corpus")
    vocabulary_min_count: int = Field(default=3, ge=1)
    vocabulary_max_terms: int = Field(default=5000, ge=1)
    doc_type: str | None = Field(default=None, description="the document type named in the prompts (default: the "
                                 "prompt family's)")
    batch_size: int = Field(default=256, ge=1)
    few_shot: int = Field(default=0, ge=0, description="public example texts in each seeded prompt (App B.2.5), "
                          "drawn at random from data.public")

    def check(self) -> DPKPSOptions:
        """``self`` when its parameters combine into a run; else a :class:`ConfigError` naming them. The epsilons,
        when given, are checked too (:func:`~privtext.mechanisms.vocabulary.check_epsilon`)."""
        for name in ("epsilon_vocab", "epsilon_kde"):
            if getattr(self, name) is not None:
                check_epsilon(getattr(self, name), name=name)
        for name in ("r", "length", "n_features"):
            _pos_int(name, getattr(self, name))
        _pos_int("vocab_size", self.vocab_size, allow_none=True)
        _pos_int("max_terms", self.max_terms, allow_none=True)
        check_neighbouring(self.neighbouring)
        ensemble_blocks(self.length, sequence=self.sequence, ensemble=self.ensemble)  # validates both
        sketch_sensitivity(self.n_features, noise=self.noise, weighting=self.weighting, max_points=self.max_points,
                           neighbouring=self.neighbouring)
        h = self.bandwidth
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not 0 < h < math.inf:
            raise ConfigError(f"dpkps.bandwidth must be a positive finite number, got {h!r}")
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < math.inf:
            raise ConfigError(f"dpkps.threshold must be a finite number ≥ 0, got {t!r}")
        c = self.contrast
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c < math.inf:
            raise ConfigError(f"dpkps.contrast must be a finite number ≥ 0, got {c!r}")
        if self.term_weighting == "idf" and self.weighting != "mean":
            raise ConfigError("dpkps.term_weighting='idf' needs weighting='mean' (a record's weights sum to 1)")
        if self.sketch == "histogram" and self.sequence != "independent":
            raise ConfigError("dpkps.sketch='histogram' draws independent terms; iterative sequences need "
                              "sketch='rff' (the KDE of m-term windows)")
        if self.sketch_kind == "histogram" and self.noise == "paper":
            raise ConfigError("dpkps.noise='paper' is the RFF class-mean sketch of App A.2: use sketch='rff'")
        if not self.allow_repeats and self.vocab_size is not None and self.vocab_size < self.length:
            raise ConfigError(f"dpkps.vocab_size={self.vocab_size} < length={self.length}: sequences of distinct "
                              "terms need at least L terms (or set allow_repeats)")
        if self.max_terms is not None and self.sequence == "iterative" and self.max_terms < self.length:
            raise ConfigError(f"dpkps.max_terms={self.max_terms} < length={self.length}: no document could "
                              "contribute to the L-block sketch")
        return self

    def sized_for(self, public_terms: int) -> DPKPSOptions:
        """A checked copy with ``vocab_size`` resolved for a public vocabulary of ``public_terms`` terms: the value
        set, else :data:`DEFAULT_VOCAB_SIZE` (400), or all ``public_terms`` when the public vocabulary is smaller
        (a few hundred short public messages hold about 110 terms: the fixed default refused them, issue 35). The
        public vocabulary's size is a property of the public corpus, so the choice depends on no private record. A
        size the user set that exceeds the public vocabulary stays an error (:func:`dpkps_sequences`)."""
        if self.vocab_size is not None:
            return self
        return self.model_copy(update={"vocab_size": min(DEFAULT_VOCAB_SIZE, int(public_terms))}).check()

    def with_epsilons(self, epsilon_vocab: float, epsilon_kde: float) -> DPKPSOptions:
        """A checked copy with both epsilons set (what the library functions take)."""
        return self.model_copy(update={"epsilon_vocab": float(epsilon_vocab),
                                       "epsilon_kde": float(epsilon_kde)}).check()

    @classmethod
    def from_total(cls, epsilon: float, *, vocab_share: float = 1 / 6, **kw: Any) -> DPKPSOptions:
        """Split one ε: ε_vocab = share·ε, ε_kde = the rest (default 1/6: the paper's ε = 6 = 1 + 5 setting)."""
        e = check_epsilon(epsilon, name="epsilon")
        if not 0 < vocab_share < 1:
            raise InvalidPrivacyParameter(f"vocab_share must be in (0, 1), got {vocab_share!r}")
        base = cls(vocab_share=vocab_share, **kw)
        if math.isinf(e):
            return base.with_epsilons(math.inf, math.inf)
        return base.with_epsilons(vocab_share * e, (1 - vocab_share) * e)

    @property
    def epsilon_total(self) -> float:
        """ε_vocab + ε_kde (both must be set)."""
        ev, ek = _epsilons(self)
        return ev + ek

    def idf_term_weights(self, has_document_counts: bool) -> bool:
        """Whether the sketch's term weights are the public idf: ``term_weighting="idf"``, or ``"auto"`` when the
        public vocabulary has document counts and ``weighting="mean"``."""
        return self.term_weighting == "idf" or (
            self.term_weighting == "auto" and self.weighting == "mean" and has_document_counts)

    @property
    def sketch_kind(self) -> str:
        """'histogram' (the discrete-kernel DP-KDE on Ṽ) or 'rff' (the Gaussian DP-KDE with random features)."""
        if self.sketch != "auto":
            return self.sketch
        return "histogram" if self.sequence == "independent" else "rff"

    @property
    def blocks(self) -> tuple[int, ...]:
        """Block counts m of the sketches (one sketch each)."""
        return ensemble_blocks(self.length, sequence=self.sequence, ensemble=self.ensemble)


def _epsilons(params: DPKPSOptions) -> tuple[float, float]:
    """(ε_vocab, ε_kde) of options the library functions were given: both must be set."""
    ev, ek = params.epsilon_vocab, params.epsilon_kde
    if ev is None or ek is None:
        raise ConfigError("the DP-KPS library functions need dpkps.epsilon_vocab and dpkps.epsilon_kde: give both "
                          "(DPKPSOptions.with_epsilons or DPKPSOptions.from_total)")
    return ev, ek


def _checked(params: DPKPSOptions) -> DPKPSOptions:
    """``params`` checked (:meth:`DPKPSOptions.check`) with both epsilons set, before anything is recorded."""
    if not isinstance(params, DPKPSOptions):
        raise ConfigError(f"params must be DPKPSOptions, got {type(params).__name__}")
    _epsilons(params)
    return params.check()


def dpkps_plan(params: DPKPSOptions) -> list[Release]:
    """The releases of a run, in order, described without data: each a Laplace release whose Δ₁ is the relation's
    (``params.neighbouring``: add/remove or replace one document) for the mechanism's per-document contribution
    (:func:`~privtext.mechanisms.vocabulary.vocabulary_contribution`, :func:`~privtext.mechanisms.kde.
    histogram_contribution`, :func:`~privtext.mechanisms.kde.sketch_contribution`)."""
    params = _checked(params)
    eps_vocab, eps_kde = _epsilons(params)
    relation = NeighbouringRelation.of(params.neighbouring)
    out = [laplace_release(
        "dpkps/vocabulary", mechanism="dp_vocabulary", epsilon=eps_vocab,
        contribution=vocabulary_contribution(params.r), relation=relation,
        description=f"DP vocabulary (App A.1): first {params.r} terms per document, Laplace histogram, top "
                    + (f"{params.vocab_size}" if params.vocab_size is not None else
                       f"{DEFAULT_VOCAB_SIZE} (or every public term, when fewer)"))]
    if params.sketch_kind == "histogram":
        out.append(laplace_release(
            "dpkps/histogram", mechanism="dp_term_histogram", epsilon=eps_kde,
            contribution=histogram_contribution(weighting=params.weighting, max_points=params.max_points),
            relation=relation,
            description=f"per-class DP term histogram over Ṽ (the discrete-kernel DP-KDE), all classes (parallel "
                        f"composition), weighting={params.weighting}, term_weighting={params.term_weighting}"))
        return out
    contribution = sketch_contribution(params.n_features, noise=params.noise, weighting=params.weighting,
                                       max_points=params.max_points)
    for m, eps in zip(params.blocks, ensemble_epsilons(eps_kde, len(params.blocks)), strict=True):
        out.append(laplace_release(
            f"dpkps/kde/m={m}", mechanism="dp_rff_sketch", epsilon=eps, contribution=contribution, relation=relation,
            description=f"DP-KDE sketch over {m}-term windows, all classes (parallel composition), "
                        f"{params.n_features} random Fourier features, noise={params.noise}"))
    return out


def dpkps_event(params: DPKPSOptions) -> Any:
    """The run's event, without data: ``ComposedDpEvent([vocabulary, ComposedDpEvent(sketches)])``."""
    from ...privacy.events import composed

    params = _checked(params)
    eps_vocab, eps_kde = _epsilons(params)
    n_sketches = 1 if params.sketch_kind == "histogram" else len(params.blocks)
    return composed([
        vocabulary_event(params.r, eps_vocab, neighbouring=params.neighbouring),
        kde_ensemble_event(eps_kde, n_sketches),
    ])


@dataclass(frozen=True)
class KeyphraseSequences:
    """The released (DP) part of a run: Ṽ, the sketches and the sampled sequences, class by class."""

    classes: tuple[str, ...]
    vocabulary: VocabularyRelease
    sketches: tuple[KDESketch | TermHistogram, ...]
    sequences: tuple[tuple[str, ...], ...]  # class-major: all of classes[0], then classes[1], ...
    labels: tuple[str, ...]  # the class of each sequence
    event: Any
    releases: tuple[Release, ...]

    @property
    def terms(self) -> tuple[str, ...]:
        return self.vocabulary.terms


@dataclass(frozen=True)
class DPKPSResult:
    texts: list[str]
    labels: list[str]
    keyphrases: KeyphraseSequences
    doc_type: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sequences(self) -> tuple[tuple[str, ...], ...]:
        return self.keyphrases.sequences

    @property
    def event(self) -> Any:
        return self.keyphrases.event


def _class_ids(labels: Sequence[Any], classes: Sequence[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(classes)}
    if len(index) != len(classes):
        raise ConfigError(f"classes must be distinct, got {list(classes)}")
    out = np.empty(len(labels), dtype=np.int64)
    bad: list[str] = []
    for j, lab in enumerate(labels):
        i = index.get(str(lab))
        if i is None:
            if len(bad) < 5:
                bad.append(repr(lab))
            out[j] = -1
        else:
            out[j] = i
    if bad:
        raise DataError(f"private label(s) {', '.join(bad)} are not among the declared classes {list(classes)}")
    return out


def _counts(n_per_class: int | Mapping[str, int], classes: Sequence[str]) -> list[int]:
    if isinstance(n_per_class, Mapping):
        missing = [c for c in classes if c not in n_per_class]
        extra = [c for c in n_per_class if c not in classes]
        if missing or extra:
            raise ConfigError(f"n_per_class must name exactly the classes {list(classes)}; missing {missing}, "
                              f"unknown {extra}")
        vals = [n_per_class[c] for c in classes]
    else:
        vals = [n_per_class] * len(classes)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ConfigError(f"n_per_class values must be non-negative integers, got {v!r}")
    return [int(v) for v in vals]


def _embed_terms(embedder: Any, terms: Sequence[str]) -> np.ndarray:
    e = np.asarray(embedder.embed(list(terms)), dtype=np.float64)
    if e.shape != (len(terms), int(embedder.dim)):
        raise DataError(f"embedder returned shape {e.shape} for {len(terms)} terms of dimension {embedder.dim}")
    n = np.linalg.norm(e, axis=1, keepdims=True)
    if not np.all(np.isfinite(e)) or np.any(n == 0):
        raise DataError("embedder returned a zero or non-finite vector for a vocabulary term")
    return e / n


def _os_entropy_noise(key: str) -> np.random.Generator:
    """The default noise source of the library API: :func:`privtext.rng.noise_rng` (ChaCha20, fresh OS key)."""
    from ...rng import noise_rng

    return noise_rng(None, key)


def dpkps_sequences(
    private_texts: Sequence[str],
    private_labels: Sequence[Any],
    *,
    classes: Sequence[str],
    public_vocabulary: PublicVocabulary,
    embedder: Any,
    params: DPKPSOptions,
    n_per_class: int | Mapping[str, int],
    rng: np.random.Generator,
    keeper: Any = None,
    noise_rng: Callable[[str], np.random.Generator] | None = None,
) -> KeyphraseSequences:
    """Steps 1–4: the DP vocabulary, the sketches and the keyphrase sequences (no generator call).

    Every noisy release goes through ``keeper.release(Release, compute)`` (a run's
    :class:`~privtext.privacy.release.ReleaseKeeper`; default
    :class:`~privtext.privacy.release.DirectReleases`): described and recorded
    before ``compute`` reads private data; ``compute`` returns ``(arrays, event)``. ``rng`` is public randomness
    (random features, sampling); ``noise_rng(key)`` gives each release's noise generator. Default: a fresh
    ChaCha20 CSPRNG keyed by OS entropy per release (:func:`privtext.rng.noise_rng`), never the caller's ``rng``.
    Reproducible noise is an explicit opt-in and NOT private (whoever knows the seed can subtract the noise):
    ``noise_rng=lambda key: privtext.rng.noise_rng(seed, key, reproducible=True)``."""
    params = _checked(params).sized_for(len(public_vocabulary))
    classes, counts = _check_inputs(private_texts, private_labels, classes, public_vocabulary, params, n_per_class,
                                    rng)
    keeper = keeper if keeper is not None else DirectReleases()
    if "idf" in (params.vocab_selection, params.term_weighting):
        public_vocabulary.idf()  # public document frequencies are needed: fail before anything is recorded
    has_counts = public_vocabulary.counts is not None and public_vocabulary.documents is not None
    use_idf = params.idf_term_weights(has_counts)
    plan = dpkps_plan(params)
    _, rng_features, _, rng_sample = rng.spawn(4)  # four streams as before: the public draws stay as they were
    if noise_rng is None:
        noise_rng = _os_entropy_noise
    # 1. DP vocabulary
    vocab_release, dp_vocab = _release_vocabulary(private_texts, public_vocabulary, params, plan[0], keeper,
                                                  noise_rng)
    # 2. embed Ṽ (public)
    emb = _embed_terms(embedder, dp_vocab.terms)
    term_weights = dp_vocab.idf() if use_idf else None  # public: document frequencies in the public corpus
    # 3. the sketches (or the term histogram), read from the private terms once, after the first is recorded
    terms = _PrivateTerms(private_texts, private_labels, classes, dp_vocab, params.max_terms)
    if params.sketch_kind == "histogram":
        hist = _release_histogram(terms, len(classes), dp_vocab, term_weights, params, plan[1], keeper, noise_rng)
        # 4. sequences (post-processing of the release)
        ids = sample_histogram_sequences(hist, counts=counts, length=params.length, rng=rng_sample,
                                         allow_repeats=params.allow_repeats, threshold=params.threshold,
                                         contrast=params.contrast)
        return _keyphrase_sequences(classes, vocab_release, (hist,), ids, dp_vocab, params, plan)
    sketches, projections = _release_sketches(terms, len(classes), emb, term_weights, params, plan, keeper,
                                              noise_rng, rng_features)
    # 4. sequences (post-processing of the releases)
    ids = sample_sequences(sketches, projections, counts=counts, length=params.length, sequence=params.sequence,
                           rng=rng_sample, allow_repeats=params.allow_repeats,
                           threshold=params.threshold, contrast=params.contrast)
    return _keyphrase_sequences(classes, vocab_release, tuple(sketches), ids, dp_vocab, params, plan)


def _check_inputs(private_texts: Sequence[str], private_labels: Sequence[Any], classes: Sequence[str],
                  public_vocabulary: PublicVocabulary, params: DPKPSOptions, n_per_class: int | Mapping[str, int],
                  rng: np.random.Generator) -> tuple[tuple[str, ...], list[int]]:
    """The classes as strings and the number of sequences per class; a typed error naming any bad input, before
    anything is recorded."""
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    names = tuple(str(c) for c in classes)
    if not names:
        raise ConfigError("classes must list the public label values (at least one)")
    counts = _counts(n_per_class, names)
    if isinstance(private_texts, str) or len(private_texts) != len(private_labels):
        raise DataError(f"{len(private_texts)} private texts but {len(private_labels)} labels")
    if _vocab_size(params) > len(public_vocabulary):
        raise ConfigError(f"dpkps.vocab_size={params.vocab_size} exceeds the public vocabulary's "
                          f"{len(public_vocabulary)} terms")
    return names, counts


def _vocab_size(params: DPKPSOptions) -> int:
    """|Ṽ|: ``dpkps.vocab_size``, which :meth:`DPKPSOptions.sized_for` sets from the public vocabulary when the
    configuration leaves it out."""
    if params.vocab_size is None:
        raise ConfigError("dpkps.vocab_size is unset: size the options for the public vocabulary first "
                          "(DPKPSOptions.sized_for)")
    return int(params.vocab_size)


def _release_vocabulary(private_texts: Sequence[str], public_vocabulary: PublicVocabulary, params: DPKPSOptions,
                        planned: Release, keeper: Any, noise_rng: Callable[[str], np.random.Generator],
                        ) -> tuple[VocabularyRelease, PublicVocabulary]:
    """Step 1: the DP vocabulary Ṽ (released through ``keeper``) and Ṽ as a public vocabulary."""

    def vocab_compute() -> tuple[dict[str, np.ndarray], Any]:
        rel, ev = dp_vocabulary(private_texts, public_vocabulary, r=params.r, epsilon=_epsilons(params)[0],
                                size=_vocab_size(params), rng=noise_rng(planned.key), neighbouring=params.neighbouring,
                                select=params.vocab_selection)
        return {"indices": rel.indices, "noisy_counts": rel.noisy_counts}, ev

    vals = keeper.release(planned, vocab_compute)
    idx = np.asarray(vals["indices"], dtype=np.int64)
    vocab_release = VocabularyRelease(
        terms=tuple(public_vocabulary.terms[int(i)] for i in idx), indices=idx,
        noisy_counts=np.asarray(vals["noisy_counts"], dtype=np.float64), epsilon=_epsilons(params)[0], r=params.r,
        scale=planned.meta["laplace_scale"], sensitivity=planned.sensitivity, neighbouring=params.neighbouring,
        public_size=len(public_vocabulary))
    return vocab_release, vocab_release.vocabulary(public_vocabulary)


class _PrivateTerms:
    """The private records' Ṽ term ids and class ids, read at the first call (inside the first sketch's compute,
    after its release is recorded) and dropped by :meth:`clear` once every release is done."""

    def __init__(self, texts: Sequence[str], labels: Sequence[Any], classes: tuple[str, ...],
                 dp_vocab: PublicVocabulary, max_terms: int | None):
        self.texts, self.labels, self.classes = texts, labels, classes
        self.dp_vocab, self.max_terms = dp_vocab, max_terms
        self._read: tuple[list[list[int]], np.ndarray] | None = None

    def __call__(self) -> tuple[list[list[int]], np.ndarray]:
        if self._read is None:
            doc_classes = _class_ids(self.labels, self.classes)
            self._read = (self.dp_vocab.matcher().find_all(self.texts, max_terms=self.max_terms), doc_classes)
        return self._read

    def clear(self) -> None:
        self._read = None


def _term_records(terms: tuple[Any, Any], n_classes: int, params: DPKPSOptions,
                  term_weights: np.ndarray | None) -> TermRecords:
    """The private records as the sketch and the histogram take them: their term ids and classes, and the run's
    per-record weighting (``max_terms``, ``weighting``, ``max_points``, public ``term_weights``)."""
    doc_terms, doc_classes = terms
    return TermRecords(doc_terms, doc_classes, n_classes, max_terms=params.max_terms, weighting=params.weighting,
                       max_points=params.max_points, term_weights=term_weights)


def _release_histogram(terms: _PrivateTerms, n_classes: int, dp_vocab: PublicVocabulary,
                       term_weights: np.ndarray | None, params: DPKPSOptions, planned: Release, keeper: Any,
                       noise_rng: Callable[[str], np.random.Generator]) -> TermHistogram:
    """Step 3 (``sketch_kind: histogram``): the per-class DP term histogram, released through ``keeper``."""

    def hist_compute() -> tuple[dict[str, np.ndarray], Any]:
        h, ev = dp_term_histogram(_term_records(terms(), n_classes, params, term_weights), n_terms=len(dp_vocab),
                                  epsilon=_epsilons(params)[1], rng=noise_rng(planned.key),
                                  neighbouring=params.neighbouring)
        return {"noisy": h.noisy}, ev

    vals = keeper.release(planned, hist_compute)
    terms.clear()
    noisy = np.asarray(vals["noisy"], dtype=np.float64)
    if noisy.shape != (n_classes, len(dp_vocab)):
        raise DataError(f"release {planned.key}: a histogram of shape {noisy.shape}, expected "
                        f"{(n_classes, len(dp_vocab))} (was the run resumed with other classes?)")
    return TermHistogram(noisy=noisy, epsilon=_epsilons(params)[1], scale=planned.meta["laplace_scale"],
                         sensitivity=planned.sensitivity, weighting=params.weighting,
                         neighbouring=params.neighbouring)


def _release_sketches(terms: _PrivateTerms, n_classes: int, emb: np.ndarray, term_weights: np.ndarray | None,
                      params: DPKPSOptions, plan: list[Release], keeper: Any,
                      noise_rng: Callable[[str], np.random.Generator], rng_features: np.random.Generator,
                      ) -> tuple[list[KDESketch], list[BlockProjections]]:
    """Step 3: one DP-KDE sketch per block count m (ε_kde split equally), each released through ``keeper``; the
    random features are public and kept with the release (resume draws none again)."""
    blocks = params.blocks
    eps_each = ensemble_epsilons(_epsilons(params)[1], len(blocks))
    sketches: list[KDESketch] = []
    projections: list[BlockProjections] = []
    for k, (m, eps, r_feat) in enumerate(zip(blocks, eps_each, rng_features.spawn(len(blocks)), strict=True)):
        feats = RandomFourierFeatures.draw(m * emb.shape[1], params.n_features,
                                           bandwidth=params.bandwidth * math.sqrt(m), rng=r_feat)
        proj = BlockProjections(emb, feats, m)
        planned = plan[k + 1]

        def kde_compute(proj: BlockProjections = proj, eps: float = eps, key: str = planned.key
                        ) -> tuple[dict[str, np.ndarray], Any]:
            sk, ev = dp_kde_sketch_terms(_term_records(terms(), n_classes, params, term_weights), projections=proj,
                                         epsilon=eps, rng=noise_rng(key), noise=params.noise,
                                         neighbouring=params.neighbouring)
            return {"noisy": sk.noisy, "weights": proj.features.weights, "offsets": proj.features.offsets}, ev

        vals = keeper.release(planned, kde_compute)
        feats = RandomFourierFeatures(weights=np.asarray(vals["weights"]), offsets=np.asarray(vals["offsets"]),
                                      bandwidth=params.bandwidth * math.sqrt(m))
        proj = BlockProjections(emb, feats, m)
        noisy = np.asarray(vals["noisy"], dtype=np.float64)
        if noisy.shape != (n_classes, params.n_features):
            raise DataError(f"release {planned.key}: a sketch of shape {noisy.shape}, expected "
                            f"{(n_classes, params.n_features)} (was the run resumed with other classes?)")
        sketches.append(KDESketch(features=feats, blocks=m, block_dim=emb.shape[1], noisy=noisy, epsilon=eps,
                                  scale=planned.meta["laplace_scale"], sensitivity=planned.sensitivity, noise=params.noise,
                                  weighting=params.weighting, neighbouring=params.neighbouring))
        projections.append(proj)
    terms.clear()
    return sketches, projections


def _keyphrase_sequences(classes: tuple[str, ...], vocab_release: VocabularyRelease,
                         sketches: tuple[KDESketch | TermHistogram, ...], ids: list[np.ndarray],
                         dp_vocab: PublicVocabulary, params: DPKPSOptions, plan: list[Release]
                         ) -> KeyphraseSequences:
    seqs: list[tuple[str, ...]] = []
    labels: list[str] = []
    for c, arr in zip(classes, ids, strict=True):
        for row in arr:
            seqs.append(tuple(dp_vocab.terms[i] for i in row))
            labels.append(c)
    return KeyphraseSequences(classes=classes, vocabulary=vocab_release, sketches=sketches,
                              sequences=tuple(seqs), labels=tuple(labels), event=dpkps_event(params),
                              releases=tuple(plan))


def run_dpkps(
    private_texts: Sequence[str],
    private_labels: Sequence[Any],
    *,
    classes: Sequence[str],
    public_vocabulary: PublicVocabulary,
    embedder: Any,
    generator: Any,
    params: DPKPSOptions,
    n_per_class: int | Mapping[str, int],
    rng: np.random.Generator,
    doc_type: str | None = None,
    keeper: Any = None,
    noise_rng: Callable[[str], np.random.Generator] | None = None,
    batch_size: int = 256,
) -> DPKPSResult:
    """Steps 1–5: synthetic texts with their classes. One ``generator.seeded`` prompt per sequence; the prompt
    names ``doc_type`` (default: the generator's prompt family's document type) and the terms only."""
    params = _checked(params)
    _pos_int("batch_size", batch_size)
    if doc_type is None:
        family = getattr(generator, "family", None)
        doc_type = getattr(family, "doc_type", None) or "text"
    rng_seq, rng_gen = rng.spawn(2)
    kp = dpkps_sequences(private_texts, private_labels, classes=classes, public_vocabulary=public_vocabulary,
                         embedder=embedder, params=params, n_per_class=n_per_class, rng=rng_seq, keeper=keeper,
                         noise_rng=noise_rng)
    texts: list[str] = []
    seqs = [list(s) for s in kp.sequences]
    for s in range(0, len(seqs), batch_size):
        texts.extend(generator.seeded(seqs[s:s + batch_size], doc_type, rng=rng_gen))
    if len(texts) != len(seqs):
        raise DataError(f"the generator returned {len(texts)} texts for {len(seqs)} prompts")
    return DPKPSResult(texts=texts, labels=list(kp.labels), keyphrases=kp, doc_type=doc_type,
                       meta={"prompts": len(seqs)})


__all__ = [
    "DPKPSOptions",
    "DPKPSResult",
    "KeyphraseSequences",
    "dpkps_event",
    "dpkps_plan",
    "dpkps_sequences",
    "run_dpkps",
]
