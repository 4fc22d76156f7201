"""``method: dpkps`` — DP-KPS as a run (dpkps.txt §2): DP vocabulary → per-class DP-KDE sketches → keyphrase
sequences → one generator prompt per sequence. The pipeline itself and its options (:class:`DPKPSOptions`, the
``dpkps:`` section) are :mod:`.core`; this module gives it a run directory, a ledger, the release keeper, the label
schema and the statement.

Budget (pure ε-DP, add/remove one private record)
-------------------------------------------------
``privacy: {epsilon: ε}`` is the total (a ``delta`` may be given; pure ε-DP implies (ε, δ)-DP for every δ). It is
split as

* ``synthesis.label_distribution.kind: dp`` — ε_labels = ``budget_fraction``·ε for a Laplace(1/ε_labels) label
  histogram (Δ₁ = 1: one record changes one count by 1; :func:`privtext.mechanisms.labels.laplace_label_histogram`);
* ``dpkps.epsilon_vocab`` and ``dpkps.epsilon_kde`` when both are given (their sum with ε_labels must not exceed
  ε), else ε_vocab = ``vocab_share``·(ε − ε_labels) and ε_kde = the rest (default 1/6: the paper's 1 + 5).

The releases — vocabulary (Δ₁ = r, App A.1), the per-class term histogram (``sketch: histogram``, the default
for independent sequences: Δ₁ = c_w) or the K RFF sketches of ε_kde/K each (``sketch: rff``: Δ₁ = √2·c_w·I,
App A.2 / proof of Thm A.1; derivations in :mod:`privtext.mechanisms.vocabulary` and
:mod:`privtext.mechanisms.kde`) and the optional label histogram — are recorded in the ledger (:meth:`privtext.privacy.budget.Budget.pure`: the sum of
their ε, exact for pure DP) before each reads private data, computed, checked and kept
(``private/checkpoints/releases``): a resumed run reloads them and never draws noise again.

Prompts: one ``generator.seeded`` call per sequence naming only the document type and the terms (the prompt
family's ``seeded.template``); each text takes the class of the sketch its sequence came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...config import Config
from ...data import Corpus
from ...errors import ConfigError
from ...privacy.relation import NeighbouringRelation
from ...progress import progress
from ..base import Inputs, LabelNoise, MethodDescription, MethodRun, RunContext, StatementParts, Synthetic
from .core import DEFAULT_VOCAB_SIZE, DPKPSOptions, dpkps_plan, dpkps_sequences

if TYPE_CHECKING:
    from ...privacy.ledger import Ledger


def pure_budget(config: Config) -> Any:
    """The run's pure-ε :class:`~privtext.privacy.budget.Budget`: ``privacy: {epsilon: ε}``, or ``{epsilon,
    delta}`` (pure ε-DP implies (ε, δ)-DP for every δ, so the run is held to pure ε)."""
    from ...privacy import Budget

    b = Budget.from_config(config.privacy)
    if b.kind not in ("pure", "dp"):
        raise ConfigError(f"method dpkps is pure ε-DP: give privacy: {{epsilon: ...}} (got a {b.kind!r} budget)")
    return Budget.pure(b.epsilon)  # type: ignore[arg-type]


def budget_split(config: Config, options: DPKPSOptions, budget: Any = None) -> Any:
    """The run's pure-ε :class:`~privtext.privacy.budget.BudgetSplit` (module docstring) of ``budget`` (the run's
    pure budget; default: :func:`pure_budget` of ``config``): ``labels`` (with a DP label histogram), ``vocab``
    and ``kde``."""
    from ...privacy.budget import BudgetSplit

    total = float((pure_budget(config) if budget is None else budget).epsilon)
    ld = config.synthesis.label_distribution
    eps_labels = ld.budget_fraction * total if (ld.kind == "dp" and config.data.label_columns) else None
    rest = total - (eps_labels or 0.0)
    ev, ek = options.epsilon_vocab, options.epsilon_kde
    if (ev is None) != (ek is None):
        raise ConfigError("dpkps.epsilon_vocab and dpkps.epsilon_kde go together (or give neither and set "
                          "dpkps.vocab_share)")
    if ev is None or ek is None:
        ev, ek = options.vocab_share * rest, (1 - options.vocab_share) * rest
    elif ev + ek > rest * (1 + 1e-9):
        raise ConfigError(f"dpkps.epsilon_vocab + dpkps.epsilon_kde = {ev + ek:g} exceeds privacy.epsilon = {total:g}"
                          + (f" less ε_labels = {eps_labels:g}" if eps_labels else ""))
    return BudgetSplit.pure(total, {**({"labels": eps_labels} if eps_labels else {}), "vocab": float(ev),
                                    "kde": float(ek)})


def split_epsilon(config: Config, options: DPKPSOptions, budget: Any = None) -> tuple[float, float, float | None]:
    """(ε_vocab, ε_kde, ε_labels or None) of the run's budget (:func:`budget_split`)."""
    split = budget_split(config, options, budget)
    return split.epsilon("vocab"), split.epsilon("kde"), split.epsilon("labels") if split.has("labels") else None


class DPKPS(MethodRun):
    name: ClassVar[str] = "dpkps"
    description: ClassVar[MethodDescription] = MethodDescription(
        section="dpkps", title="DP-KPS", guarantee="pure", audit_game="membership", unit="one shot",
        progress_words="one release, no iterations (one prompt per sampled keyphrase sequence)",
        release_words="a DP vocabulary and per-class term histograms",
        zero_shot_words="every DP-KPS prompt holds released keyphrases, so none of its outputs is generator-only",
        control=("privacy.epsilon=1e-06",),
        control_words="the same run at ε = 10⁻⁶: the released vocabulary and sketches carry no signal")
    demo: ClassVar[dict[str, Any] | None] = {"evolution": None,  # one shot: no loop settings
                                             "dpkps": {"vocab_size": 150, "length": 6}}
    Options = DPKPSOptions
    options: DPKPSOptions

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        """The budget split (:func:`budget_split`) and how the options combine (:meth:`DPKPSOptions.check`)."""
        cls.resolved_options(config, options)

    @staticmethod
    def resolved_options(config: Config, options: DPKPSOptions, budget: Any = None) -> DPKPSOptions:
        """``options`` with ε_vocab and ε_kde of the run's budget split (:func:`split_epsilon`), checked: what
        the library functions of :mod:`.core` take."""
        ev, ek, _ = split_epsilon(config, options, budget)
        return options.with_epsilons(ev, ek)

    def budget_of(self) -> Any:
        return pure_budget(self.config)

    def neighbouring(self, inputs: Inputs) -> NeighbouringRelation:
        """``dpkps.neighbouring``: add/remove one document (the paper) or replace one; every release of the run,
        the label histogram included, takes its Δ₁ from it."""
        return NeighbouringRelation.of(self.options.neighbouring)

    # ------------------------------------------------------------------ pieces
    def public_vocabulary(self, public: Corpus | None) -> Any:
        from ...data.vocabulary import load_glossary, vocabulary_from_corpus

        o = self.options
        if o.glossary:
            return load_glossary(o.glossary, max_terms=o.vocabulary_max_terms)
        if public is None:
            raise ConfigError("method dpkps needs a public vocabulary: give data.public (its words and phrases) or "
                              "dpkps.glossary (a term list)")
        return vocabulary_from_corpus(list(public.texts), min_count=o.vocabulary_min_count,
                                      max_terms=o.vocabulary_max_terms)

    def few_shot_examples(self, public: Corpus | None, n: int) -> list[list[str]] | None:
        """``dpkps.few_shot`` public texts per prompt (drawn without replacement within a prompt; public
        randomness), or None."""
        k = self.options.few_shot
        if k == 0:
            return None
        if public is None or len(public) == 0:
            raise ConfigError(f"dpkps.few_shot = {k} needs public example texts: give data.public")
        rng = self.rng("dpkps", "few_shot")
        m = min(k, len(public))
        return [[public.texts[int(i)] for i in rng.choice(len(public), size=m, replace=False)] for _ in range(n)]

    # ------------------------------------------------------------------ the generation (one shot)
    def generate(self, ctx: RunContext) -> Synthetic:
        from ...privacy.statement import released_number

        space, public = ctx.space, ctx.public
        ev, ek, eps_labels = split_epsilon(self.config, self.options, self.budget)
        self.eps = {"vocab": ev, "kde": ek, "labels": eps_labels}
        self.params = params = self.resolved_options(self.config, self.options, self.budget)
        gen = ctx.generator
        with self.metrics.stage("public_vocabulary"):
            vocab = self.public_vocabulary(public)
        if params.vocab_size is None and len(vocab) < DEFAULT_VOCAB_SIZE:
            self.log(f"dpkps.vocab_size: the public vocabulary has {len(vocab)} terms, fewer than the default "
                     f"{DEFAULT_VOCAB_SIZE}: the DP vocabulary is chosen among all of them")
        self.params = params = params.sized_for(len(vocab))  # DPKPSOptions.sized_for: public, no private record
        self.log(f"public vocabulary: {len(vocab)} terms; releases: "
                 + ", ".join(f"{p.key} (ε={p.meta['epsilon']:.4g})" for p in dpkps_plan(params)))
        counts = ctx.label_counts(LabelNoise("laplace", epsilon=eps_labels) if eps_labels else None)
        classes = [str(g) for g in range(len(space))]
        groups = ctx.private_groups
        keep = groups >= 0
        priv = ctx.inputs.private.subset(np.flatnonzero(keep)) if not keep.all() else ctx.inputs.private
        with self.metrics.stage("dp_keyphrases"):
            kp = dpkps_sequences(priv.texts, [str(g) for g in groups[keep]], classes=classes,
                                 public_vocabulary=vocab, embedder=ctx.embedder, params=params,
                                 n_per_class={c: int(n) for c, n in zip(classes, counts, strict=True)},
                                 rng=self.rng("dpkps"), keeper=ctx.keeper, noise_rng=self.noise_rng)
        self.keyphrases = kp
        doc_type = self.options.doc_type or getattr(getattr(gen, "family", None), "doc_type", None) or "text"
        seqs = [list(s) for s in kp.sequences]
        texts: list[str] = []
        rng_gen = self.rng("dpkps", "generate")
        shots = self.few_shot_examples(public, len(seqs))
        with self.metrics.stage("generation"), progress("generation (one prompt per sequence)", len(seqs)) as bar:
            for s in range(0, len(seqs), self.options.batch_size):
                b = slice(s, s + self.options.batch_size)
                texts.extend(gen.seeded(seqs[b], doc_type, rng=rng_gen,
                                        examples=shots[b] if shots is not None else None))
                bar.advance(len(seqs[b]))
        v = kp.vocabulary
        self.released["dp_vocabulary"] = {t: released_number(c) for t, c in zip(v.terms, v.noisy_counts,
                                                                                 strict=True)}
        self.log(f"{len(seqs)} keyphrase prompts")
        return Synthetic(texts=texts, groups=np.asarray([int(c) for c in kp.labels], dtype=np.int64),
                         keyphrases=seqs)

    # ------------------------------------------------------------------ the statement
    def statement_parameters(self) -> dict[str, Any]:
        ld = self.config.synthesis.label_distribution
        return {"num_samples": self.config.synthesis.num_samples, "label_distribution": ld.kind,
                "generator_calls": "one per keyphrase sequence"}

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """DP-KPS's guarantee in words; every number is configured (ε and its split, the parameters) or derived
        from the data-independent events."""
        s = ledger.spent()
        n = len(ledger)
        eps = self.eps
        p = self.params
        unit = self.relation.words()
        split = f"ε_vocab = {eps['vocab']:.4g}, ε_kde = {eps['kde']:.4g}" + (
            f", ε_labels = {eps['labels']:.4g}" if eps["labels"] else "")
        guarantee = {"kind": "pure", "budget": self.budget.to_dict(), "neighbouring_relation": unit, "releases": n,
                     "spent": {"epsilon": s["epsilon"]}, "epsilon_vocab": eps["vocab"], "epsilon_kde": eps["kde"],
                     **({"epsilon_labels": eps["labels"]} if eps["labels"] else {}),
                     "delta": 0.0}
        head = (f"pure {s['epsilon']:.4g}-differential privacy ({split}; δ = 0) for {unit} (budget ε = "
                f"{self.budget.epsilon:g})")
        ld = self.config.synthesis.label_distribution
        public = [
            "the public vocabulary (" + (f"the glossary {self.options.glossary}" if self.options.glossary else
                                         "words and phrases of the public corpus") + ")",
            "the label schema (class names; " + ("data.label_values" if self.config.data.label_values is not None
                                                 else "the label values of the public corpus") + ")",
            "the embedder, the generator and its public training text, and the random Fourier features",
        ]
        if p.vocab_selection == "idf" or p.idf_term_weights(has_document_counts=not self.options.glossary):
            public.append("the public corpus's document frequencies of the vocabulary terms (idf weights)")
        if ld.kind != "dp" and self.config.data.label_columns:
            public.append(f"the samples per class ({ld.kind} label distribution)")
        if self.options.few_shot:
            public.append(f"the {self.options.few_shot} example texts per prompt, drawn from the public corpus "
                          "(few-shot)")
        coverage = ["The prompts are built from the document type and released keyphrases only (post-processing "
                    "of the DP vocabulary and sketches), never from a class name or a private record; the prompt "
                    "audit checks every prompt sent for private text."]
        return StatementParts(
            guarantee=guarantee, headline=head + f", over {n} noisy releases.",
            parameters={"epsilon_vocab": eps["vocab"], "epsilon_kde": eps["kde"], "r": p.r,
                        "vocab_size": p.vocab_size, "length": p.length, "sequence": p.sequence,
                        "n_features": p.n_features, "bandwidth": p.bandwidth, "threshold": p.threshold,
                        "noise": p.noise, "weighting": p.weighting, "sketch": p.sketch_kind,
                        "term_weighting": p.term_weighting, "contrast": p.contrast,
                        "vocab_selection": p.vocab_selection,
                        **({"epsilon_labels": eps["labels"]} if eps["labels"] else {})},
            assumed_public=[], treated_as_public=public, coverage=coverage)


__all__ = ["DPKPS", "DPKPSOptions", "split_epsilon"]
