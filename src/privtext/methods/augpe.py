"""Aug-PE: Private Evolution for text with DP nearest-neighbour votes (the baseline of all three papers).

Privacy (record-level, add/remove one private record)
-----------------------------------------------------
Each iteration releases one vote histogram with L2 sensitivity Δ = 1 (see
:mod:`privtext.mechanisms.voting`) and Gaussian noise N(0, σ²Δ²): a Gaussian mechanism with noise multiplier
σ. T iterations are the T-fold composition (plus one Gaussian label histogram when
``evolution.label_distribution.kind = dp``). Budget forms:

* ``{epsilon, delta}`` — σ is the smallest value whose composition meets (ε, δ) under the PLD accountant
  (tight); ``privacy.calibration: paper`` uses σ = √T/μ with μ from (ε, δ) by GDP duality instead.
* ``{mu}`` — μ-GDP composes exactly: σ = √T/μ (Dong et al.; the Aug-PE calibration).
* ``{secret: {p, r}}`` — μ = Φ⁻¹(1−p) − Φ⁻¹(1−r) (SecPE Eq 4 / Lemma 3.2), then as ``{mu}``: every secret gets
  (p, r)-protection *when each secret sits in one record*. A secret repeated in k records needs group sensitivity
  k (``augpe.sensitivity: secret_group``, SecPE's second GDP baseline), which multiplies the noise by k.
* ``{noise_multiplier}`` — σ as given; the ledger only reports ε at δ = 1e-5.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ..backends import BackendOptions
from ..config import Config, VotingConfig
from ..data.labels import LabelSpace
from ..data.population import Population
from ..embed import Embedder, embed_private
from ..engine.loop import Scorer, ScoreResult
from ..errors import ConfigError
from ..mechanisms.distributed import build_counter
from ..mechanisms.voting import dp_vote_histogram
from ..privacy.events import gaussian_event
from ..privacy.release import Release, ReleaseKeeper
from .base import Inputs, MethodRun
from .parties import HoldsParties, PartiesOptions, check_parties


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


class _NearestVoteScorer:
    """What Aug-PE's scorers share: σ and Δ (noise std σ·Δ), the voting options, the threshold and the keeper."""

    def __init__(self, *, sigma: float, sensitivity: float, sensitivity_note: str, voting: VotingConfig,
                 threshold: float, keeper: ReleaseKeeper):
        self.sigma = float(sigma)
        self.sensitivity = float(sensitivity)
        self.note = sensitivity_note
        self.voting = voting
        self.threshold = float(threshold)
        self.keeper = keeper


class DPVoteScorer(_NearestVoteScorer):
    """Aug-PE's scorer: one DP nearest-neighbour vote histogram per iteration.

    Built with what it uses: the private embeddings and label groups, σ and Δ, the voting options, the release
    keeper and a factory of privacy randomness (``noise_rng(key)``)."""

    name = "dp_nn_votes"

    def __init__(self, *, private_emb: np.ndarray, private_groups: np.ndarray, sigma: float, voting: VotingConfig,
                 threshold: float, keeper: ReleaseKeeper, noise_rng: Callable[[str], np.random.Generator],
                 sensitivity: float = 1.0, sensitivity_note: str = "one record casts one vote (Δ=1)",
                 counter: Any = None):
        super().__init__(sigma=sigma, sensitivity=sensitivity, sensitivity_note=sensitivity_note, voting=voting,
                         threshold=threshold, keeper=keeper)
        self.counter = counter  # exact vote counts elsewhere (Ray shards); None: in this process
        self.private_emb = private_emb
        self.private_groups = private_groups
        self.noise_rng = noise_rng

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult:
        key = f"votes/iter_{iteration:03d}"
        v = self.voting
        release = Release(
            key=key, mechanism="dp_nn_vote_histogram", event=gaussian_event(self.sigma),
            noise_std=self.sigma * self.sensitivity, sensitivity=self.sensitivity, iteration=iteration,
            description=f"noisy nearest-neighbour vote histogram over {len(population)} candidates; {self.note}",
            meta={"metric": v.metric, "backend": v.backend, "threshold": self.threshold, "center": v.center},
        )
        center = vote_emb.mean(axis=0) if v.center == "candidates" and len(vote_emb) else None

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            rel, event = dp_vote_histogram(
                self.private_emb, vote_emb, noise_multiplier=self.sigma, sensitivity=self.sensitivity,
                rng=self.noise_rng(key), private_groups=self.private_groups,
                candidate_groups=population.group, threshold=self.threshold, metric=v.metric,
                backend=v.backend, center=center, counter=self.counter, chunk_size=v.chunk_size, device=v.device,
                precision=v.precision, nlist=v.nlist, nprobe=v.nprobe, hnsw_m=v.hnsw_m, ef_search=v.ef_search,
            )
            return {"noisy": rel.noisy, "raw_noisy": rel.raw_noisy}, event

        vals = self.keeper.release(release, compute)
        return ScoreResult(vals["noisy"], meta={"sigma": self.sigma, "noise_std": self.sigma * self.sensitivity,
                                                "release": key})


class FederatedVoteScorer(_NearestVoteScorer):
    """Aug-PE's scorer over several data holders (the PrE-Text setting; :mod:`privtext.federated.votes`): each
    iteration's release is described and recorded BEFORE any party computes; then every party counts the votes of
    its own records, clips them to the public bound B, adds its share N(0, σ²Δ²/t) of the noise, and only the
    (SecAgg+) sum comes back, thresholded like the single-holder histogram (post-processing). Its event is the
    single-holder ``GaussianDpEvent(σ)``: the sum of the parties' counts is the single-holder histogram of their
    union, and a round with |S| ≥ t survivors carries std σΔ·√(|S|/t) ≥ σΔ."""

    name = "federated_nn_votes"

    def __init__(self, *, parties: list[Any], options: PartiesOptions, sigma: float, sensitivity: float,
                 sensitivity_note: str, voting: VotingConfig, threshold: float, keeper: ReleaseKeeper,
                 value_bound: float, seed: int | None, reproducible: bool, drop: dict[int, str] | None = None,
                 on_round: Callable[[dict[str, Any]], None] | None = None):
        super().__init__(sigma=sigma, sensitivity=sensitivity, sensitivity_note=sensitivity_note, voting=voting,
                         threshold=threshold, keeper=keeper)
        self.parties = parties
        self.options = options
        self.value_bound = float(value_bound)
        self.seed = seed
        self.reproducible = bool(reproducible)
        self.drop = drop
        self.on_round = on_round

    def score(self, *, iteration: int, population: Population, vote_emb: np.ndarray) -> ScoreResult:
        from ..federated.votes import federated_nn_votes
        from ..mechanisms.voting import threshold_histogram

        key = f"votes/iter_{iteration:03d}"
        pt, v = self.options, self.voting
        L = len(self.parties)
        tmin = pt.min_survivors if pt.min_survivors is not None else L
        std = self.sigma * self.sensitivity
        release = Release(
            key=key, mechanism="federated_nn_vote_sum", event=gaussian_event(self.sigma), noise_std=std,
            sensitivity=self.sensitivity, iteration=iteration,
            description=(f"sum over {L} parties of their nearest-neighbour vote histograms over {len(population)} "
                         f"candidates, each party adding N(0, σ²/{tmin}) (PrE-Text setting); "
                         f"{'SecAgg+' if pt.aggregation == 'secagg' else 'plain (NOT secure) aggregation'}; "
                         f"{self.note}"),
            meta={"metric": v.metric, "backend": v.backend, "threshold": self.threshold, "center": v.center,
                  "parties": L, "aggregation": pt.aggregation, "min_survivors": tmin, "level": pt.level})
        center = vote_emb.mean(axis=0) if v.center == "candidates" and len(vote_emb) else None

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            r = federated_nn_votes(
                self.parties, vote_emb, population.group, sigma=std, value_bound=self.value_bound,
                metric=v.metric, center=center, backend=v.backend, normalise=pt.normalise,
                aggregation=pt.aggregation, min_survivors=tmin, seed=self.seed, key=key,
                reproducible=self.reproducible, drop=self.drop, timeout=pt.timeout)
            return {"noisy": threshold_histogram(r.values, self.threshold), "raw_noisy": r.values,
                    "survivors": np.asarray(r.survivors, dtype=np.int64),
                    "sum_noise_std": np.asarray([r.noise_std])}, gaussian_event(self.sigma)

        vals = self.keeper.release(release, compute)
        survivors = [int(x) for x in vals["survivors"]]
        sum_std = float(vals["sum_noise_std"][0])
        if self.on_round is not None:
            from ..privacy.statement import released_number

            self.on_round({"iteration": iteration, "survivors": survivors,
                           "sum_noise_std": released_number(sum_std)})
        return ScoreResult(vals["noisy"], meta={"sigma": self.sigma, "noise_std": std, "release": key,
                                                "survivors": survivors, "sum_noise_std": sum_std})


def label_sigma_ratio(fraction: float, compositions: int) -> float:
    """σ_label/σ so that the label release takes ``fraction`` of the GDP budget μ²:
    1/σ_l² = f·μ² and T/σ² = (1−f)·μ²  ⇒  σ_l = σ·√((1−f)/(f·T))."""
    return float(np.sqrt((1 - fraction) / (fraction * compositions)))


class AugPE(HoldsParties, MethodRun):
    name: ClassVar[str] = "augpe"
    Options = AugPEOptions
    options: AugPEOptions
    group_size: int | None = None  # k under secret-group sensitivity
    released_rounds: list[dict[str, Any]] | None = None  # parties: survivors and sum noise std per vote (public)
    sigma: float = 0.0
    label_sigma: float | None = None

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        if options.vocabulary_prompts and config.privacy.kind != "dp":
            raise ConfigError("augpe.vocabulary_prompts spends part of an (ε, δ) budget on a Laplace vocabulary: "
                              f"give privacy: {{epsilon, delta}} (got a {config.privacy.kind!r} budget)")
        if options.sensitivity == "secret_group":
            from ..secrets import build_detector

            build_detector(options.detector)
        if options.parties is not None:
            check_parties(config, options.parties, cls.name)
            if options.sensitivity != "record":
                raise ConfigError("augpe.parties counts each party's own votes; augpe.sensitivity: "
                                  f"{options.sensitivity} needs every record's secrets in one place (use record)")
            if options.vocabulary_prompts:
                raise ConfigError("augpe.parties with augpe.vocabulary_prompts: the DP vocabulary would need its "
                                  "own aggregation over the parties (not implemented); drop one of the two")

    def make_ledger(self) -> Any:
        from ..privacy import Budget, Ledger, mu_from_pr

        p = self.config.privacy
        if p.kind == "secret":
            assert p.secret is not None
            mu = float(mu_from_pr(p.secret.p, p.secret.r))
            budget = Budget.gdp(mu)
        else:
            budget = Budget.from_config(p)
        self.budget = budget
        return Ledger.load(self.run.ledger, budget)

    def calibrate(self, compositions: int, label_fraction: float | None) -> tuple[float, float | None]:
        """σ for T vote releases (+ an optional label release taking ``label_fraction`` of the budget)."""
        import dp_accounting

        from ..privacy import DpTarget, GdpTarget, calibrate, gaussian_noise_multiplier

        p = self.config.privacy
        if p.kind == "noise":
            assert p.noise_multiplier is not None
            if p.noise_multiplier == 0:
                self.log("noise_multiplier 0: NO PRIVACY (non-private reference run)")
            sigma = float(p.noise_multiplier)
            # the label release gets the same share of the (implicit) budget as with a target: σ_l = σ·ratio
            return sigma, (sigma * label_sigma_ratio(label_fraction, compositions) if label_fraction else None)
        b = self.budget
        ratio = label_sigma_ratio(label_fraction, compositions) if label_fraction else None
        vocab = self.vocabulary_event()
        if p.calibration == "paper" and ratio is None and vocab is None:
            return float(gaussian_noise_multiplier(b, compositions=compositions, method="paper")), None

        def make(s: float) -> Any:
            votes = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(s), compositions)
            parts = ([vocab] if vocab is not None else []) + (
                [dp_accounting.GaussianDpEvent(s * ratio)] if ratio is not None else [])
            return dp_accounting.ComposedDpEvent([*parts, votes]) if parts else votes

        target = GdpTarget(b.mu) if b.kind == "gdp" else DpTarget(b.epsilon, b.delta)
        sigma = float(calibrate(make, target))
        return sigma, (sigma * ratio if ratio is not None else None)

    def uses_vocabulary_prompts(self) -> bool:
        """Whether the initial prompts hold DP-vocabulary terms (the DP-KPS paper's Aug-PE variant); subclasses
        whose options have no such switch (WASP) answer False."""
        return bool(self.options.vocabulary_prompts)

    def vocabulary_epsilon(self) -> float | None:
        o = self.options
        if not self.uses_vocabulary_prompts():
            return None
        return o.vocabulary_epsilon_fraction * float(self.config.privacy.epsilon)  # type: ignore[arg-type]

    def vocabulary_event(self) -> Any:
        from ..mechanisms.vocabulary import vocabulary_event

        eps = self.vocabulary_epsilon()
        return None if eps is None else vocabulary_event(self.options.vocabulary_r, eps)

    def build_backends(self, public: Any, guard: Any, prompt_log: Any) -> Any:
        gen, emb = super().build_backends(public, guard, prompt_log)
        if self.uses_vocabulary_prompts():
            gen = VocabularyPrompts(gen, terms_per_prompt=self.options.vocabulary_terms)
        self._generator = gen
        return gen, emb

    def release_vocabulary(self, inputs: Inputs, keeper: ReleaseKeeper) -> None:
        """The DP vocabulary of DP-KPS (App A.1) for the baseline's prompts: Laplace(r/ε_v) on every public term,
        through the keeper (recorded before the private texts are read; kept for resume)."""
        from ..data.vocabulary import vocabulary_from_corpus
        from ..mechanisms.vocabulary import dp_vocabulary, vocabulary_sensitivity
        from ..privacy.statement import released_number

        o = self.options
        eps = self.vocabulary_epsilon()
        assert eps is not None
        if inputs.public is None:
            raise ConfigError("augpe.vocabulary_prompts needs data.public (the public vocabulary's source)")
        vocab = vocabulary_from_corpus(list(inputs.public.texts), min_count=3)
        size = min(o.vocabulary_size, len(vocab))
        delta = vocabulary_sensitivity(o.vocabulary_r)
        key = "vocabulary"
        release = Release(key=key, mechanism="dp_vocabulary", event=self.vocabulary_event(),
                          noise_std=float(np.sqrt(2.0)) * delta / eps, sensitivity=delta,
                          description=f"DP vocabulary (DP-KPS App A.1): first {o.vocabulary_r} public terms per "
                                      f"private record, Laplace histogram, top {size}",
                          meta={"epsilon": eps, "laplace_scale": delta / eps, "norm": "L1"})

        def compute() -> tuple[dict[str, np.ndarray], Any]:
            rel, event = dp_vocabulary(inputs.private.texts, vocab, r=o.vocabulary_r, epsilon=eps, size=size,
                                       rng=self.noise_rng(key))
            return {"indices": rel.indices, "noisy_counts": rel.noisy_counts}, event

        vals = keeper.release(release, compute)
        terms = [vocab.terms[int(i)] for i in vals["indices"]]
        self._generator.terms = terms
        self.released["dp_vocabulary"] = {t: released_number(c) for t, c in zip(terms, vals["noisy_counts"],
                                                                                 strict=True)}

    def statement_parts(self, ledger: Any) -> dict[str, Any]:
        """Aug-PE's guarantee in words. Numbers: the budget (configured), ε/μ spent (a function of the
        data-independent events), σ (from the budget); with secret-group sensitivity the group size k is listed as
        an assumption."""
        from ..privacy import mu_from_pr, r_from_mu_p
        from ..privacy.statement import Assumption

        p = self.config.privacy
        b = self.budget
        s = ledger.spent()
        n = len(ledger)
        k = self.group_size
        unit = ("adding or removing one private record" if k is None else
                f"adding or removing all the records that hold one declared secret (groups of up to {k} records)")
        assumed: list[Any] = []
        coverage: list[str] = []
        if k is not None:
            assumed.append(Assumption(
                name="secret_group_size", value=k,
                why="the most records any one detected secret occurs in; it sets the sensitivity Δ = k of every "
                    "release (SecPE's group-sensitivity GDP baseline) and is computed from the private data "
                    "without noise"))
            coverage.append("Secrets the detector did not find, and records holding none, get only the group "
                            "guarantee's protection as members of some group of at most k records.")
        guarantee: dict[str, Any] = {"kind": b.kind, "budget": b.to_dict(), "neighbouring_relation": unit,
                                     "releases": n}
        if b.kind == "dp":
            guarantee["spent"] = {"epsilon": s["epsilon"], "delta": b.delta}
            head = f"({s['epsilon']:.4g}, {b.delta:g})-differential privacy for {unit} (budget ε = {b.epsilon:g})"
        elif b.kind == "gdp":
            guarantee["spent"] = {"mu": s["mu"], "epsilon_at_report_delta": s["epsilon_at_report_delta"],
                                  "report_delta": b.report_delta}
            head = (f"{s['mu']:.4g}-Gaussian differential privacy for {unit} (budget μ = {b.mu:g}; equivalently "
                    f"({s['epsilon_at_report_delta']:.4g}, {b.report_delta:g})-DP)")
            if p.kind == "secret":
                assert p.secret is not None
                mu = float(mu_from_pr(p.secret.p, p.secret.r))
                guarantee["from_secret_budget"] = {"p": p.secret.p, "r": p.secret.r, "mu": mu}
                if k is None:
                    r2 = float(r_from_mu_p(p.secret.p, 2 * mu))
                    coverage.append(
                        f"(p={p.secret.p:g}, r={p.secret.r:g})-secret protection follows (SecPE Eq 4) only for a "
                        f"secret held by ONE record; a secret repeated in k records is protected at μ·k-GDP (for "
                        f"k = 2 the posterior bound is r = {r2:.3g}); use augpe.sensitivity: secret_group to cover "
                        "repeated secrets.")
                else:
                    head += (f"; every detected secret gets (p={p.secret.p:g}, r={p.secret.r:g})-secret "
                             "protection (SecPE Eq 4 with group sensitivity)")
        else:
            guarantee["reference"] = {"epsilon_at_report_delta": s["epsilon_at_report_delta"],
                                      "report_delta": b.report_delta}
            head = (f"No privacy target was set (fixed noise multiplier σ = {self.sigma:g}); for reference the "
                    f"releases are ({s['epsilon_at_report_delta']:.4g}, {b.report_delta:g})-DP for {unit}")
        ld = self.config.evolution.label_distribution
        public = ["the public corpus (generator training text, label values, zero-shot prompts)"]
        if self.uses_vocabulary_prompts():
            public.append("the public vocabulary (words and phrases of the public corpus); the initial prompts hold "
                          "random terms of the released DP vocabulary and no class")
        if ld.kind == "public":
            public.append("the label distribution of the public corpus (samples per label)")
        elif ld.kind == "given":
            public.append("the label weights given in the configuration")
        parts = {
            "guarantee": guarantee, "headline": head + f", over {n} noisy releases.",
            "parameters": {"noise_multiplier": self.sigma, "sensitivity": "record" if k is None else "secret_group",
                           **({"vocabulary_epsilon": self.vocabulary_epsilon()} if self.uses_vocabulary_prompts()
                              else {}),
                           **({"label_noise_multiplier": self.label_sigma} if self.label_sigma else {})},
            "assumed_public": assumed, "treated_as_public": public, "coverage": coverage,
        }
        # no-op without parties; WASP's FuseGen baseline (feedback none) reads no votes, so states no bound
        return self.parties_statement(parts, votes=getattr(self.options, "feedback", "votes") == "votes")

    def group_sensitivity(self, inputs: Inputs) -> tuple[float, str]:
        mode = self.options.sensitivity
        if self.options.parties is not None:
            pt = self.options.parties
            if pt.level == "record":
                return 1.0, "record sensitivity summed over the parties: one record casts one vote (Δ=1)"
            if pt.normalise:
                return 1.0, "user level: each party's vote vector has unit L2 norm (Δ=1)"
            m = self.user_multiplier()
            return float(m), f"user level: each party casts at most {m} votes (public cap), Δ={m}"
        if mode == "record":
            return 1.0, "record sensitivity: one record casts one vote (Δ=1)"
        from ..secrets import build_detector

        matrix = build_detector(self.options.detector).detect(list(inputs.private.texts))
        per_secret = np.asarray(matrix.matrix.sum(axis=0)).ravel()
        k = int(per_secret.max()) if per_secret.size else 1
        k = max(k, 1)
        self.group_size = k
        self.diagnostic("secret_groups", None, {"group_size": k, "secrets": int(matrix.matrix.shape[1]),
                                                 "holders_per_secret_max": k})
        return float(k), f"secret-group sensitivity: the most-repeated secret sits in {k} records (Δ={k})"

    def prepare_privacy(self, inputs: Inputs, space: LabelSpace, private_groups: np.ndarray, embedder: Embedder,
                        keeper: ReleaseKeeper) -> tuple[Scorer, float | None]:
        T = self.config.evolution.iterations
        ld = self.config.evolution.label_distribution
        frac = ld.budget_fraction if (ld.kind == "dp" and space.columns) else None
        sigma, label_sigma = self.calibrate(T, frac)
        self.sigma, self.label_sigma = sigma, label_sigma
        if self.uses_vocabulary_prompts():
            self.release_vocabulary(inputs, keeper)
        sens, note = self.group_sensitivity(inputs)
        self.label_sensitivity = sens  # the label histogram's Δ is the group size too (privtext.mechanisms.labels)
        self.log(f"noise multiplier σ={sigma:.4f} for {T} vote releases; {note}")
        with self.metrics.stage("embedding_private"):
            private_emb = embed_private(embedder, inputs.private.texts)
        if len(private_emb) != len(inputs.private):
            raise ConfigError("embedder returned the wrong number of private embeddings")
        if self.options.parties is not None:
            self.released_rounds = []
            self.released["parties"] = {"rounds": self.released_rounds}  # survivors, sum noise std: public
            return FederatedVoteScorer(
                parties=self.build_parties(np.asarray(private_emb, dtype=np.float32), private_groups),
                options=self.options.parties, sigma=sigma, sensitivity=sens, sensitivity_note=note,
                voting=self.config.voting, threshold=self.config.evolution.threshold, keeper=keeper,
                value_bound=self.value_bound(), seed=self.seed,
                reproducible=self.config.privacy.reproducible_noise, drop=self.drop_hook(),
                on_round=self.released_rounds.append), label_sigma
        scorer = DPVoteScorer(private_emb=private_emb, private_groups=private_groups, sigma=sigma,
                              voting=self.config.voting, threshold=self.config.evolution.threshold, keeper=keeper,
                              noise_rng=self.noise_rng, sensitivity=sens, sensitivity_note=note,
                              counter=build_counter(self.config.cluster))
        return scorer, label_sigma


class VocabularyPrompts:
    """A generator whose RANDOM_API writes each candidate from a seeded prompt of ``terms_per_prompt`` random terms
    of the released DP vocabulary (``terms``) and the document type — no class (DP-KPS's Aug-PE baseline); every
    other operation is the wrapped generator's. The per-label DP votes decide which label a candidate serves."""

    label_conditioned = False  # the prompts hold no class

    def __init__(self, inner: Any, *, terms_per_prompt: int):
        self.inner = inner
        self.terms: list[str] | None = None
        self.k = int(terms_per_prompt)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def random(self, label: Any, n: int, *, rng: np.random.Generator) -> list[str]:
        if self.terms is None:
            raise ConfigError("the DP vocabulary was not released before the first prompt")
        k = min(self.k, len(self.terms))
        seqs = [[self.terms[int(i)] for i in rng.choice(len(self.terms), size=k, replace=False)] for _ in range(n)]
        doc_type = getattr(getattr(self.inner, "family", None), "doc_type", None) or "text"
        return self.inner.seeded(seqs, doc_type, rng=rng)
