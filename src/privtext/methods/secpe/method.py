"""SecPE: Secret-Protected Evolution (SecPE paper, Alg 1-3).

1. **Secrets** — a detector marks which records hold which declared secrets (sparse records × secrets matrix).
   Records holding none are *public* (with any external public corpus); the others are *private*.
2. **SecretNoise** (Alg 1) — the LP of Eq 6 gives weights w, hence sampling probabilities ρ; σ is the smallest
   noise whose blow-up at prior p_j stays ≤ r_j for every secret, over all compositions
   (:func:`privtext.privacy.secret_noise`).
3. **Secret Clustering** (Alg 2, Eq 7) — public k-means centres shifted by Bernoulli(ρ)-sampled, clipped private
   embeddings; noisy centres ẽ_k and counts ñ_k are released (two releases per clustering, see
   :mod:`privtext.mechanisms.clustering`).
4. **Protected Evolution** (Alg 3) — each noisy centre gives ñ_k to its nearest candidate; the engine selects by
   rank or by sampling (sampling is needed when K < N_syn) and varies. With
   ``secpe.recluster_each_iteration: false`` the clusters are released once and reused (post-processing:
   2 compositions in the accounting instead of 2T).

The generator trains only on public text (secret-free records and the external public corpus).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from ...backends import BackendOptions
from ...config import Config
from ...data import Corpus
from ...engine.learning import learn_parameters, with_learn_hooks
from ...errors import ConfigError, DataError
from ...mechanisms.clustering import PublicClusters, clustering_plan, public_kmeans
from ...privacy.relation import NeighbouringRelation
from ..base import EvolutionMethod, Inputs, LabelNoise, MethodDescription, RunContext, StatementParts
from .scorer import ClusterScorer, auto_clusters

if TYPE_CHECKING:
    from ...engine.loop import Scorer
    from ...mechanisms.clustering import ClusteringPlan
    from ...privacy.budget import Budget
    from ...privacy.ledger import Ledger
    from ...secrets.base import SecretDetector
    from ...secrets.matrix import SecretMatrix


class SecPEOptions(BackendOptions):
    """The ``secpe:`` section."""

    clusters: int | Literal["auto"] = Field(
        default="auto", description="K public k-means centres (split over labels); auto: the rule of "
        "auto_clusters (centre noise at most noise_norm, at most N_syn, at least one per label group)")
    voting: Literal["hybrid", "clusters"] = Field(
        default="hybrid", description="hybrid: secret-free private records vote directly and exactly (they are "
        "public under secret protection), secret holders through the noisy clusters; clusters: Alg 3 as written")
    cluster_public: Literal["secret_free", "all"] = Field(
        default="secret_free", description="which public records form the clusters: the secret-free private "
        "records (the paper's D_pub) or also the external public corpus")
    noise_norm: float = Field(default=0.25, gt=0, description="auto K: largest expected norm of a centre's noise")
    detector: str | dict[str, Any] | list[str | dict[str, Any]] = "regex"
    clip_radius: float = Field(default=1.0, gt=0)
    sampling: Literal["paper", "max", "auto"] = "auto"
    eta: float | None = Field(default=None, gt=0, description="LP capacity η_j; default Φ⁻¹(1−p)−Φ⁻¹(1−r)")
    recluster_each_iteration: bool = True
    sample: Literal["independent", "shared"] = Field(
        default="independent", description="Bernoulli(ρ) sample: one per release (counts, centres) or one shared "
        "by both as Alg 2 writes it (accounted as one mixture with sensitivity √2)")
    blowup: Literal["exact", "paper"] = "exact"
    kmeans: Literal["faiss", "sklearn"] = "faiss"
    kmeans_iters: int = Field(default=25, gt=0)
    kmeans_sample_per_centre: int | None = Field(
        default=None, gt=0, description="fit the public k-means on a uniform sample of this many points per centre "
        "(public data: any rule is private-free); None: every public point")
    assign_backend: Literal["auto", "faiss", "numpy", "torch", "ivf", "ivf-gemm", "hnsw"] = Field(
        default="auto", description="how private records find their nearest centre in the clustering release: "
        "exact (auto) or approximate (ivf-gemm, ivf, hnsw); any rule puts each record in one cluster, so the "
        "sensitivity and the event are unchanged; approximate changes which cluster a few records join")
    assign_nprobe: int | None = Field(default=None, gt=0, description="lists probed by an approximate assignment")


class _NoSecrets:
    """SecretNoise's result when no record holds a declared secret: no private record, no noise needed."""

    sigma = 0.0
    rho = np.zeros(0)
    mode = "none"

    def secret_events(self, sigma: float | None = None, *, per_release: int = 1) -> dict[str, Any]:
        return {}


class SecPE(EvolutionMethod):
    name: ClassVar[str] = "secpe"
    description: ClassVar[MethodDescription] = MethodDescription(
        section="secpe", title="SecPE", guarantee="secret", audit_game="reconstruction", unit="iteration",
        planned="iterations", checkpoints=True, votes=True, zero_shot=True,
        release_words="the released noisy histogram values",
        control=("method=augpe", "privacy={noise_multiplier: 1000000.0}"),
        control_words="Aug-PE on the same data and generator with σ = 10⁶ on every release (docs/secpe.md)")
    demo: ClassVar[dict[str, Any] | None] = {"secpe": {"sampling": "auto", "recluster_each_iteration": True}}
    Options = SecPEOptions
    options: SecPEOptions

    sigma: float = 0.0
    plan: ClusteringPlan | None = None
    #: the detector and the secrets of the secret-holding records (records × secrets), set by :meth:`split_data`
    detector: SecretDetector | None = None
    matrix: SecretMatrix

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """SecPE's guarantee in words. σ is a function of which records hold which declared secret (SecretNoise,
        Alg 1): listed as an assumption, as is the secret-holding structure itself (see docs/privacy.md)."""
        from ...privacy.statement import Assumption

        b = self.budget
        cfg = self.options
        s = ledger.spent()
        n = len(ledger)
        from ...secrets import describe_detector, guarantee_structure

        det_words = describe_detector(cfg.detector)
        structure = guarantee_structure(self.detector or cfg.detector)
        approx = cfg.blowup == "paper"
        guarantee = {
            "kind": "secret", "budget": b.to_dict(), "releases": n,
            "neighbouring_relation": ("the same data with and without the records that hold one declared secret "
                                      "(SecPE Def 3.1), the secret-holding structure being public"),
            "spent": {"every_secret_within_r": not s["exceeded"], "accounting": "approximate (paper's single "
                      "Gaussian; not proven)" if approx else "exact mixture blow-up on dp_accounting's PLD"},
            "conditional_on": structure["sentences"],
        }
        head = (f"(p={b.p if not b.per_secret else 'per secret'}, r={b.r if not b.per_secret else 'per secret'})"
                f"-secret protection (SecPE Def 3.1) for every declared secret the detector ({det_words}) found: an "
                "adversary whose prior chance of guessing such a secret is at most p reconstructs it from the "
                f"synthetic data with probability at most r, over {n} noisy clusterings")
        if approx:
            head = ("NOT PROVEN: accounted with the paper's single-Gaussian approximation (secpe.blowup: paper), "
                    f"which is not an upper bound on the posterior. Nominal: {head}")
        assumed = [
            Assumption(name="secret_holding_structure", value="not released",
                       why="which records hold which declared secret sets the sampling rates ρ and σ (SecPE Alg 1 "
                           "computes them from the private data without noise, as privtext does): the guarantee "
                           "protects what each secret is, not whether a record holds one"),
            Assumption(name="noise_std", value=self.sigma,
                       why="σ of every release, computed by SecretNoise (Alg 1) from the secret-holding structure"),
        ]
        return StatementParts(
            guarantee=guarantee, headline=head + ".",
            parameters={"clusters": cfg.clusters, "voting": cfg.voting, "cluster_public": cfg.cluster_public,
                        "sample": cfg.sample, "sampling_rule": cfg.sampling,
                        "clip_radius": cfg.clip_radius, "recluster_each_iteration": cfg.recluster_each_iteration,
                        "blowup": cfg.blowup, **learn_parameters(self.config.evolution)},
            assumed_public=assumed,
            treated_as_public=[
                "private records in which the detector found no declared secret: they trained the generator, "
                "formed the public clusters" + (" and voted for candidates record by record" if cfg.voting == "hybrid"
                                                else "") + " without noise, and text from them may appear in prompts "
                "and in the synthetic data",
                "the external public corpus (data.public), when given",
                "the label distribution (samples per label) of the public records",
            ],
            coverage=[
                structure["prior"],
                "Occurrences of a secret that the detector missed are not protected; every record in which a "
                "detected value appears (in its canonical form) is one of its holders.",
                "This is not differential privacy: no record-level guarantee is given, and a secret-free record "
                "has no protection at all (it is public under secret protection).",
            ],
            audit_words=("Every prompt sent to a generator was checked for text of the secret-holding records "
                         "that no public source explains (whole records, 8-word sequences of a record, detected "
                         "secret values): none was found. Secret-free private records were not checked: they are "
                         "public under this guarantee."))

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        from ...secrets import build_detector

        p = config.privacy
        if p.kind != "secret":
            raise ConfigError(
                f"method secpe needs privacy: {{secret: {{p: ..., r: ...}}}} (got a {p.kind!r} budget); "
                "for a DP guarantee use method: augpe"
            )
        if config.synthesis.label_distribution.kind == "dp":
            raise ConfigError("secpe uses the public label distribution (secret-free records are public); "
                              "set synthesis.label_distribution.kind to public, uniform or given")
        build_detector(options.detector)  # a missing detector file or unknown detector fails here

    def budget_of(self) -> Budget:
        from ...privacy import Budget

        self.check_config(self.config, self.options)
        return Budget.from_config(self.config.privacy)

    def neighbouring(self, inputs: Inputs) -> NeighbouringRelation:
        """SecPE Def 3.1: data sets with and without the records holding one declared secret (each sampled
        record contributes ≤ 1 per release; the per-secret mixture events carry the random number sampled)."""
        return NeighbouringRelation.secret_holders()

    def split_data(self, inputs: Inputs) -> Inputs:
        from ...secrets import build_detector

        with self.metrics.stage("secret_detection"):
            detector = build_detector(self.options.detector)
            matrix = detector.detect(list(inputs.private.texts))
        mask = np.asarray(matrix.private_mask(), dtype=bool)
        if len(mask) != len(inputs.private):
            raise DataError(f"detector returned {len(mask)} rows for {len(inputs.private)} records")
        priv_idx, pub_idx = np.nonzero(mask)[0], np.nonzero(~mask)[0]
        private = inputs.private.subset(priv_idx, name="private")
        secret_free = inputs.private.subset(pub_idx, name="secret_free")
        ext = inputs.public
        if ext is not None and set(ext.labels) != set(secret_free.labels):
            # unlabelled external text (the schema is data.label_values): the public side carries no labels
            sf_text = Corpus(secret_free.ids, secret_free.texts, {}, name="secret_free")
            public = sf_text.concat(Corpus(tuple(f"ext-{i}" for i in ext.ids), ext.texts, {}), name="public")
        else:
            public = secret_free if ext is None else secret_free.concat(
                Corpus(tuple(f"ext-{i}" for i in ext.ids), ext.texts, ext.labels), name="public")
        summary = matrix.summary()
        self.detector = detector
        self.matrix = matrix.subset_records(priv_idx)
        self.diagnostic("secrets", None, {
            "detector": self.options.detector, "records": len(inputs.private),
            "records_with_secrets": len(priv_idx), "records_public": len(pub_idx),
            "external_public_records": 0 if inputs.public is None else len(inputs.public), **summary,
        })
        self.log(f"secrets: {len(priv_idx)} of {len(inputs.private)} records hold a declared secret; "
                 f"{self.matrix.matrix.shape[1]} distinct secrets")
        if len(private) == 0:
            self.log("no record holds a secret: every record is public; clusters carry no private signal")
        # every detected value (all holders propagated) goes back with the corpora: the guard scans for them
        return Inputs(private=private, public=public, heldout=inputs.heldout, subsampled=inputs.subsampled,
                      secrets=matrix, secret_free=secret_free)

    def scorer(self, ctx: RunContext) -> tuple[Scorer, LabelNoise | None]:
        from ...privacy import secret_noise

        inputs, space, embedder = ctx.inputs, ctx.space, ctx.embedder
        cfg = self.options
        p = self.config.privacy.secret
        assert p is not None and inputs.public is not None
        if self.config.synthesis.label_distribution.kind == "dp":
            raise ConfigError("secpe uses the public label distribution (secret-free records are public); "
                              "set synthesis.label_distribution.kind to public, uniform or given")
        T = self.config.evolution.iterations
        plan = clustering_plan(T if cfg.recluster_each_iteration else 1, cfg.sample)
        compositions = plan.compositions
        with self.metrics.stage("secret_noise"):
            if self.matrix.matrix.shape[1] == 0 or len(inputs.private) == 0:
                noise: Any = _NoSecrets()
                self.log("no declared secret was found: nothing private enters the clusters (σ = 0)")
            else:
                noise = secret_noise(self.matrix.matrix, p=p.p, r=p.r, compositions=compositions,
                                     sampling=cfg.sampling, eta=cfg.eta, blowup=cfg.blowup,
                                     release_sensitivity=plan.release_sensitivity)
        sigma = float(noise.sigma)
        rho = np.asarray(noise.rho, dtype=np.float64)
        self.log(f"SecretNoise: σ={sigma:.4f} over {compositions} releases; ρ mean={rho.mean() if len(rho) else 0:.4f}"
                 f" ({noise.mode})")
        secret_free: Corpus = inputs.secret_free if inputs.secret_free is not None else inputs.public
        base = secret_free if cfg.cluster_public == "secret_free" and len(secret_free) else inputs.public
        private_emb = ctx.embed_private(inputs.private.texts)
        # the secret-free records are the private file's too (public only under SecPE's relation): they go through
        # the private embedding cache like the rest of the file, so a later run embeds none of the file again
        from_file = inputs.secret_free

        def embed_base(corpus: Corpus) -> np.ndarray:
            if from_file is not None and corpus is from_file:
                return ctx.embed_private(corpus.texts)
            with self.metrics.stage("embedding_public"):
                return embedder.embed(list(corpus.texts))  # as returned (exact votes read a tiered array's source)

        public_emb = embed_base(base)
        # unlabelled public text (data.label_values): one clustering, offered to every label group, whose own
        # private records then vote among the same public centres
        unlabelled = bool(space.columns) and not all(c in base.labels for c in space.columns)
        public_groups = (space.groups_of(base.label_tuples(space.columns)) if space.columns and not unlabelled
                         else np.zeros(len(base), dtype=np.int64))
        k = cfg.clusters if cfg.clusters != "auto" else auto_clusters(
            n_public=len(base), n_groups=len(np.unique(public_groups[public_groups >= 0])) or 1,
            num_samples=self.config.synthesis.num_samples, sigma=sigma, dim=int(public_emb.shape[1]),
            radius=cfg.clip_radius, noise_norm=cfg.noise_norm)
        with self.metrics.stage("public_kmeans"):
            clusters = public_kmeans(public_emb, public_groups, 1 if unlabelled else len(space), k,
                                     seed=0 if self.seed is None else int(self.seed), radius=cfg.clip_radius,
                                     iters=cfg.kmeans_iters, backend=cfg.kmeans, metric=self.config.voting.metric,
                                     sample_per_centre=cfg.kmeans_sample_per_centre)
            if unlabelled:
                clusters = replicate_clusters(clusters, len(space))
        direct_emb = direct_groups = None
        if cfg.voting == "hybrid":
            sf_groups = (space.groups_of(secret_free.label_tuples(space.columns)) if space.columns
                         else np.zeros(len(secret_free), dtype=np.int64))
            direct_emb = public_emb if base is secret_free else embed_base(secret_free)
            direct_groups = sf_groups
        self.sigma, self.plan = sigma, plan
        self.diagnostic("secret_noise", None, {
            "noise_std": sigma, "compositions": compositions, "clusters": len(clusters),
            **(noise.summary() if hasattr(noise, "summary") else {"mode": noise.mode}),
        })
        v = self.config.voting
        scorer = ClusterScorer(clusters=clusters, private_emb=private_emb, private_groups=ctx.private_groups,
                               rho=rho, sigma=sigma, noise=noise, options=cfg, metric=v.metric, center=v.center,
                               threshold=self.config.evolution.threshold, relation=ctx.relation, keeper=ctx.keeper,
                               noise_rng=self.noise_rng, diagnostic=self.diagnostic, direct_emb=direct_emb,
                               direct_groups=direct_groups)
        return with_learn_hooks(scorer, ctx), None


def replicate_clusters(clusters: PublicClusters, n_groups: int) -> PublicClusters:
    """The clusters of unlabelled public text offered to each of ``n_groups`` label groups (public: a copy per
    group; each group's private records vote among its copy)."""
    k = len(clusters)
    return PublicClusters(np.tile(clusters.centres, (n_groups, 1)), np.tile(clusters.sizes, n_groups),
                          np.repeat(np.arange(n_groups, dtype=np.int64), k))


__all__ = ["SecPE", "SecPEOptions", "replicate_clusters"]
