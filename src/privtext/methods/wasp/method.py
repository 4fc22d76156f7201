"""WASP: contrastive private data synthesis with several weighted generators (wasp.txt §4, Alg 1), single holder.

One run, T rounds (``evolution.iterations``), N synthetic samples in all (``synthesis.num_samples``), K generators
(``generators:`` — any mix of backends; a single ``generator:`` is one generator):

1. round t generates n_t samples (N split over the T rounds by largest remainder), N_k = n_t·w_k of them by
   generator k (Eq 2; largest remainder, so the N_k add up to n_t) and each generator's share over the labels by
   the public label weights. Round 0 prompts every generator zero-shot (RANDOM_API, w_k = 1/K); later rounds
   prompt with the contrastive few-shot prompt (§4.6, Tab 7: worse examples, better examples, the instruction;
   each prompt shows a random half of each, the family's ``sample_fraction``).
2. the collective set D (accumulated over rounds) is embedded and voted on by the private samples with Top-Q
   voting (Eq 3-6, :mod:`privtext.mechanisms.topq`): a noisy nearest histogram H̃ⁿ and furthest histogram H̃ᶠ,
   ONE Gaussian release per round through the :class:`~privtext.privacy.ReleaseKeeper`. No vote follows the
   last round (it would feed nothing): T − 1 releases (Alg 1; the paper's √(T−1)).
3. per label c, the top-S of H̃ⁿ over D[c] are the better examples and the top-S of H̃ᶠ the worse ones (Eq 7;
   a sample in both lists is kept only as a better one — post-processing). ``contrastive: false`` shows only
   the better ones (the paper's "w/o contrastive").
4. the generator weights (Eq 8): w_k ∝ mean of H̃ⁿ over generator k's samples in D, clipped at 0 (all ≤ 0:
   equal weights). ``weighting: equal`` keeps w_k = 1/K (the paper's "w/o PLM importance weighting").

Everything after the release (selection, weights, prompts) is post-processing of released values. The output
is D after round T − 1 (all N samples).

Baselines in the same runner: ``wasp.feedback: none`` is FuseGen-style zero-shot fusion (every round zero-shot,
equal weights, no private data read, no release); single-generator Aug-PE is ``method: augpe`` with that
generator.

Privacy (record level, add/remove one private sample)
-----------------------------------------------------
Each release has L2 sensitivity Δ_Q = √(2·Σ_{q=1..Q} 4^−(q−1)) (derivation in :mod:`privtext.mechanisms.topq`)
and noise std z·Δ_Q per bin: ``GaussianDpEvent(z)``. T − 1 releases compose exactly (PLD / μ-GDP); the default
``privacy.calibration: pld`` finds the smallest z meeting the budget. ``privacy.calibration: paper`` uses the
paper's noise std s = 4·√(2 ln(1.25/δ))·√(T−1)/ε (Alg 1 line 2, Δ = 4 of Thm D.2) and the ledger accounts it
as z = s/Δ_Q — the privacy it actually gives, which is more than the budget asks for.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ...backends import BackendOptions
from ...config import Config, GeneratorConfig
from ...data.labels import LabelSpace
from ...data.population import Population
from ...engine.learning import learn_parameters
from ...errors import ConfigError
from ...mechanisms.labels import allocate
from ...mechanisms.topq import dp_topq_histograms, paper_contribution, topq_contribution, topq_event
from ...privacy.release import gaussian_release
from ...progress import progress
from ..base import MethodDescription, RunContext, StatementParts, Synthetic, public_label_weights
from ..parties import PartiesOptions, check_parties
from ..votes import DPVoteMethod
from .calibration import paper_formula
from .rounds import (
    SHARED_SEP,
    assign_shared,
    copy_weights,
    generator_counts,
    generator_weights,
    round_sizes,
    select_examples,
    select_output,
    shared_keys,
)

if TYPE_CHECKING:
    from ...privacy.ledger import Ledger
    from ...rundir import IterationStore


class WASPOptions(BackendOptions):
    """The ``wasp:`` section."""

    q: int = Field(default=8, ge=1, le=64, description="Top-Q: votes per private sample in each histogram")
    in_context: int = Field(default=8, ge=1, le=256, description="S: better (and worse) examples per label")
    contrastive: bool = Field(default=True, description="show worse examples too (false: the paper's 'w/o "
                              "contrastive' few-shot prompt)")
    feedback: Literal["votes", "none"] = Field(
        default="votes", description="none: FuseGen-style zero-shot fusion, no private data read")
    weighting: Literal["votes", "equal"] = Field(default="votes", description="Eq 8 weights or equal weights")
    metric: Literal["l2", "cosine"] = Field(default="l2", description="distance of Eq 3")
    zero_shot_fraction: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of each later round's samples (per generator and label) "
        "written zero-shot instead of with the contrastive prompt (0: the paper's Alg 1)")
    output: Literal["all", "nearest"] = Field(
        default="all", description="all: every sample of D (Alg 1); nearest: vote on the final D too (one more "
        "release) and keep, per label, the samples with the largest released H̃ⁿ")
    oversample: float = Field(default=2.0, ge=1.0, le=100.0, description="output: nearest generates "
                              "ceil(oversample·N) samples in all and keeps N")
    parties: PartiesOptions | None = Field(default=None, description="several data holders (§4.7)")


@dataclass
class RoundInfo:
    """What one round did (all public: sizes, released-value functions)."""

    round: int
    n_per_generator: list[int]
    weights_used: list[float]
    weights_next: list[float] | None = None
    nearest_mean_per_generator: list[float] | None = None  # mean of H̃ⁿ over generator k's samples
    furthest_mean_per_generator: list[float] | None = None
    nearest_total: float | None = None
    furthest_total: float | None = None
    candidates: int = 0
    survivors: list[int] | None = None  # parties whose noisy vectors are in the round's sum (public)
    sum_noise_std: float | None = None  # std of the noise in that sum: σ·√(|S|/t) ≥ σ (public parameters)
    aggregation_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class RoundsState:
    """What the rounds carry from one to the next: the collective set D, the generator weights, each label's
    better and worse examples, the H̃ⁿ over D of the last round (zeros after an unvoted one) and the last
    released H̃ⁿ (which labels the shared pool's texts at the end)."""

    D: Population
    weights: np.ndarray
    examples: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    hn: np.ndarray = field(default_factory=lambda: np.zeros(0))
    h_assign: np.ndarray = field(default_factory=lambda: np.zeros(0))


class WASP(DPVoteMethod):
    """WASP (see the module docstring): the statement, budget and relation of the Gaussian-vote methods; its
    generation is the rounds of Alg 1 on the run skeleton."""

    name: ClassVar[str] = "wasp"
    description: ClassVar[MethodDescription] = MethodDescription(
        section="wasp", title="WASP", guarantee="approximate", audit_game="membership", unit="round",
        planned="iterations", checkpoints=True, output="all", votes=True, zero_shot=True,
        release_words="the released nearest-vote histogram (Top-Q, Eq 3-6) of each round's candidates",
        control=("wasp.feedback=none",),
        control_words="FuseGen-style zero-shot fusion: every round zero-shot, equal weights, no private data read, "
                      "no release")
    #: two offline generators of different strength, weighted by their votes (Eq 8)
    demo: ClassVar[dict[str, Any] | None] = {
        "generator": None, "generators": [{"backend": "ngram", "order": 4, "name": "ngram-4"},
                                          {"backend": "ngram", "order": 2, "name": "ngram-2"}],
        "evolution": {"iterations": 4}, "wasp": {"q": 4, "in_context": 4}}
    Options = WASPOptions
    options: WASPOptions
    sigma: float = 0.0  # noise multiplier z of every release
    sensitivity: float = 1.0  # Δ_Q of the run's relation
    rounds_info: list[RoundInfo]
    #: WASP's own closed-form σ (``privacy.calibration: paper``; ``privtext budget gaussian --method wasp``)
    paper_formula = staticmethod(paper_formula)

    @classmethod
    def check_learning(cls, config: Config, options: Any) -> None:
        """As every vote method's, and ``kind: rerank`` refused: it wraps the evolution loop's generator (Aug-PE,
        SecPE), and WASP's rounds call each generator themselves."""
        super().check_learning(config, options)
        if str((config.evolution.learn or {}).get("kind", "none")) == "rerank":
            raise ConfigError("evolution.learn.kind: rerank reranks the samples of the evolution loop (Aug-PE, "
                              "SecPE); WASP writes its rounds through each generator itself: use kind: dpo or none")

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        if config.evolution.final != "population":
            raise ConfigError(f"evolution.final: {config.evolution.final}: WASP's output is its collective set D "
                              "(wasp.output); the trained generators write the next rounds (use population)")
        p = config.privacy
        if config.synthesis.label_distribution.kind == "dp":
            raise ConfigError("WASP splits samples over labels by public weights: set "
                              "synthesis.label_distribution.kind to public, uniform or given (not dp)")
        if p.calibration == "paper" and options.feedback == "votes" and p.kind not in ("dp", "noise"):
            raise ConfigError("privacy.calibration: paper is WASP's (ε, δ) formula; give privacy.epsilon/delta "
                              f"(got a {p.kind} budget) or use calibration: pld")
        for i, g in enumerate(generator_configs(config)):
            if not isinstance(g, GeneratorConfig):
                raise ConfigError(f"generators[{i}] is not a generator section")
        names = [c.name or f"{c.backend}-{i}" for i, c in enumerate(generator_configs(config))]
        if len(set(names)) != len(names):
            raise ConfigError(f"generator names must be distinct, got {names}")
        if options.parties is not None:
            check_parties(config, options.parties, "wasp")
        check_unconditioned(config, options)

    def generator_configs(self) -> list[GeneratorConfig]:
        return generator_configs(self.config)

    # ------------------------------------------------------------------ privacy
    def releases(self) -> int:
        T = self.config.evolution.iterations
        if self.options.feedback == "none":
            return 0
        return T if self.options.output == "nearest" else max(T - 1, 0)

    def _contribution(self) -> Any:
        """One sample's Top-Q pair; a party's whole pair scaled to unit L2 with ``parties.normalise``."""
        from ...privacy.relation import party_normalised

        pt = self.options.parties
        c = topq_contribution(self.options.q)
        return party_normalised(c) if (pt is not None and pt.normalise) else c

    def calibrate_wasp(self) -> tuple[float, float]:
        """(z, Δ_Q): the noise multiplier of every release and the exact sensitivity under the run's relation
        (Δ_Q for one record, m·Δ_Q for a user capped at m records, 1 for normalised user votes). z comes from the
        run's budget through :func:`~privtext.privacy.calibration.noise_multiplier`: the smallest z meeting it
        for T − 1 releases, WASP's formula (:mod:`.calibration`) with ``privacy.calibration: paper``, or a fixed
        noise budget's z."""
        from ...privacy.calibration import noise_multiplier
        from ...privacy.events import gaussian_event, self_composed

        q = self.options.q
        delta_q = self.relation.sensitivity(self._contribution())
        n = self.releases()
        if n == 0:
            return 0.0, delta_q
        b = self.budget
        if b.kind == "noise" and b.noise_multiplier == 0:
            self.log("noise_multiplier 0: NO PRIVACY (non-private reference run)")
        formula = None
        if self.config.privacy.calibration == "paper":
            formula = paper_formula(releases=n, paper_sensitivity=self.relation.sensitivity(paper_contribution(q)),
                                    sensitivity=delta_q)
        z = noise_multiplier(b, lambda s: self_composed(gaussian_event(s), n), formula=formula)
        return z, delta_q

    def statement_parameters(self) -> dict[str, Any]:
        """WASP's rounds use T, N and the label distribution, not the evolution loop's variations or selection."""
        ev = self.config.evolution
        syn = self.config.synthesis
        return {"iterations": ev.iterations, "num_samples": syn.num_samples,
                "label_distribution": syn.label_distribution.kind, "calibration": self.config.privacy.calibration}

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """The Gaussian-vote methods' statement (:class:`~privtext.methods.votes.DPVoteMethod`) with WASP's
        parameters: Δ_Q, Top-Q, the prompts, the weighting, the generators."""
        parts = super().statement_parts(ledger)
        o = self.options
        parts.parameters.update({
            "noise_multiplier": self.sigma,
            "sensitivity": "user" if (o.parties is not None and o.parties.level == "user") else "record",
            "topq_sensitivity": self.sensitivity,
            "q": o.q, "in_context": o.in_context, "contrastive": o.contrastive, "feedback": o.feedback,
            "weighting": o.weighting, "zero_shot_fraction": o.zero_shot_fraction, "output": o.output,
            "oversample": o.oversample if o.output == "nearest" else None,
            "generators": list(self._gen_names),
            "shared_pool_generators": list(getattr(self, "_shared_names", [])),
            **learn_parameters(self.config.evolution)})
        if o.feedback == "none":
            parts.headline = ("No private data was read (wasp.feedback: none, FuseGen-style zero-shot fusion); "
                              + parts.headline)
        parts.treated_as_public = [*parts.treated_as_public, "the generators' names, backends and options"]
        return parts

    # ------------------------------------------------------------------ the rounds (the generation policy)
    def generate(self, ctx: RunContext) -> Synthetic:
        """Alg 1: T rounds of generation, embedding and (but after the last) one Top-Q vote release each; the
        output is the collective set D (``output: nearest``: the top of a last vote per label)."""
        o = self.options
        ev = self.config.evolution
        T, N = ev.iterations, self.config.synthesis.num_samples
        space = ctx.space
        gens = ctx.generators
        self._gen_names = [c.label(i) for i, c in enumerate(self.generator_configs())]
        K = len(self._gen_names)
        self.sigma, self.sensitivity = self.calibrate_wasp()
        n_rel = self.releases()
        if n_rel:
            self.log(f"Top-{o.q} votes: Δ={self.sensitivity:.4f}, noise multiplier z={self.sigma:.4f} "
                     f"(std {self.sigma * self.sensitivity:.4f}) for {n_rel} releases")
        label_w = public_label_weights(self.config, space, ctx.public)
        shared = self._shared_pool(gens, label_w, n_rel)
        n_gen = math.ceil(o.oversample * N) if o.output == "nearest" and n_rel else N
        sizes = round_sizes(n_gen, T)
        self.rounds_info = []
        self._gens = gens
        private_emb = None
        self._parties: list[Any] | None = None
        if n_rel:
            private_emb = ctx.embed_private(ctx.inputs.private.texts)
            if o.parties is not None:
                self._parties = self.build_parties(private_emb, ctx.private_groups, ctx.inputs.party_of)
        pool = RoundsState(D=Population.empty(ctx.embedder.dim), weights=np.full(K, 1.0 / K))
        self._learners = self._build_learners(ctx, gens) if n_rel else []
        with progress("rounds", T) as rounds:
            for t in range(T):
                store = self.run.iteration(t, space)
                if store.is_complete():  # resumed: the round's candidates, votes and weights were kept
                    self._reload_round(store, pool)
                else:
                    voted = bool(n_rel) and (t < T - 1 or o.output == "nearest")
                    n_k = generator_counts(pool.weights, int(sizes[t]))
                    info = RoundInfo(round=t, n_per_generator=[int(x) for x in n_k],
                                     weights_used=[float(x) for x in pool.weights])
                    new = self._generate_round(t, gens, space, label_w, n_k, pool.D, pool.examples, shared=shared,
                                               voted=voted)
                    self._round(t, ctx, store, pool, new, info, voted=voted, private_emb=private_emb)
                self._learn(t, T, ctx, store, pool.D)
                rounds.advance(1)
        D, hn = pool.D, pool.hn
        if any(shared):
            # each shared-pool text keeps the copy of the label whose private samples voted most for it
            keep = assign_shared(shared_keys(D.ids, D.origin), pool.h_assign, rng=self.rng("wasp-assign"))
            D, hn = D.take(keep), hn[keep]  # hn: over all of D (released, or zeros after an unvoted round)
        if o.output == "nearest" and n_rel:
            keep = select_output(hn, D.group, label_w, N, rng=self.rng("wasp-output"))
            D = D.take(keep)
        self._publish_rounds()
        return Synthetic(texts=list(D.texts), groups=np.asarray(D.group, dtype=np.int64))

    def _build_learners(self, ctx: RunContext, gens: list[Any]) -> list[tuple[str, Any]]:
        """One learner per generator it weights that ``evolution.learn.generators`` names (every one by default;
        issue 38; none for ``kind: none``). A generator it does not name writes as it is."""
        from ...learn.factory import build_learner
        from ...learn.options import learn_options

        learning = learn_options(self.config).generators
        out = []
        for k, (name, g) in enumerate(zip(self._gen_names, gens, strict=True)):
            if learning is not None and name not in learning:
                continue
            learner = build_learner(self.config.evolution.learn, g, label_info=ctx.space.info, seed=self.seed,
                                    secure=self.secure, name=name)
            if learner is not None:
                out.append((f"gen_{k}", learner))
        return out

    def _learn(self, t: int, T: int, ctx: RunContext, store: IterationStore, D: Population) -> None:
        """After round t's Top-Q release (kept, checkpointed) and before round t + 1 writes: each generator learns
        from its own candidates' pairs — the i-th highest released nearest count against the i-th highest
        released furthest count (:func:`privtext.learn.pairs.wasp_pairs`, Eq 7's better and worse examples), read
        from the keeper's kept value (no noise drawn on resume; a finished step is restored)."""
        key = f"votes/round_{t:03d}"
        if not self._learners or t >= T - 1 or not ctx.ledger.has(key):
            return
        from ...learn.pairs import ReleasedVotes

        nearest = ReleasedVotes.kept(ctx.keeper, key, "nearest")
        furthest = ReleasedVotes.kept(ctx.keeper, key, "furthest")
        for folder, learner in self._learners:
            with self.metrics.stage("learning", iteration=t) as st:
                rec = learner.step(t, D, nearest, furthest=furthest, folder=store.folder / "learn" / folder,
                                   guard=ctx.guard, lines=ctx.prompt_log.lines)
                st.count("pairs", rec.pairs)
            how = "restored from its checkpoint" if rec.resumed else f"{rec.seconds:.1f} s"
            self.log(f"round {t}: {learner.name} learned ({rec.kind}) from {rec.pairs} pairs, {how}")

    def _reload_round(self, store: IterationStore, pool: RoundsState) -> None:
        """A round a resumed run finds complete: its candidates, votes, weights and examples as kept."""
        pool.D, pool.hn, _, state = store.load_complete()
        info = RoundInfo(**state["round"])
        self.rounds_info.append(info)
        pool.weights = np.asarray(info.weights_next or info.weights_used)
        if "examples" in state:
            pool.examples = {int(c): (np.asarray(g, dtype=np.int64), np.asarray(b, dtype=np.int64))
                             for c, (g, b) in state["examples"].items()}
            pool.h_assign = pool.hn

    def _round(self, t: int, ctx: RunContext, store: IterationStore, pool: RoundsState, new: Population, info: RoundInfo, *,
               voted: bool, private_emb: np.ndarray | None) -> None:
        """One round after its generation (Alg 1 lines 4-12): embed the new samples into D, then (``voted``) the
        Top-Q release over D, the generator weights (Eq 8) and the examples of the next prompts (Eq 7); the round
        is checkpointed."""
        o = self.options
        K = len(self._gen_names)
        embedder = ctx.embedder
        # a shared-pool text has one copy per label: each distinct text is embedded once
        distinct = list(dict.fromkeys(new.texts))
        with self.metrics.stage("embedding", iteration=t) as st, \
                progress(f"round {t}: embedding", len(distinct)) as bar:
            e = (np.asarray(embedder.embed(distinct), dtype=np.float32) if distinct
                 else np.zeros((0, embedder.dim), dtype=np.float32))
            row = {x: i for i, x in enumerate(distinct)}
            new.emb = e[[row[x] for x in new.texts]] if len(new) else e
            bar.update(completed=len(distinct))
            st.count("texts", len(distinct))
        D = Population.concat([pool.D, new]) if len(pool.D) else new
        pool.D = D
        info.candidates = len(D)
        pool.hn = np.zeros(len(D))
        state: dict[str, Any] = {}
        good_idx = np.zeros(0, dtype=np.int64)
        if voted:
            assert private_emb is not None
            hn, hf, fed = self._vote(t, ctx, private_emb, D)
            pool.hn = pool.h_assign = hn
            if fed is not None:
                info.survivors = [int(x) for x in fed["survivors"]]
                info.sum_noise_std = float(fed["sum_noise_std"][0])
                sec = float(fed["seconds"][0])
                info.aggregation_seconds = sec if np.isfinite(sec) else None
            gi = np.array([self._gen_names.index(g) for g in D.generator], dtype=np.int64)
            rw = copy_weights(shared_keys(D.ids, D.origin))  # a pool text counts once, not per copy
            size = np.maximum(np.bincount(gi, weights=rw, minlength=K), 1e-12)
            means_n = np.bincount(gi, weights=hn, minlength=K) / size
            means_f = np.bincount(gi, weights=hf, minlength=K) / size
            if o.weighting == "votes":
                pool.weights = generator_weights(hn, gi, K, rw)
            info.weights_next = [float(x) for x in pool.weights]
            info.nearest_mean_per_generator = [float(x) for x in means_n]
            info.furthest_mean_per_generator = [float(x) for x in means_f]
            info.nearest_total, info.furthest_total = float(hn.sum()), float(hf.sum())
            pool.examples = select_examples(hn, hf, D.group, len(ctx.space), o.in_context,
                                            rng=self.rng("wasp-examples", t), contrastive=o.contrastive)
            state["examples"] = {str(c): [g.tolist(), b.tolist()] for c, (g, b) in pool.examples.items()}
            good_idx = np.concatenate([g for g, _ in pool.examples.values()]) if pool.examples else good_idx
            self.log(f"round {t}: generator weights → " + ", ".join(
                f"{self._gen_names[k]}={pool.weights[k]:.3f}" for k in range(K)))
        state["round"] = info.to_dict()
        store.save_population(D, None)
        store.finish(D, pool.hn, good_idx, state)
        self.rounds_info.append(info)
        self.metrics.bump("rounds")

    def _shared_pool(self, gens: list[Any], label_w: np.ndarray, n_rel: int) -> list[bool]:
        """Per generator: whether its zero-shot samples form one shared pool (``evolution.initial_pool``'s idea,
        engine/loop.py). A generator that cannot condition on the label (``label_conditioned`` False: the n-gram
        or small LM trained on unlabelled public text) would write the same texts whatever label it is asked
        for, and the label WASP gives them would be a coin toss. So with several label groups its zero-shot texts
        are written once, without a label, and every label's private samples vote over a copy of each (a copy
        per label in D: within-label Top-Q as Eq 3-6, Δ_Q unchanged); at the end each text keeps the label that
        voted most for it (:func:`~.rounds.assign_shared`, post-processing). Its contrastive samples are written
        per label: only the examples of that label, chosen by that label's votes, steer them. With no vote to
        label the pool (``feedback: none``, or T = 1) the run is refused (:func:`check_unconditioned`)."""
        several = int(np.count_nonzero(np.asarray(label_w) > 0)) > 1
        shared = [several and getattr(g, "label_conditioned", True) is False for g in gens]
        if not any(shared):
            return shared
        names = [self._gen_names[k] for k in range(len(gens)) if shared[k]]
        if not n_rel:
            raise ConfigError(unconditioned_message(names, self.options.feedback))
        self.log(f"generator(s) {names} cannot condition on the label (no label column in the public text): their "
                 "zero-shot samples are one shared pool that every label votes over; each pool text is labelled by "
                 "the released votes (the label whose private samples voted most for it), and their contrastive "
                 "samples follow each label's voted examples")
        self._shared_names = names
        return shared

    def _generate_round(self, t: int, gens: list[Any], space: LabelSpace, label_w: np.ndarray, n_k: np.ndarray,
                        D: Population, examples: dict[int, tuple[np.ndarray, np.ndarray]], *,
                        shared: list[bool], voted: bool) -> Population:
        parts: list[Population] = []
        zero_shot = t == 0 or self.options.feedback == "none"
        f0 = self.options.zero_shot_fraction
        pool_groups = [int(g) for g in np.nonzero(np.asarray(label_w) > 0)[0]]
        total = int(sum(allocate(label_w, int(n), min_each=0).sum() for n in n_k))
        written = 0

        def add(texts: list[str], g: int, origin: str, k: int) -> None:
            start = sum(len(p) for p in parts)
            parts.append(Population(
                ids=[f"r{t}-{start + i}" for i in range(len(texts))], texts=list(texts),
                group=np.full(len(texts), g, dtype=np.int64), origin=[origin] * len(texts),
                parent=[None] * len(texts), generator=[self._gen_names[k]] * len(texts)))

        with self.metrics.stage("generation", iteration=t) as st, progress(f"round {t}: generation", total) as bar:
            for k, gen in enumerate(gens):
                per_label = allocate(label_w, int(n_k[k]), min_each=0)
                pool_n = 0  # this generator's zero-shot samples when they form a shared pool
                for g, n in enumerate(per_label):
                    if n <= 0:
                        continue
                    rng = self.rng("wasp-generate", t, k, g)
                    info = space.info(g)
                    ex = examples.get(g)
                    batches: list[tuple[list[str], str]] = []
                    if zero_shot or ex is None or len(ex[0]) == 0:
                        if shared[k]:
                            pool_n += int(n)
                            continue
                        batches = [(gen.random(info, int(n), rng=rng), "random")]
                    else:
                        # zero_shot_fraction: this share of the n samples is zero-shot, the rest contrastive; a
                        # shared pool needs a later vote to be labelled, so none after the last vote
                        n0 = round(f0 * int(n)) if (voted or not shared[k]) else 0
                        good = [D.texts[i] for i in ex[0]]
                        bad = [D.texts[i] for i in ex[1]]
                        if n0 and shared[k]:
                            pool_n += n0
                        elif n0:
                            batches.append((gen.random(info, n0, rng=self.rng("wasp-zero-shot", t, k, g)), "random"))
                        if int(n) - n0:
                            batches.append((gen.contrastive(good, bad, info, int(n) - n0, rng=rng),
                                            "contrastive" if bad else "fewshot"))
                    for texts, origin in batches:
                        bar.advance(len(texts))
                        written += len(texts)
                        add(texts, g, origin, k)
                if pool_n:
                    texts = gen.random(None, pool_n, rng=self.rng("wasp-generate", t, k, "shared"))
                    bar.advance(len(texts))
                    written += len(texts)
                    base = f"r{t}-k{k}-p"
                    for g in pool_groups:
                        parts.append(Population(
                            ids=[f"{base}{i}{SHARED_SEP}{g}" for i in range(len(texts))], texts=list(texts),
                            group=np.full(len(texts), g, dtype=np.int64), origin=["shared"] * len(texts),
                            parent=[None] * len(texts), generator=[self._gen_names[k]] * len(texts)))
            st.count("texts", written)
        return Population.concat(parts) if parts else Population.empty()

    def _vote(self, t: int, ctx: RunContext, private_emb: np.ndarray, D: Population
              ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray] | None]:
        key = f"votes/round_{t:03d}"
        z = self.sigma
        o = self.options
        if self._parties is not None:
            return self._vote_parties(t, ctx, D)
        release = gaussian_release(
            key, mechanism="topq_vote_histograms", noise_multiplier=z, contribution=topq_contribution(o.q),
            relation=ctx.relation, iteration=t,
            description=f"noisy Top-{o.q} nearest and furthest vote histograms over {len(D)} candidates (WASP Eq 3-6)",
            meta={"q": o.q, "metric": o.metric, "calibration": self.config.privacy.calibration})

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            assert D.emb is not None
            rel, event = dp_topq_histograms(private_emb, D.emb, q=o.q, noise_multiplier=z,
                                            sensitivity=release.sensitivity, rng=self.noise_rng(key),
                                            private_groups=ctx.private_groups, candidate_groups=D.group,
                                            metric=o.metric)
            return {"nearest": rel.nearest, "furthest": rel.furthest}, event

        with self.metrics.stage("vote", iteration=t):
            vals = ctx.keeper.release(release, compute)
        return vals["nearest"], vals["furthest"], None

    def _vote_parties(self, t: int, ctx: RunContext, D: Population
                      ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Alg 2 lines 8-11: the release is described and recorded BEFORE any party computes; then each party
        votes on its own records and adds its noise share, and only the (secure) sum comes back. The recorded
        event GaussianDpEvent(z) is the sum's with t survivors; more survivors only add noise (noise.py)."""
        from ...federated.topq import federated_topq

        key = f"votes/round_{t:03d}"
        z = self.sigma
        o = self.options
        pt = o.parties
        assert pt is not None and self._parties is not None
        L = len(self._parties)
        tmin = pt.min_survivors if pt.min_survivors is not None else L
        release = gaussian_release(
            key, mechanism="federated_topq_sum", noise_multiplier=z, contribution=self._contribution(),
            relation=ctx.relation, iteration=t,
            description=(f"sum over {L} parties of their Top-{o.q} nearest and furthest vote histograms over "
                         f"{len(D)} candidates, each party adding N(0, σ²/{tmin - pt.collusion}) (WASP Alg 2, Eq 9; "
                         f"noise covers a server colluding with {pt.collusion} parties); "
                         f"{'SecAgg+' if pt.aggregation == 'secagg' else 'plain (NOT secure) aggregation'}"),
            meta={"q": o.q, "metric": o.metric, "calibration": self.config.privacy.calibration, "parties": L,
                  "aggregation": pt.aggregation, "min_survivors": tmin, "collusion": pt.collusion,
                  "level": pt.level})

        timing: dict[str, float] = {}

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            assert D.emb is not None and self._parties is not None
            t0 = time.perf_counter()
            r = federated_topq(
                self._parties, D.emb, D.group, q=o.q, sigma=release.noise_std, value_bound=self.value_bound(),
                aggregation=pt.aggregation, min_survivors=tmin, collusion=pt.collusion, metric=o.metric,
                normalise=pt.normalise,
                seed=self.seed, key=key, reproducible=self.config.privacy.reproducible_noise, timeout=pt.timeout,
                drop=self.drop_hook())
            timing["seconds"] = time.perf_counter() - t0  # wall time: metrics only, not part of the release
            return {"nearest": r.nearest, "furthest": r.furthest,
                    "survivors": np.asarray(r.survivors, dtype=np.int64),
                    "sum_noise_std": np.asarray([r.noise_std])}, topq_event(z)

        with self.metrics.stage("vote", iteration=t):
            vals = ctx.keeper.release(release, compute)
        return vals["nearest"], vals["furthest"], {**vals, "seconds": np.asarray([timing.get("seconds", np.nan)])}

    def _publish_rounds(self) -> None:
        """Weights and histogram summaries per round: functions of released values and public sizes only."""
        from ...privacy.statement import released_number

        def r(xs: list[float] | None) -> list[float] | None:
            return None if xs is None else [released_number(x) for x in xs]

        rounds = []
        for info in self.rounds_info:
            rounds.append({
                "round": info.round, "n_per_generator": info.n_per_generator,
                "weights_used": r(info.weights_used), "weights_next": r(info.weights_next),
                "nearest_mean_per_generator": r(info.nearest_mean_per_generator),
                "furthest_mean_per_generator": r(info.furthest_mean_per_generator),
                "nearest_total": None if info.nearest_total is None else released_number(info.nearest_total),
                "furthest_total": None if info.furthest_total is None else released_number(info.furthest_total),
                "candidates": info.candidates,
                **({"survivors": info.survivors,
                    "sum_noise_std": None if info.sum_noise_std is None else released_number(info.sum_noise_std)}
                   if info.survivors is not None else {})})
        self.released["wasp"] = {"generators": list(self._gen_names), "rounds": rounds}

    def metrics_extra(self) -> dict[str, Any]:
        """WASP's rounds in full (private/metrics.json): sizes, weights, histogram summaries, generator stats."""
        if not getattr(self, "rounds_info", None):
            return {}
        return {"wasp": {"generators": list(self._gen_names), "rounds": [i.to_dict() for i in self.rounds_info],
                         "per_generator": {self._gen_names[k]: g.stats.to_dict() for k, g in enumerate(self._gens)
                                           if getattr(g, "stats", None) is not None}}}


#: backends trained on the public corpus: they follow a label only when the public corpus has the label columns
PUBLIC_TRAINED = ("ngram", "lm")


def unconditioned_message(names: list[str], feedback: str) -> str:
    why = ("wasp.feedback: none reads no private data" if feedback == "none" else
           "with evolution.iterations: 1 (and wasp.output: all) there is no vote")
    return (f"WASP cannot give its samples labels here: generator(s) {names} cannot condition on the label (the "
            f"public corpus has no label column to learn it from), and {why}, so nothing would tell the labels "
            "apart and every sample's label would be a coin toss. Let the private votes label them (wasp.feedback: "
            "votes with evolution.iterations ≥ 2), give labelled public text, or use a prompted generator "
            "(transformers, vllm, openai) that reads the label in its prompt")


def check_unconditioned(config: Config, options: Any) -> None:
    """Refuse, before anything is written, a run whose labels nothing could decide: several label groups, a
    public-trained generator (n-gram, small LM) on a public corpus without the label columns, and no vote to
    label its shared pool (``feedback: none``, or T = 1 with ``output: all``). Reads the public corpus only in
    that rare case."""
    d = config.data
    no_vote = options.feedback == "none" or (config.evolution.iterations < 2 and options.output == "all")
    if not no_vote or not d.label_columns or d.label_values is None or not d.public:
        return  # without label_values the public corpus must hold the label columns (read_inputs)
    if math.prod(len(d.label_values.get(c, ())) for c in d.label_columns) < 2:
        return
    if config.synthesis.label_distribution.kind == "given" and config.synthesis.label_distribution.weights and \
            sum(1 for w in config.synthesis.label_distribution.weights.values() if w > 0) < 2:
        return
    from ...data import load_corpus
    from ...generate import GENERATORS

    cfgs = generator_configs(config)
    trained = [i for i, c in enumerate(cfgs) if GENERATORS.canonical(c.backend) in PUBLIC_TRAINED]
    if not trained:
        return
    public = load_corpus(d.public, text_column=d.public_text_column or d.text_column, label_columns=d.label_columns,
                         name="public", optional_labels=True)
    if all(c in public.labels for c in d.label_columns):
        return
    raise ConfigError(unconditioned_message([cfgs[i].name or f"{cfgs[i].backend}-{i}" for i in trained],
                                            options.feedback))


def generator_configs(config: Config) -> list[GeneratorConfig]:
    """The run's generators: ``generators:`` when given (one or more), else the single ``generator:``."""
    if config.generators:
        return list(config.generators)
    return [config.generator]


__all__ = ["WASP", "RoundInfo", "WASPOptions", "generator_configs"]
