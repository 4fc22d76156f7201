"""``method: dpft`` — DP-SGD fine-tuning of a causal language model on the private records, then sampling.

The road the newest private-text work takes (CTCL, ACTG-ARL, google's dpsynth): a generator pretrained on public
text is fine-tuned on the private records with DP-SGD (Abadi et al. 2016) and the synthetic records are sampled
from it; everything after the fine-tuning is post-processing.

1. **the model** — by default the small GPT-2 trained here on the public corpus (:mod:`privtext.generate.lm`,
   cached; ``dpft.lm`` holds its training settings, those of ``generator: {backend: lm}``); or any Hugging Face
   causal LM (``dpft.model``: a local folder or a hub id in the cache); either fully fine-tuned or with LoRA
   adapters (``dpft.lora: {r: 8}``, peft; the base weights frozen). LoRA changes only d, the number of noised
   coordinates: σ, q, C and the accounting are the same. Labels are control codes (:mod:`.models`); with LoRA
   on the small LM, each code's input embedding also gets a trainable delta (``dpft.train_codes``,
   :mod:`.codedelta`), clipped and noised with the adapters. A record's loss is its text's given its codes
   (``dpft.loss_on: text``; ``sequence`` also makes the codes targets).
2. **the label mix** — ``synthesis.label_distribution.kind: dp``: a Gaussian label histogram (one count per
   record, Δ = 1 from the relation) with noise multiplier σ_L = 1/μ_L, μ_L² = ``budget_fraction``·μ², μ the GDP
   level of (ε, δ) (:class:`~privtext.privacy.budget.BudgetSplit`); otherwise the public label weights.
3. **DP-SGD** (:mod:`privtext.mechanisms.dpsgd`) — Poisson sampling at rate q, per-record clipping at L2 norm
   C = ``max_grad_norm`` (Opacus), N(0, (σC)²) on the clipped sum, AdamW (or plain SGD: ``optimizer: sgd``) on
   the sum divided by the expected batch size B (``batch_size``, a public constant). One release per epoch,
   ``dpsgd/epoch_NNN``: ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), steps per epoch)``
   with Δ = C (:func:`~privtext.privacy.release.dpsgd_release`), recorded
   in the ledger before the epoch runs; its kept value is the trainable parameters and the optimiser state after
   the epoch (``private/checkpoints/releases``), so a resumed run reloads finished epochs without spending again
   and continues from the last one. σ is the smallest noise multiplier whose composition with the label
   histogram meets (ε, δ) on dp_accounting's PLD (:func:`~privtext.privacy.calibration.calibrate`); the ledger
   accounts for the same events. ``privacy: {noise_multiplier: σ}`` fixes σ instead (ε reported only).
4. **sampling** — ``synthesis.num_samples`` records, each label group's share from step 2, each drawn from the
   fine-tuned model given its label's codes (non-private randomness: post-processing).

The sampling rate q = ``dpft.sampling_rate`` is a public parameter (default :data:`DEFAULT_SAMPLING_RATE` =
1/16), and steps per epoch = round(1/q): q, the steps and σ are functions of the configuration and the budget
alone. Under add/remove one record the number of private records N is itself private, so q is never derived from
it — DP-SGD implementations' q = B/N (Opacus' ``make_private``, dp-transformers) makes N public, and privacy.json
then held N exactly (issue 36). A run expects q·N records per step; B = ``dpft.batch_size`` only divides the noisy
sum (AdamW is invariant to it; plain SGD needs it set, to a public estimate of q·N), and giving ``batch_size``
without ``sampling_rate`` is refused: it reads as the former q = B/N.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from ...backends import BackendOptions
from ...config import Config
from ...errors import ConfigError, MissingDependencyError
from ...progress import progress
from ..base import LabelNoise, MethodDescription, MethodRun, RunContext, StatementParts, Synthetic

if TYPE_CHECKING:
    from ...privacy.ledger import Ledger
    from ...privacy.statement import Assumption

#: q when dpft.sampling_rate is not given: 16 steps per epoch, an expected q·N records each (public: no N)
DEFAULT_SAMPLING_RATE = 1 / 16


class LoRAOptions(BackendOptions):
    r: int = Field(default=8, ge=1, description="adapter rank")
    alpha: float | None = Field(default=None, gt=0, description="LoRA scaling α (default 2r)")
    target_modules: list[str] | None = Field(
        default=None, description="module names that get adapters (default: peft's choice for the architecture, "
        "e.g. c_attn for GPT-2)")


class DPFTOptions(BackendOptions):
    """The ``dpft:`` section."""

    model: str | None = Field(
        default=None, description="a Hugging Face causal LM (local folder or hub id in the cache); default: the "
        "small GPT-2 trained here on the public corpus (settings in dpft.lm)")
    lora: LoRAOptions | None = Field(default=None, description="LoRA adapters instead of full fine-tuning "
                                     "(dpft.model's, or the small public LM's: c_attn by default)")
    lm: dict[str, Any] = Field(default_factory=dict, description="the small LM's training settings: the options "
                               "of generator: {backend: lm} (size, max_length, epochs, train_tokens, cache_dir, ...)")
    reserve_codes: bool = Field(default=True, description="the small LM gets a control code for every value of "
                                "data.label_values the public corpus lacks (set from its words, learnt by the "
                                "fine-tuning); false: such values get no code and their records train and sample "
                                "unconditioned (the behaviour before reserved codes)")
    loss_on: Literal["text", "sequence"] = Field(
        default="text", description="text: a record's loss counts the tokens after its sampling prompt (the text "
        "and its end, given the label codes); sequence: every token, the codes too (the label prior, which the DP "
        "label histogram already gives)")
    train_codes: bool = Field(default=True, description="with LoRA on the small public LM, the label codes' input "
                              "embeddings get a trainable delta each (k·d numbers), so the fine-tuning can move "
                              "the codes and not only learn to read them; full fine-tuning trains them anyway")
    max_grad_norm: float = Field(default=1.0, gt=0, description="C: every record's gradient is clipped to L2 "
                                 "norm C (the sensitivity of a step's gradient sum)")
    sampling_rate: float = Field(default=DEFAULT_SAMPLING_RATE, gt=0, le=1, description="q, public: each record "
                                 "is in a step's batch with probability q; an epoch is round(1/q) steps (default "
                                 "1/16: 16 steps, q·N records expected in each; never derived from the private N)")
    batch_size: int = Field(default=64, ge=1, description="B, the normaliser: the noisy gradient sum is divided by "
                            "B (AdamW is invariant to it; with optimizer sgd set it to your public estimate of the "
                            "expected batch q·N). It does not set q: give sampling_rate with it")
    epochs: int = Field(default=3, ge=0, description="passes of round(1/q) steps each; 0 samples the public "
                        "model without fine-tuning (the no-signal control)")
    lr: float = Field(default=5e-4, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    optimizer: Literal["adamw", "sgd"] = "adamw"
    max_length: int = Field(default=256, ge=8, description="tokens of a record used in training (its first ones)")
    physical_batch_size: int = Field(default=16, ge=1, description="records per forward/backward pass (memory)")
    noise_source: Literal["csprng", "torch"] = Field(
        default="csprng", description="csprng: numpy ChaCha20 keyed by OS entropy (privacy/noise.add_gaussian); "
        "torch: a torch.Generator on the model's device seeded from it (faster for large models on a GPU, not a "
        "CSPRNG)")
    device: str = Field(default="auto", description="auto (cuda when available), cpu, cuda, cuda:1")
    devices: list[str] | None = Field(
        default=None, description="DP-SGD on several devices, one process each (e.g. [cuda:0, cuda:1], or [cpu, "
        "cpu] on a multi-core machine): every step's records are split over them, the clipped sums added, the "
        "noise drawn once by the first (privtext.mechanisms.dpsgd_workers); the model is built and sampled on "
        "the first. Replaces device")
    torch_threads: int | None = Field(default=None, ge=1, description="CPU threads (restored after the run)")
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    top_k: int = Field(default=0, ge=0)
    max_new_tokens: int = Field(default=256, ge=1)
    min_new_tokens: int = Field(default=4, ge=0)
    sample_batch_size: int = Field(default=32, ge=1)

    @field_validator("lm")
    @classmethod
    def _lm_options(cls, v: dict[str, Any]) -> dict[str, Any]:
        from ...backends import parse_options
        from ...generate.lm.backend import LMOptions

        parse_options(LMOptions, v, where="dpft.lm")
        return v

    @field_validator("devices")
    @classmethod
    def _devices(cls, v: list[str] | None) -> list[str] | None:
        from ...mechanisms.dpsgd_workers import check_devices

        if v is None:
            return None
        try:
            return check_devices(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @model_validator(mode="after")
    def _one_device_option(self) -> DPFTOptions:
        if self.devices is not None and self.device not in ("auto", self.devices[0]):
            raise ValueError(f"dpft.device {self.device!r} and dpft.devices {self.devices}: give one of them (the "
                             "model is built on devices[0])")
        return self

    @model_validator(mode="after")
    def _public_sampling(self) -> DPFTOptions:
        # q = batch_size / N would make the private record count N public (issue 36): batch_size alone is refused
        # rather than silently read as a normaliser with the default q
        if "batch_size" in self.model_fields_set and "sampling_rate" not in self.model_fields_set:
            raise ValueError(f"dpft.batch_size {self.batch_size} without dpft.sampling_rate: q is not batch_size / N "
                             "(N, the number of private records, is private); give the sampling rate q as "
                             f"dpft.sampling_rate (public; default {DEFAULT_SAMPLING_RATE:g}), and batch_size as "
                             "your public estimate of the expected batch q·N")
        return self

    @model_validator(mode="after")
    def _sgd_normaliser(self) -> DPFTOptions:
        # The noisy sum is divided by batch_size. AdamW is invariant to that constant; plain SGD's step is not, so
        # with batch_size left at its default 64 an SGD run would take steps q·N/64 times too large.
        if self.optimizer == "sgd" and "batch_size" not in self.model_fields_set:
            raise ValueError(f"optimizer 'sgd' with sampling_rate {self.sampling_rate:g}: the noisy gradient sum "
                             "is divided by batch_size, which is not set (default 64); set dpft.batch_size to your "
                             "public estimate of the expected batch q·N")
        return self


@dataclass(frozen=True)
class DPFTPlan:
    """The run's DP-SGD parameters (module docstring): functions of the configuration and the budget only."""

    sampling_rate: float
    steps_per_epoch: int
    epochs: int
    noise_multiplier: float | None  # None: no fine-tuning
    label_sigma: float | None  # None: no DP label histogram

    @property
    def steps(self) -> int:
        return self.steps_per_epoch * self.epochs


def dpft_plan(config: Config, options: DPFTOptions, budget: Any = None) -> DPFTPlan:
    """q, steps, σ and σ_L (module docstring), from the configuration and the budget: no private value enters.

    ``budget`` is the run's :class:`~privtext.privacy.budget.Budget` (default: the configured one, what the run's
    ledger enforces). σ_L = 1/μ_L with μ_L² = f·μ², μ the GDP level of (ε, δ) (Dong et al. 2019, Cor 2.13,
    privtext's :func:`~privtext.privacy.conversions.gdp_mu_for_dp`) and f = ``budget_fraction``
    (:func:`~privtext.privacy.calibration.gaussian_share_noise_multiplier`); σ the smallest noise multiplier with
    ε(δ) ≤ ε for [Gaussian(σ_L), SelfComposed(PoissonSampled(q, Gaussian(σ)), epochs·round(1/q))] (Abadi et al.
    2016 Alg 1; the sampled Gaussian's PLD, Koskela et al. 2020 / dp_accounting), through
    :func:`~privtext.privacy.calibration.noise_multiplier`."""
    from ...privacy import Budget
    from ...privacy.calibration import gaussian_share_noise_multiplier, noise_multiplier
    from ...privacy.events import composed, dpsgd_event, gaussian_event

    b = Budget.from_config(config.privacy) if budget is None else budget
    q = float(options.sampling_rate)
    per_epoch = max(1, round(1.0 / q))
    epochs = options.epochs
    ld = config.synthesis.label_distribution
    labels = ld.kind == "dp" and bool(config.data.label_columns)
    if b.kind == "noise":
        sigma = noise_multiplier(b, gaussian_event)  # the fixed σ (no target)
        return DPFTPlan(q, per_epoch, epochs, sigma if epochs else None, sigma if labels else None)
    if b.kind != "dp":
        raise ConfigError(f"method dpft needs privacy: {{epsilon, delta}} (or a fixed noise_multiplier); a "
                          f"{b.kind!r} budget cannot account for Poisson-subsampled DP-SGD")
    label_sigma = gaussian_share_noise_multiplier(b, ld.budget_fraction) if labels else None
    if not epochs:
        return DPFTPlan(q, per_epoch, 0, None, label_sigma)
    steps = per_epoch * epochs

    def event(s: float) -> Any:
        e = dpsgd_event(s, q, steps)
        return e if label_sigma is None else composed([gaussian_event(label_sigma), e])

    sigma = noise_multiplier(b, event, lower=0.05, upper=1e3)
    return DPFTPlan(q, per_epoch, epochs, sigma, label_sigma)


class DPFT(MethodRun):
    name: ClassVar[str] = "dpft"
    description: ClassVar[MethodDescription] = MethodDescription(
        section="dpft", title="dpft", guarantee="approximate", audit_game="membership", unit="epoch", planned="epochs",
        release_words="the fine-tuned model (DP-SGD, one release per epoch)",
        zero_shot_words="every dpft sample comes from the fine-tuned model; its control is a run of its own",
        control=("dpft.epochs=0",),
        control_words="the public model sampled before fine-tuning (its label histogram is still the DP one)")
    Options = DPFTOptions
    options: DPFTOptions

    @classmethod
    def check_config(cls, config: Config, options: Any) -> None:
        p = config.privacy
        if p.kind not in ("dp", "noise"):
            raise ConfigError(f"method dpft needs privacy: {{epsilon, delta}} (or a fixed noise_multiplier); a "
                              f"{p.kind!r} budget cannot account for Poisson-subsampled DP-SGD")
        if options.lora is not None:
            try:
                import peft  # noqa: F401
            except ImportError:
                raise MissingDependencyError("peft", "dpft", "LoRA fine-tuning (dpft.lora)") from None
        if options.model is not None:
            from ...backends.hub import check_model_available

            check_model_available(options.model, what="dpft.model")
        if options.epochs:
            try:
                import opacus  # noqa: F401
            except ImportError:
                raise MissingDependencyError("opacus", "dpft", "DP-SGD fine-tuning (method: dpft)") from None
        if options.devices is not None:
            from ...mechanisms.dpsgd_workers import check_devices_available

            check_devices_available(options.devices)
        dpft_plan(config, options)  # an unreachable budget fails before a run directory exists
        if config.data.label_columns and config.data.label_values is not None:
            from ...progress import say

            # measured, not assumed: docs/corpus-matrix.md (tickets, declared labels) and docs/dpft.md (Yelp)
            say("note: with data.label_values (public text without the labels) dpft learns which label goes with "
                "which text from the private records alone, through DP-SGD; on 2,000 support tickets of 10 intents "
                "at ε = 4 and the default 3 epochs its labels were at chance (docs/corpus-matrix.md). Check them "
                "with `privtext evaluate` before relying on them")

    uses_embedder: ClassVar[bool] = False  # no votes, no keyphrase density: nothing is embedded

    def generator_configs(self) -> list[Any]:
        """No generator backend: the fine-tuned model writes the records."""
        return []

    # ------------------------------------------------------------------ pieces
    def _threads(self) -> contextlib.AbstractContextManager[None]:
        from ...backends.hardware import torch_threads

        return torch_threads(self.options.torch_threads)

    def device(self) -> Any:
        import torch

        d = self.options.devices[0] if self.options.devices else self.options.device
        cuda = torch.cuda.is_available()
        dev = d if d != "auto" else ("cuda" if cuda else "cpu")
        if dev.startswith("cuda") and not cuda:
            raise ConfigError(f"dpft.device {d!r}: CUDA is not available on this machine")
        return torch.device(dev)

    def build_model(self, ctx: RunContext) -> Any:
        from .models import HFCausalLM, PublicSmallLM

        o = self.options
        if o.model is not None:
            lora = o.lora.model_dump() if o.lora is not None else None
            return HFCausalLM(o.model, device=self.device(), max_length=o.max_length, lora=lora,
                              temperature=o.temperature, top_p=o.top_p, top_k=o.top_k,
                              max_new_tokens=o.max_new_tokens, min_new_tokens=o.min_new_tokens,
                              batch_size=o.sample_batch_size, init_seed=self._lora_seed())
        from ...backends import parse_options
        from ...generate.lm import SamplingSettings, build_public_lm
        from ...generate.lm.backend import LMOptions

        public = ctx.public
        if public is None or len(public) == 0:
            raise ConfigError("method dpft's default model is trained on the public corpus: set data.public (or "
                              "give dpft.model, a Hugging Face causal LM)")
        lo = parse_options(LMOptions, o.lm, where="dpft.lm")
        cols = [c for c in ctx.space.columns if c in public.labels]
        labels = {c: public.labels[c] for c in cols} if cols else None
        with self.metrics.stage("setup_generator"):
            # the declared schema's values get codes even where the public corpus lacks them: DP fine-tuning
            # learns them from the private records (an unlabelled public corpus still gives a label-conditioned
            # generator, as CTCL's DP topic histogram + conditional generator do)
            lm = build_public_lm(public.texts, labels, settings=lo.settings(), cache=lo.cache,
                                 cache_dir=lo.cache_dir, device=str(self.device()), guard=ctx.guard,
                                 reserve_codes=self.config.data.label_values if o.reserve_codes else None)
        self.log(f"public lm: {lm.info.get('cache')} ({lm.info.get('parameters')} parameters)")
        sampling = SamplingSettings(temperature=o.temperature, top_p=o.top_p, top_k=o.top_k,
                                    max_new_tokens=o.max_new_tokens, min_new_tokens=o.min_new_tokens,
                                    batch_size=o.sample_batch_size)
        return PublicSmallLM(lm, max_length=o.max_length, sampling=sampling,
                             lora=o.lora.model_dump() if o.lora is not None else None,
                             # the control (epochs 0) trains nothing: zero deltas would change no logit, and its
                             # statement would name parameters that never moved
                             train_codes=o.train_codes and o.epochs > 0, init_seed=self._lora_seed())

    def _lora_seed(self) -> int:
        """The LoRA adapters' starting draw: public randomness of the run's seed (``rng``)."""
        from ...rng import spawn_seed

        return spawn_seed(self.rng("dpft", "lora_init"))

    def fine_tune(self, ctx: RunContext, model: Any, seqs: list[list[int]], plan: DPFTPlan,
                  starts: list[int] | None = None) -> None:
        """The epochs of DP-SGD, one recorded release each (module docstring)."""
        import torch

        from ...mechanisms.dpsgd import (
            dpsgd_contribution,
            dpsgd_steps,
            load_state_arrays,
            make_private,
            state_arrays,
            unwrap,
        )
        from ...mechanisms.dpsgd_workers import GradientWorkers
        from ...privacy.release import dpsgd_release
        from .models import SequenceLoss

        o = self.options
        device = next(model.model.parameters()).device
        params = model.trainable()
        if not params:
            raise ConfigError("dpft: the model has no trainable parameters")
        ps = [p for _, p in params]
        inner = (torch.optim.AdamW(ps, lr=o.lr, weight_decay=o.weight_decay) if o.optimizer == "adamw"
                 else torch.optim.SGD(ps, lr=o.lr, weight_decay=o.weight_decay))
        loss = SequenceLoss(seqs, model.pad_id, starts)
        assert plan.noise_multiplier is not None
        contribution = dpsgd_contribution(o.max_grad_norm)
        with contextlib.ExitStack() as stack:
            group = None
            if o.devices is not None and len(o.devices) > 1:  # started before Opacus wraps the model: the
                # workers get a copy of the plain model (no hooks)
                self.log(f"DP-SGD on {len(o.devices)} devices: {', '.join(o.devices)}")
                group = stack.enter_context(GradientWorkers(
                    model.model, [n for n, _ in params], loss, devices=o.devices, max_grad_norm=o.max_grad_norm,
                    physical_batch_size=o.physical_batch_size, threads=o.torch_threads))
            gs, opt = make_private(model.model, inner, max_grad_norm=o.max_grad_norm, normaliser=o.batch_size)
            stack.callback(unwrap, gs)
            loss_of = loss.make(gs, device)
            stack.enter_context(self.metrics.stage("fine_tuning"))
            bar = stack.enter_context(progress("DP fine-tuning (steps)", plan.steps))
            for e in range(plan.epochs):
                release = dpsgd_release(
                    f"dpsgd/epoch_{e:03d}", noise_multiplier=plan.noise_multiplier,
                    sampling_rate=plan.sampling_rate, steps=plan.steps_per_epoch, contribution=contribution,
                    relation=ctx.relation, iteration=e,
                    description=f"DP-SGD epoch {e + 1}/{plan.epochs}: {plan.steps_per_epoch} noisy sums of "
                                "per-record clipped gradients of Poisson samples")
                done: list[Any] = []

                def compute(release: Any = release, done: list[Any] = done) -> tuple[dict[str, Any], Any]:
                    stats, event = dpsgd_steps(
                        gs, opt, n_records=len(seqs), loss_of=loss_of, steps=plan.steps_per_epoch,
                        sampling_rate=plan.sampling_rate, noise_std=release.noise_std,
                        sensitivity=release.sensitivity, rng=self.noise_rng(release.key),
                        physical_batch_size=o.physical_batch_size, noise_source=o.noise_source,
                        on_step=lambda t, s: bar.advance(1), workers=group)
                    done.append(stats)
                    return state_arrays(params, opt), event

                kept = ctx.keeper.release(release, compute)
                if done:  # exact private statistics: diagnostics only
                    self.diagnostic("fine_tuning", f"epoch_{e:03d}", done[0].to_dict())
                    self.log(f"DP-SGD epoch {e + 1}/{plan.epochs}: {done[0].steps} steps in "
                             f"{done[0].seconds:.0f} s")
                else:  # resumed: this epoch was kept; continue from it
                    load_state_arrays(kept, params, opt)
                    bar.advance(plan.steps_per_epoch)
                    self.log(f"DP-SGD epoch {e + 1}/{plan.epochs}: reloaded (no new noise, no budget)")
        model.model.eval()

    # ------------------------------------------------------------------ the generation
    def generate(self, ctx: RunContext) -> Synthetic:
        o = self.options
        priv, space = ctx.inputs.private, ctx.space
        self.plan = plan = dpft_plan(self.config, o, self.budget)
        counts = ctx.label_counts(LabelNoise("gaussian", sigma=plan.label_sigma)
                                  if plan.label_sigma is not None else None)
        with self._threads():
            model = self.build_model(ctx)
            self.origin = model.origin
            if plan.epochs:
                from .models import prompt_length

                cols = [c for c in space.columns if c in priv.labels]
                rows = [{c: priv.labels[c][i] for c in cols} if cols else None for i in range(len(priv.texts))]
                seqs = [model.training_sequence(t, r) for t, r in zip(priv.texts, rows, strict=True)]
                starts = ([prompt_length(s, model.prompt(r)) for s, r in zip(seqs, rows, strict=True)]
                          if o.loss_on == "text" else None)
                self.log(f"DP-SGD: q = {plan.sampling_rate:.4g}, {plan.epochs} epochs × {plan.steps_per_epoch} "
                         f"steps, σ = {plan.noise_multiplier:.4g}, C = {o.max_grad_norm:g}, on "
                         f"{next(model.model.parameters()).device}")
                self.fine_tune(ctx, model, seqs, plan, starts)
            texts, groups = self.sample(ctx, model, counts)
        return Synthetic(texts=texts, groups=groups)

    def sample(self, ctx: RunContext, model: Any, counts: np.ndarray) -> tuple[list[str], np.ndarray]:
        """``counts[g]`` records of each label group, drawn from the (fine-tuned) model given the group's codes."""
        space = ctx.space
        prompts: list[list[int]] = []
        groups: list[int] = []
        for g, c in enumerate(counts):
            label = dict(zip(space.columns, space.values[g], strict=True)) if space.columns else None
            ids = model.prompt(label)
            rendered = model.render(ids)
            for _ in range(int(c)):
                ctx.prompt_log.log(backend="dpft", operation="sample", prompt=f"[model input] {rendered}",
                                   meta={"label_group": g})
                prompts.append(ids)
                groups.append(g)
        stats: dict[str, int] = {}
        with self.metrics.stage("generation") as st, progress("sampling from the fine-tuned model",
                                                              len(prompts)) as bar:
            texts: list[str] = []
            rng = self.rng("dpft", "sample")
            step = max(1, self.options.sample_batch_size * 4)
            for s in range(0, len(prompts), step):
                texts.extend(model.sample(prompts[s:s + step], rng, stats))
                bar.advance(len(prompts[s:s + step]))
            st.count("texts", len(texts))
        c = self.metrics.counters
        c["llm_calls"] = stats.get("calls", 0)
        c["llm_prompts"] = len(prompts)
        c["llm_prompt_tokens"] = stats.get("prompt_tokens", 0)
        c["llm_completion_tokens"] = stats.get("completion_tokens", 0)
        return texts, np.asarray(groups, dtype=np.int64)

    # ------------------------------------------------------------------ the statement
    def statement_parameters(self) -> dict[str, Any]:
        ld = self.config.synthesis.label_distribution
        return {"num_samples": self.config.synthesis.num_samples, "label_distribution": ld.kind}

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """The guarantee in words. Numbers: the configuration, the budget, ε spent (a function of the events), and
        q, the steps and σ — functions of the configuration and the budget (module docstring): no number here
        depends on the private data, its record count included."""
        o, plan, b = self.options, self.plan, self.budget
        s = ledger.spent()
        unit = self.relation.words()
        n = len(ledger)
        assumed: list[Assumption] = []
        if b.kind == "dp":
            guarantee: dict[str, Any] = {"kind": "dp", "budget": b.to_dict(), "neighbouring_relation": unit,
                                         "releases": n, "spent": {"epsilon": s["epsilon"], "delta": b.delta}}
            head = (f"({s['epsilon']:.4g}, {b.delta:g})-differential privacy for {unit} (budget ε = "
                    f"{b.epsilon:g}; dp_accounting's PLD)")
        else:
            guarantee = {"kind": "noise", "budget": b.to_dict(), "neighbouring_relation": unit, "releases": n,
                         "spent": {"epsilon_at_report_delta": s["epsilon_at_report_delta"],
                                   "report_delta": b.report_delta}}
            head = (f"fixed noise: ({s['epsilon_at_report_delta']:.4g}, {b.report_delta:g})-differential privacy "
                    f"for {unit} (no budget cap)")
        if plan.epochs:
            assert plan.noise_multiplier is not None
            head += (f": DP-SGD fine-tuning of {self.origin} for {plan.epochs} epochs ({plan.steps:.4g} steps; "
                     f"Poisson sampling rate q = {plan.sampling_rate:.4g}, every record's gradient clipped to L2 "
                     f"norm C = {o.max_grad_norm:g}, Gaussian noise multiplier σ = {plan.noise_multiplier:.4g})")
        else:
            head += f": {self.origin} sampled without fine-tuning (dpft.epochs: 0)"
        if plan.label_sigma is not None:
            head += f"; the records per label from a Gaussian label histogram (σ = {plan.label_sigma:.4g})"
        params: dict[str, Any] = {
            "model": o.model or "lm (trained here on the public corpus)", "lora": o.lora.model_dump() if o.lora
            else None, "max_grad_norm": o.max_grad_norm, "epochs": o.epochs, "batch_size": o.batch_size,
            "optimizer": o.optimizer, "lr": o.lr, "weight_decay": o.weight_decay, "max_length": o.max_length,
            "noise_source": o.noise_source, "temperature": o.temperature, "top_p": o.top_p,
            "sampling_rate": plan.sampling_rate, "steps_per_epoch": plan.steps_per_epoch, "steps": plan.steps,
            "noise_multiplier": plan.noise_multiplier}
        if plan.label_sigma is not None:
            params["label_noise_multiplier"] = plan.label_sigma
        ld = self.config.synthesis.label_distribution
        public = [f"the model's weights before fine-tuning: {self.origin}",
                  "the label schema (the public label values)"]
        if ld.kind != "dp" and self.config.data.label_columns:
            public.append(f"the samples per label ({ld.kind} label distribution)")
        coverage = [
            "The guarantee covers everything the run derives from the private records: the fine-tuned weights "
            "(kept in private/checkpoints, not released) and every record sampled from them (post-processing).",
            f"A record longer than {o.max_length} tokens contributes only its first {o.max_length} tokens.",
            "The hyperparameters (learning rate, clipping norm, epochs, batch size) are part of the "
            "configuration: choosing them by trying runs on the private data would spend privacy the ledger does "
            "not see.",
        ]
        return StatementParts(guarantee=guarantee, headline=head + ".", parameters=params, assumed_public=assumed,
                              treated_as_public=public, coverage=coverage)


__all__ = ["DEFAULT_SAMPLING_RATE", "DPFT", "DPFTOptions", "DPFTPlan", "LoRAOptions", "dpft_plan"]
