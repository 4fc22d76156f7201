"""The options of learning from the released votes: ``evolution.learn`` and ``evolution.final`` (docs/learn.md).

``config.py`` holds ``evolution.learn`` as a mapping and ``evolution.final`` as a word (the configuration layer
imports nothing above it); :func:`check_learn_config` validates the mapping with :class:`LearnOptions` and refuses
the combinations that cannot work, naming the key, before any run folder exists (the vote methods' ``check_config``
calls it with ``learns=True``, every other method with ``learns=False`` and the reason).

::

    evolution:
      learn:
        kind: dpo            # none (default) | dpo | ngram_counts | rerank
        pairs: {reject_rank: 0.5, group_size: 10, pairs_per_group: 1}
        dpo: {beta: 0.01, loss: sigmoid, sft_weight: 0, epochs: 1, lr: 5.0e-4, lora_r: 8}
        ngram: {share: 0.5}
        rerank: {candidates: 2, min_pairs: 20}
        generators: [lm]     # WASP: the generators that learn (default: all)
      final: population      # population (default) | model | both
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from ..backends import BackendOptions
from ..errors import ConfigError


class PairOptions(BackendOptions):
    """How preference pairs are formed from a group of candidates ranked by their released votes
    (:func:`privtext.learn.pairs.preference_pairs`)."""

    reject_rank: float = Field(
        default=0.5, gt=0, description="which candidate is 'rejected': an integer k ≥ 2 is the k-th highest released "
        "count of the group (clipped to the group's size); a fraction q in (0, 1) is rank ⌈q·n⌉ of a group of n "
        "(at least 2). POPri's 5th of 10 is 0.5 (or 5)")
    group_size: int | None = Field(
        default=10, ge=2, description="a group larger than this (the completions of one label's prompt at "
        "iteration 0: hundreds) is cut into consecutive chunks of this size, each ranked on its own, as POPri "
        "ranks 10 completions per prompt; None: never cut")
    pairs_per_group: int = Field(
        default=1, ge=1, le=64, description="m pairs per group: rank i against rank reject_rank + i − 1, i = 1..m")
    min_margin: float = Field(
        default=0.0, ge=0, description="a pair is kept only when the chosen released count exceeds the rejected "
        "one by more than this (0: strictly greater; equal counts carry no preference)")

    @model_validator(mode="after")
    def _rank(self) -> PairOptions:
        r = self.reject_rank
        if r >= 1 and (r != int(r) or r < 2):
            raise ValueError(f"reject_rank must be a fraction in (0, 1) or an integer ≥ 2, got {r}")
        return self


class DPOOptions(BackendOptions):
    """Direct preference optimisation on LoRA adapters (Rafailov et al. 2023, Eq 7; POPri's settings where they
    apply: β = 0.01, one epoch per round, the reference is the original base model)."""

    trainer: Literal["auto", "native", "trl"] = Field(
        default="auto", description="native: privtext's DPO loop (any causal LM, token ids in: the lm generator's "
        "control codes; one process); trl: trl's DPOTrainer (Hugging Face models with a tokenizer; several GPUs "
        "through accelerate); auto: native for the lm generator, trl for a transformers generator")
    beta: float = Field(default=0.01, gt=0, description="β of the DPO loss (POPri: 0.01)")
    loss: Literal["sigmoid", "sigmoid_norm"] = Field(
        default="sigmoid", description="sigmoid: DPO's Eq 7 on summed completion log-probabilities (POPri); "
        "sigmoid_norm: the same on per-token averages, so a pair cannot be won by length alone (trl's loss_type of "
        "the same name; β about |y| times larger, privtext.learn.dpo)")
    sft_weight: float = Field(
        default=0.0, ge=0, le=100, description="α of RPO: + α · the chosen completions' negative log-likelihood per "
        "token, so the chosen texts' likelihood does not fall with the rejected ones' (trl: loss_type [<loss>, sft], "
        "loss_weights [1, α]; 0: plain DPO)")
    epochs: float = Field(default=1.0, gt=0, le=100, description="passes over each round's pairs (POPri: 1)")
    lr: float = Field(default=5e-4, gt=0, le=1, description="AdamW learning rate of the LoRA weights (constant; a new "
                      "optimiser per round). POPri used 8e-7 on Llama-3-8B; the small lm needs far more")
    batch_size: int = Field(default=8, ge=1, description="pairs per optimiser step")
    weight_decay: float = Field(default=0.0, ge=0)
    max_grad_norm: float | None = Field(default=1.0, gt=0, description="gradient clipping (None: off)")
    lora_r: int = Field(default=8, ge=1, le=256)
    lora_alpha: float = Field(default=16.0, gt=0)
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear", description="modules that get LoRA adapters (all-linear: every linear / GPT-2 Conv1D "
        "layer but the output layer)")
    max_length: int | None = Field(default=None, ge=8, description="prompt + completion tokens kept (default: "
                                   "the model's positions)")
    threads: int | None = Field(default=None, ge=1, description="CPU threads while training (restored afterwards)")
    devices: int = Field(
        default=1, ge=1, le=64, description="GPUs a round trains on: K > 1 starts `accelerate launch --num_processes K "
        "-m privtext.learn.worker` (trl, data-parallel; batch_size is per GPU); refused when fewer CUDA devices are "
        "visible (privtext.learn.launch)")
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="where the vllm generator's training process runs (auto: cuda when visible); the "
        "lm and transformers generators train where their model is")
    serve: Literal["lora", "merge"] = Field(
        default="lora", description="how the vllm generator writes with the trained adapter: lora — vLLM's LoRA "
        "serving (generator.enable_lora: true; a LoRARequest per call, the base weights stay loaded); merge — the "
        "adapter merged into a copy of the weights, vLLM restarted on it each round (privtext.learn.vllm)")


class NgramLearnOptions(BackendOptions):
    """The n-gram analogue: the counts re-estimated with the voted texts added
    (:func:`privtext.learn.ngram.reweighted_lm`)."""

    share: float = Field(default=0.5, gt=0, le=100, description="the voted texts' total weight, in documents, as a "
                         "share of the public training corpus' document count")
    max_copies: int = Field(default=50, ge=1, description="most copies of one voted text")


class RerankOptions(BackendOptions):
    """Best-of-k with a preference model fitted to the released pairs (:mod:`privtext.learn.rerank`)."""

    candidates: int = Field(default=2, ge=2, le=16, description="k: samples the generator writes for each one "
                            "kept (k times the generator calls once a preference model is fitted)")
    min_pairs: int = Field(default=20, ge=5, description="no preference model (every call passed through) until "
                           "this many pairs are kept")
    labels: Literal["none", "columns", "groups"] = Field(
        default="columns", description="how the preference model depends on the label a text is written for: none: "
        "one w for every label; columns: w plus one term for each value of each label column (a group's term shares "
        "pairs with every group of the same category or stars); groups: w plus one term for each label group")
    cs: list[float] = Field(default_factory=lambda: [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0],
                            min_length=1,
                            description="the inverse L2 strengths C that 5-fold cross-validation chooses from")

    @model_validator(mode="after")
    def _cs(self) -> RerankOptions:
        bad = [c for c in self.cs if not (c > 0 and np.isfinite(c))]
        if bad:
            raise ValueError(f"cs must hold positive finite numbers, got {bad[0]}")
        return self


class LearnOptions(BackendOptions):
    """``evolution.learn``: what the released votes teach the generator after each iteration."""

    kind: Literal["none", "dpo", "ngram_counts", "rerank"] = Field(
        default="none", description="none: the generator stays as it is; dpo: preference pairs → DPO on LoRA "
        "adapters (the lm and transformers generators); ngram_counts: vote-weighted n-gram counts (the ngram "
        "generator); rerank: a preference model fitted to the pairs keeps the best of k samples (any generator; "
        "the evolution loop: Aug-PE, SecPE)")
    pairs: PairOptions = Field(default_factory=PairOptions)
    dpo: DPOOptions = Field(default_factory=DPOOptions)
    ngram: NgramLearnOptions = Field(default_factory=NgramLearnOptions)
    rerank: RerankOptions = Field(default_factory=RerankOptions)
    generators: list[str] | None = Field(
        default=None, min_length=1, description="WASP with several generators: the names of those that learn "
        "(generators[i].name, else <backend>-<i>); the others write as they are, so an lm that learns with dpo can "
        "sit beside an ngram generator. Default: every generator (each must support the kind)")


#: ``evolution.final``: population — the evolved population's selected samples (today's output); model — samples
#: written by the trained generator from the public prompts (POPri); both — half and half, per label
FinalMode = Literal["population", "model", "both"]


class FinalOptions(BackendOptions):
    """``evolution.final`` written out (a bare string is its ``mode``)."""

    mode: Literal["population", "model", "both"] = "population"


#: the generator backends each kind trains (dpo: weights with LoRA adapters; ngram_counts: Kneser-Ney counts);
#: rerank trains no generator (it wraps any one) and is not listed
TRAINS: dict[str, tuple[str, ...]] = {"dpo": ("lm", "small-lm", "transformers", "hf", "huggingface", "vllm"),
                                      "ngram_counts": ("ngram",)}


def learn_options(config: Any) -> LearnOptions:
    """``config.evolution.learn`` validated (:class:`ConfigError` naming the key)."""
    from ..backends import parse_options

    return parse_options(LearnOptions, config.evolution.learn or {}, where="evolution.learn")  # type: ignore[no-any-return]


def check_learn_config(config: Any, *, learns: bool, method: str, why: str = "") -> LearnOptions:
    """``evolution.learn`` and ``evolution.final`` checked against the method and the generators, before any run
    folder is written: learning needs a method that learns from its released votes (``learns``; ``why`` says why
    not), ``dpo`` a generator with weights (lm, transformers), ``ngram_counts`` the ngram
    generator, and ``final: model | both`` a learner (else the model is the public one: use the zero-shot
    control). Raises :class:`ConfigError` naming the key."""
    o = learn_options(config)
    final = config.evolution.final
    if o.kind == "none":
        if final != "population":
            raise ConfigError(f"evolution.final: {final} samples from the trained generator, but evolution.learn.kind "
                              "is none (nothing is trained): set evolution.learn.kind or evolution.final: population")
        return o
    if not learns:
        raise ConfigError(f"evolution.learn.kind: {o.kind}: method {method} does not learn from released votes"
                          + (f" ({why})" if why else "") + "; use kind: none")
    several = list(getattr(config, "generators", None) or [])
    gens = several or [config.generator]
    if o.generators is not None:
        if not several:
            raise ConfigError("evolution.learn.generators names which of several generators (generators:) learn; "
                              "this run has one (generator:): remove evolution.learn.generators")
        names = [g.label(i) for i, g in enumerate(several)]
        unknown = [n for n in o.generators if n not in names]
        if unknown:
            raise ConfigError(f"evolution.learn.generators: {unknown[0]!r} is not a generator of this run; its "
                              f"generators are {', '.join(names)}")
    if o.kind == "rerank":  # wraps whatever generator the loop calls; trains none of them
        return o
    for i, g in enumerate(gens):
        if o.generators is not None and g.label(i) not in o.generators:
            continue
        backend = str(getattr(g, "backend", ""))
        if backend not in TRAINS[o.kind]:
            fit = [x.label(j) for j, x in enumerate(several) if str(getattr(x, "backend", "")) in TRAINS[o.kind]]
            raise ConfigError(f"evolution.learn.kind: {o.kind} trains the {' or '.join(TRAINS[o.kind])} generator; "
                              f"{f'generators[{i}].backend' if several else 'generator.backend'} is {backend!r}"
                              + (" (use kind: ngram_counts)" if backend == "ngram" else
                                 " (use kind: dpo)" if backend in TRAINS["dpo"] else "")
                              + (f"; or name the generators that learn in evolution.learn.generators, e.g. {fit}"
                                 if fit else ""))
        if o.kind == "dpo":
            _check_dpo(o.dpo, backend, g)
    return o


def _check_dpo(o: DPOOptions, backend: str, generator: Any) -> None:
    """``evolution.learn.dpo`` against the generator: several GPUs need trl (not the lm generator) and that many
    visible CUDA devices; the vllm generator trains through trl and serves the adapter with LoRA (its
    ``enable_lora`` on, ``max_lora_rank`` ≥ ``lora_r``) or merged."""
    small = backend in ("lm", "small-lm")
    if o.devices > 1:
        if small or o.trainer == "native":
            raise ConfigError(f"evolution.learn.dpo.devices: {o.devices} trains through trl under accelerate; "
                              + ("the lm generator trains with the native loop in one process" if small else
                                 "evolution.learn.dpo.trainer is native (use trl or auto)") + "; use devices: 1")
        from .devices import check_devices

        check_devices(o.devices)
    if backend != "vllm":
        return
    opts = generator.options() if hasattr(generator, "options") else dict(generator or {})
    if o.trainer == "native":
        raise ConfigError("evolution.learn.dpo.trainer: native trains a model in this process; the vllm generator's "
                          "weights train through trl in privtext.learn.worker (use trainer: auto)")
    engine = opts.get("engine_kwargs") or {}
    if o.serve == "lora":
        if not (opts.get("enable_lora") or engine.get("enable_lora")):
            raise ConfigError("evolution.learn.dpo.serve: lora serves the trained adapter through vLLM's LoRA "
                              "support: set generator.enable_lora: true (or evolution.learn.dpo.serve: merge)")
        rank = int(engine.get("max_lora_rank", opts.get("max_lora_rank", 16)))
        if o.lora_r > rank:
            raise ConfigError(f"evolution.learn.dpo.lora_r: {o.lora_r} exceeds the vllm generator's max_lora_rank "
                              f"{rank}: set generator.max_lora_rank: {o.lora_r} or more")


__all__ = ["TRAINS", "DPOOptions", "FinalMode", "FinalOptions", "LearnOptions", "NgramLearnOptions", "PairOptions",
           "RerankOptions", "check_learn_config", "learn_options"]
