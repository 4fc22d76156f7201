"""Aug-PE: Private Evolution for text with DP nearest-neighbour votes (the baseline of all three papers).

Privacy (record-level, add/remove one private record)
-----------------------------------------------------
Each iteration releases one vote histogram: one vote per record, so L2 sensitivity Δ = 1 under add/remove one
record (Δ from the run's relation, :mod:`privtext.privacy.relation`; see :mod:`privtext.mechanisms.voting`) and
Gaussian noise N(0, σ²Δ²): a Gaussian mechanism with noise multiplier σ. T iterations are the T-fold composition (plus one Gaussian label histogram when
``synthesis.label_distribution.kind = dp``). Budget forms:

* ``{epsilon, delta}`` — σ is the smallest value whose composition meets (ε, δ) under the PLD accountant
  (tight); ``privacy.calibration: paper`` uses σ = √T/μ with μ from (ε, δ) by GDP duality instead.
* ``{mu}`` — μ-GDP composes exactly: σ = √T/μ (Dong et al.; the Aug-PE calibration).
* ``{secret: {p, r}}`` — μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (SecPE Eq 4 / Lemma 3.2), then as ``{mu}``: every secret gets
  (p, r)-protection *when each secret sits in one record*. A secret repeated in k records needs group sensitivity
  k (``augpe.sensitivity: secret_group``, SecPE's second GDP baseline): the run's relation is then the secret
  group of k (k found before the first release), which multiplies the noise of EVERY release by k — the votes,
  the label histogram (Δ = k) and the DP vocabulary of ``vocabulary_prompts`` (Δ₁ = k·r).
* ``{noise_multiplier}`` — σ as given; the ledger only reports ε at δ = 1e-5.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from ...backends import BackendOptions
from ...config import Config
from ...engine.learning import learn_parameters, with_learn_hooks
from ...errors import ConfigError
from ...mechanisms.distributed import build_counter
from ...privacy.release import Release
from ..base import Computed, EvolutionMethod, LabelNoise, MethodDescription, RunContext, StatementParts
from ..parties import PartiesOptions, check_parties
from ..votes import DPVoteMethod
from .scorers import DPVoteScorer, FederatedVoteScorer
from .vocabulary import VocabularyPrompts

if TYPE_CHECKING:
    from ...atomicio import PromptLog
    from ...data import Corpus
    from ...embed.base import Embedder
    from ...engine.loop import Scorer
    from ...generate.base import Generator
    from ...guard import PrivateGuard
    from ...privacy.budget import Budget
    from ...privacy.events import DpEvent
    from ...privacy.ledger import Ledger


class AugPEOptions(BackendOptions):
    """The ``augpe:`` section. ``sensitivity: secret_group`` is SecPE's second GDP baseline: the vote histogram's
    sensitivity is the number of private records holding the most-repeated secret (found by ``detector``)."""

    sensitivity: Literal["record", "secret_group"] = "record"
    detector: str | dict[str, Any] | list[str | dict[str, Any]] = "regex"
    vocabulary_prompts: bool = Field(
        default=False, description="DP-KPS's baseline (dpkps.txt §3): release a DP vocabulary (Laplace, App A.1) and "
        "write the initial candidates from prompts holding random DP-vocabulary terms, with no class topic")
    vocabulary_epsilon_fraction: float = Field(default=1 / 6, gt=0, lt=1, description="share of privacy.epsilon "
                                               "spent on the DP vocabulary (pure ε; the votes get the rest)")
    vocabulary_size: int = Field(default=400, ge=1)
    vocabulary_r: int = Field(default=10, ge=1)
    vocabulary_terms: int = Field(default=8, ge=1, description="DP-vocabulary terms per prompt")
    parties: PartiesOptions | None = Field(
        default=None, description="several data holders (the PrE-Text setting): each party votes on its own "
        "records and only the securely aggregated noisy sum is released (privtext.federated.votes)")


def label_sigma_ratio(fraction: float, compositions: int) -> float:
    """σ_label/σ so that the label release takes ``fraction`` of the GDP budget μ² and the T votes the rest
    (:func:`privtext.privacy.calibration.share_noise_ratio`): σ_l = σ·√((1−f)/(f·T))."""
    from ...privacy.calibration import share_noise_ratio

    return share_noise_ratio(fraction, compositions=compositions)


class AugPE(DPVoteMethod, EvolutionMethod):
    """Aug-PE (module docstring): the Gaussian-vote methods' budget, relation and statement, and the evolution loop
    with a vote scorer."""

    name: ClassVar[str] = "augpe"
    description: ClassVar[MethodDescription] = MethodDescription(
        section="augpe", title="Aug-PE", guarantee="approximate", audit_game="membership", unit="iteration",
        planned="iterations", checkpoints=True, votes=True, zero_shot=True,
        release_words="the released noisy histogram values",
        control=("privacy={noise_multiplier: 1000000.0}",),
        control_words="the same run with σ = 10⁶ on every release: its votes and label histogram carry nothing")
    demo: ClassVar[dict[str, Any] | None] = {}
    Options = AugPEOptions
    options: AugPEOptions

    @classmethod
    def learns_from_votes(cls, options: Any) -> tuple[bool, str]:
        """Aug-PE learns from its votes unless ``augpe.vocabulary_prompts`` wraps its generator."""
        return not options.vocabulary_prompts, "augpe.vocabulary_prompts wraps the generator in DP-vocabulary prompts"

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        if options.vocabulary_prompts and config.privacy.kind != "dp":
            raise ConfigError("augpe.vocabulary_prompts spends part of an (ε, δ) budget on a Laplace vocabulary: "
                              f"give privacy: {{epsilon, delta}} (got a {config.privacy.kind!r} budget)")
        if options.sensitivity == "secret_group":
            from ...secrets import build_detector

            build_detector(options.detector)
        if options.parties is not None:
            check_parties(config, options.parties, cls.name)
            if options.sensitivity != "record":
                raise ConfigError("augpe.parties counts each party's own votes; augpe.sensitivity: "
                                  f"{options.sensitivity} needs every record's secrets in one place (use record)")
            if options.vocabulary_prompts:
                raise ConfigError("augpe.parties with augpe.vocabulary_prompts: the DP vocabulary would need its "
                                  "own aggregation over the parties (not implemented); drop one of the two")

    # ------------------------------------------------------------------ noise
    def calibrate(self, compositions: int, label_fraction: float | None) -> tuple[float, float | None]:
        """σ for T vote releases (+ an optional label release taking ``label_fraction`` of the budget), from the
        run's budget through :func:`~privtext.privacy.calibration.noise_multiplier`: the smallest σ whose
        composition (the DP vocabulary, the label histogram at σ·ratio, T votes) meets it; σ = √T/μ with
        ``privacy.calibration: paper`` when the votes are the only releases; a fixed noise budget's σ."""
        from ...privacy.calibration import noise_multiplier, paper_noise_multiplier
        from ...privacy.events import composed, gaussian_event, self_composed

        b = self.budget
        ratio = label_sigma_ratio(label_fraction, compositions) if label_fraction else None
        if b.kind == "noise":
            if b.noise_multiplier == 0:
                self.log("noise_multiplier 0: NO PRIVACY (non-private reference run)")
            # the label release gets the same share of the (implicit) budget as with a target: σ_l = σ·ratio
            vocab = None
        else:
            vocab = self.vocabulary_event()

        def make(s: float) -> DpEvent:
            votes = self_composed(gaussian_event(s), compositions)
            parts = ([vocab] if vocab is not None else []) + ([gaussian_event(s * ratio)] if ratio is not None else [])
            return composed([*parts, votes]) if parts else votes

        def paper(budget: Budget) -> float:
            return paper_noise_multiplier(budget, compositions=compositions)

        use_paper = self.config.privacy.calibration == "paper" and ratio is None and vocab is None
        sigma = noise_multiplier(b, make, formula=paper if use_paper else None)
        return sigma, (sigma * ratio if ratio is not None else None)

    # ------------------------------------------------------------------ DP-vocabulary prompts (DP-KPS's baseline)
    def vocabulary_prompts_on(self) -> bool:
        return bool(self.options.vocabulary_prompts)

    def vocabulary_epsilon(self) -> float | None:
        if not self.vocabulary_prompts_on():
            return None
        # a share of the run's (ε, δ) budget (check_config: vocabulary prompts need one); the votes get the rest
        return self.options.vocabulary_epsilon_fraction * float(self.budget.epsilon)

    def vocabulary_event(self) -> DpEvent | None:
        """The DP vocabulary's Laplace event (None without vocabulary prompts)."""
        from ...privacy.events import laplace_event

        eps = self.vocabulary_epsilon()
        return None if eps is None else laplace_event(eps)

    def build_backends(self, public: Corpus | None, guard: PrivateGuard,
                       prompt_log: PromptLog) -> tuple[list[Generator], Embedder | None]:
        gens, emb = super().build_backends(public, guard, prompt_log)
        if self.vocabulary_prompts_on():
            gens = [VocabularyPrompts(g, terms_per_prompt=self.options.vocabulary_terms) for g in gens]
        return gens, emb

    def release_vocabulary(self, ctx: RunContext) -> None:
        """The DP vocabulary of DP-KPS (App A.1) for the baseline's prompts: Laplace(Δ₁/ε_v) on every public term,
        Δ₁ from the run's relation (r for one record, k·r for a secret's group of k), through the keeper (recorded
        before the private texts are read; kept for resume)."""
        from ...data.vocabulary import vocabulary_from_corpus
        from ...mechanisms.vocabulary import dp_vocabulary, vocabulary_contribution
        from ...privacy.statement import released_number

        o = self.options
        eps = self.vocabulary_epsilon()
        assert eps is not None
        if ctx.public is None:
            raise ConfigError("augpe.vocabulary_prompts needs data.public (the public vocabulary's source)")
        vocab = vocabulary_from_corpus(list(ctx.public.texts), min_count=3)
        size = min(o.vocabulary_size, len(vocab))
        key = "vocabulary"
        private_texts = ctx.inputs.private.texts

        def compute(r: Release) -> Computed:
            rel, event = dp_vocabulary(private_texts, vocab, r=o.vocabulary_r, epsilon=eps, size=size,
                                       rng=self.noise_rng(key), neighbouring=ctx.relation)
            return {"indices": rel.indices, "noisy_counts": rel.noisy_counts}, event

        vals = ctx.laplace(key, mechanism="dp_vocabulary", epsilon=eps,
                           contribution=vocabulary_contribution(o.vocabulary_r), compute=compute,
                           description=f"DP vocabulary (DP-KPS App A.1): first {o.vocabulary_r} public terms per "
                                       f"private record, Laplace histogram, top {size}")
        terms = [vocab.terms[int(i)] for i in vals["indices"]]
        for g in ctx.generators:
            g.terms = terms  # type: ignore[attr-defined]
        self.released["dp_vocabulary"] = {t: released_number(c) for t, c in zip(terms, vals["noisy_counts"],
                                                                                 strict=True)}

    # ------------------------------------------------------------------ the scorer
    def scorer(self, ctx: RunContext) -> tuple[Scorer, LabelNoise | None]:
        T = self.config.evolution.iterations
        ld = self.config.synthesis.label_distribution
        frac = ld.budget_fraction if (ld.kind == "dp" and ctx.space.columns) else None
        sigma, label_sigma = self.calibrate(T, frac)
        self.sigma, self.label_sigma = sigma, label_sigma
        if self.vocabulary_prompts_on():
            self.release_vocabulary(ctx)
        self.log(f"noise multiplier σ={sigma:.4f} for {T} vote releases; relation: {ctx.relation.words()}")
        private_emb = ctx.embed_private(ctx.inputs.private.texts)
        label_noise = LabelNoise("gaussian", sigma=label_sigma) if label_sigma is not None else None
        ev = self.config.evolution
        if self.options.parties is not None:
            self.released_rounds = []
            self.released["parties"] = {"rounds": self.released_rounds}  # survivors, sum noise std: public
            return with_learn_hooks(FederatedVoteScorer(
                parties=self.build_parties(private_emb, ctx.private_groups, ctx.inputs.party_of),
                options=self.options.parties,
                sigma=sigma, voting=self.config.voting, threshold=ev.threshold, relation=ctx.relation,
                keeper=ctx.keeper, value_bound=self.value_bound(), seed=self.seed,
                reproducible=self.config.privacy.reproducible_noise, drop=self.drop_hook(),
                on_round=self.released_rounds.append), ctx), label_noise
        scorer = DPVoteScorer(private_emb=private_emb, private_groups=ctx.private_groups, sigma=sigma,
                              voting=self.config.voting, threshold=ev.threshold, relation=ctx.relation,
                              keeper=ctx.keeper, noise_rng=self.noise_rng, counter=build_counter(self.config.cluster))
        return with_learn_hooks(scorer, ctx), label_noise

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """The vote methods' statement, with the learning settings (issue 38) among the parameters when learning
        is on, stated as post-processing."""
        parts = super().statement_parts(ledger)
        parts.parameters.update(learn_parameters(self.config.evolution))
        return parts


__all__ = ["AugPE", "AugPEOptions", "label_sigma_ratio"]
