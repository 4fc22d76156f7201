"""DP-SGD (Abadi et al. 2016, Alg 1) on a torch model: Poisson sampling, per-record clipping, Gaussian noise.

One step ``t``:

1. **sample** — every record is in the batch independently with probability q (Poisson sampling; the draws come
   from the release's privacy randomness, :func:`privtext.rng.noise_rng`, so which records were used stays as
   secret as the noise). A batch may be empty: the step then releases noise only (the analysis assumes every
   step is taken);
2. **per-record gradients** — Opacus' ``GradSampleModule`` computes ∇ℓᵢ for each record i of the batch (split
   into physical chunks of ``physical_batch_size`` records to bound memory; the chunks of one step add up);
3. **clip** — Opacus' ``DPOptimizer.clip_and_accumulate`` scales each record's whole gradient (all trainable
   parameters together) to L2 norm ≤ C and sums them: S_t = Σᵢ gᵢ·min(1, C/‖gᵢ‖₂);
4. **noise** — S_t + N(0, (σΔ)²·I) with Δ = the relation's sensitivity of one clipped gradient (C under
   add/remove one record: :func:`dpsgd_contribution`). The draw goes through :mod:`privtext.privacy.noise`
   (``add_gaussian`` on the flattened sum, ChaCha20 — the default — or ``add_gaussian_torch`` with a torch
   generator seeded from the release's ChaCha20 stream, ``noise_source="torch"``), so the contract suite's tracer
   sees it;
5. **step** — the noisy sum divided by the public normaliser B (the configured expected batch size) is the
   gradient of the wrapped optimiser (AdamW by default): post-processing.

T such steps are ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), T)``
(:func:`privtext.privacy.events.dpsgd_event`), the event :func:`dpsgd_steps` returns.

Opacus does steps 2–3 (its per-sample gradient hooks and its clipping); privtext does the sampling, the noise and
the accounting, so Opacus' own noise (``DPOptimizer.add_noise``: ``torch.normal`` from an unseeded or
``torchcsprng`` generator) and its accountant are not in the path: :class:`NoisyDPOptimizer` replaces
``add_noise``. Opacus' accountants (RDP, PRV) serve as the cross-check of the ledger's ε
(``tests/test_dpft.py``).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import BackendError, ConfigError, PrivacyError, optional_import
from ..privacy.events import DpEvent, dpsgd_event
from ..privacy.noise import add_gaussian, add_gaussian_torch
from ..privacy.relation import Contribution
from ..rng import spawn_seed

NoiseSource = Literal["csprng", "torch"]


def dpsgd_contribution(max_grad_norm: float) -> Contribution:
    """What one record adds to one step's gradient sum: its gradient clipped to L2 norm C (signed entries)."""
    return Contribution(float(max_grad_norm), "l2", nonnegative=False,
                        what=f"one record's gradient clipped to L2 norm {max_grad_norm:g}")


def _opacus() -> Any:
    return optional_import("opacus", "dpft", "DP-SGD fine-tuning (method: dpft)")


@functools.cache
def _noisy_optimizer_class() -> type:
    _opacus()
    from opacus.optimizers import DPOptimizer
    from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

    class NoisyDPOptimizer(DPOptimizer):  # type: ignore[misc]
        """Opacus' ``DPOptimizer`` (per-sample clipping, accumulation) whose noise is privtext's: ``add_noise``
        adds N(0, ``noise_std``²) to every coordinate of the clipped sum through :mod:`privtext.privacy.noise`,
        from ``noise_rng`` (a numpy generator of privacy randomness) or, with ``noise_source="torch"``, from a
        torch generator seeded from it."""

        noise_std: float = float("nan")
        noise_rng: np.random.Generator | None = None
        noise_source: NoiseSource = "csprng"
        _torch_generator: Any = None

        def set_noise(self, std: float, rng: np.random.Generator, source: NoiseSource) -> None:
            import torch

            self.noise_std, self.noise_rng, self.noise_source = float(std), rng, source
            self._torch_generator = None
            if source == "torch":
                device = self.params[0].device if self.params else torch.device("cpu")
                self._torch_generator = torch.Generator(device=device).manual_seed(spawn_seed(rng))

        def add_noise(self) -> None:
            import torch

            params = self.params
            if self.noise_rng is None or not np.isfinite(self.noise_std):
                raise PrivacyError("DP-SGD step without a noise stream: call set_noise first")
            for p in params:
                _check_processed_flag(p.summed_grad)
            if self.noise_source == "torch":
                for p in params:
                    p.grad = add_gaussian_torch(p.summed_grad, self.noise_std, self._torch_generator).view_as(p)
            else:
                flat = torch.cat([p.summed_grad.detach().reshape(-1).to("cpu", torch.float64) for p in params])
                noisy = torch.from_numpy(add_gaussian(flat.numpy(), self.noise_std, self.noise_rng))
                at = 0
                for p in params:
                    n = p.numel()
                    p.grad = noisy[at:at + n].view_as(p).to(p.device, p.dtype)
                    at += n
            for p in params:
                _mark_as_processed(p.summed_grad)

    return NoisyDPOptimizer


def make_private(model: Any, optimizer: Any, *, max_grad_norm: float, normaliser: float) -> tuple[Any, Any]:
    """(``GradSampleModule(model)``, a :class:`NoisyDPOptimizer` around ``optimizer``). The loss a step
    differentiates must be the mean over the chunk's records of each record's own loss (Opacus'
    ``loss_reduction="mean"``: the per-sample gradients are then each record's own gradient)."""
    opacus = _opacus()
    if not max_grad_norm > 0:
        raise ConfigError(f"the clipping norm must be positive, got {max_grad_norm!r}")
    gs = opacus.GradSampleModule(model, loss_reduction="mean")
    cls = _noisy_optimizer_class()
    opt = cls(optimizer, noise_multiplier=0.0, max_grad_norm=float(max_grad_norm),
              expected_batch_size=max(1, round(float(normaliser))), loss_reduction="mean")
    return gs, opt


def unwrap(model: Any) -> Any:
    """The model inside a ``GradSampleModule``, its per-sample hooks and attributes removed (for sampling)."""
    model.cleanup()
    return model._module


@dataclass
class StepStats:
    """What a run of steps did (private: batch sizes and losses are exact statistics of the private data)."""

    steps: int = 0
    records: int = 0
    empty_batches: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "records": self.records, "empty_batches": self.empty_batches,
                "seconds": round(self.seconds, 2),
                "mean_loss": round(float(np.mean(self.losses)), 4) if self.losses else None}


def poisson_batches(n: int, sampling_rate: float, steps: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``steps`` Poisson samples of ``range(n)`` (each index kept with probability q, independently)."""
    return [np.flatnonzero(rng.random(n) < sampling_rate) for _ in range(steps)]


def dpsgd_steps(model: Any, optimizer: Any, *, n_records: int, loss_of: Callable[[np.ndarray], Any], steps: int,
                sampling_rate: float, noise_std: float, sensitivity: float, rng: np.random.Generator,
                physical_batch_size: int = 16, noise_source: NoiseSource = "csprng",
                on_step: Callable[[int, StepStats], None] | None = None,
                workers: Any = None) -> tuple[StepStats, DpEvent]:
    """Run ``steps`` DP-SGD steps (module docstring) on ``model`` (a ``GradSampleModule``) with ``optimizer`` (from
    :func:`make_private`); ``loss_of(indices)`` is the mean loss of those records (a scalar tensor computed
    through ``model``). ``rng`` is the release's privacy randomness (Poisson samples and noise). Returns the
    private statistics and the event spent. ``workers`` (a started
    :class:`~privtext.mechanisms.dpsgd_workers.GradientWorkers`) computes the clipped sum over several devices;
    the sampling, the noise and the step stay here."""
    if not 0 < sampling_rate <= 1:
        raise ConfigError(f"sampling rate must be in (0, 1], got {sampling_rate!r}")
    if physical_batch_size < 1:
        raise ConfigError(f"physical_batch_size must be >= 1, got {physical_batch_size!r}")
    if abs(optimizer.max_grad_norm - sensitivity) > 1e-12 * max(1.0, sensitivity):
        raise PrivacyError(f"the optimiser clips at {optimizer.max_grad_norm:g} but the release's sensitivity is "
                           f"{sensitivity:g}: the noise would not match the ledger")
    optimizer.set_noise(noise_std, rng, noise_source)
    stats = StepStats()
    t0 = time.perf_counter()
    model.train()
    for t, idx in enumerate(poisson_batches(n_records, sampling_rate, steps, rng)):
        loss = _one_step(model, optimizer, idx, loss_of, physical_batch_size, workers)
        if loss is not None and not math.isfinite(loss):
            raise BackendError(f"DP-SGD diverged: the loss is {loss} at step {t + 1} of {steps} of this release, so "
                               "the weights are no longer finite; lower the learning rate (dpft.lr). The releases "
                               "already recorded in the ledger stay spent.")
        stats.steps += 1
        stats.records += len(idx)
        stats.empty_batches += int(len(idx) == 0)
        if loss is not None:
            stats.losses.append(loss)
        if on_step is not None:
            on_step(t, stats)
    stats.seconds = time.perf_counter() - t0
    if not all(bool(p.isfinite().all()) for p in optimizer.params):
        raise BackendError(f"DP-SGD diverged: the weights are no longer finite after {steps} steps of this release; "
                           "lower the learning rate (dpft.lr). The releases already recorded in the ledger stay "
                           "spent.")
    return stats, dpsgd_event(noise_std / sensitivity, sampling_rate, steps)


def _one_step(model: Any, optimizer: Any, idx: np.ndarray, loss_of: Callable[[np.ndarray], Any],
              physical: int, workers: Any = None) -> float | None:
    optimizer.zero_grad(set_to_none=True)
    params = optimizer.params
    local = idx if workers is None else workers.scatter(idx, params)
    total = accumulate(optimizer, local, loss_of, physical)
    if workers is not None:  # Σ over the ranks' shares, before the noise (mechanisms.dpsgd_workers)
        total = workers.gather(params, total)
    optimizer.add_noise()
    for p in params:  # the public normaliser B (Opacus' scale_grad, without its accumulation bookkeeping)
        p.grad /= optimizer.expected_batch_size
    optimizer.original_optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total / len(idx) if len(idx) else None


def accumulate(optimizer: Any, idx: np.ndarray, loss_of: Callable[[np.ndarray], Any], physical: int) -> float:
    """Σ over ``idx``'s records of their gradients clipped to C, into each trainable ``p.summed_grad`` (zeros for
    an empty share), in physical chunks; returns the records' total loss. Opacus computes the per-record
    gradients (``GradSampleModule`` hooks) and clips them (``clip_and_accumulate``)."""
    import torch

    params = optimizer.params
    total = 0.0
    if len(idx) == 0:
        for p in params:
            p.summed_grad = torch.zeros_like(p)
    for s in range(0, len(idx), physical):
        chunk = idx[s:s + physical]
        loss = loss_of(chunk)
        with warnings.catch_warnings():  # Opacus' hooks on a model whose inputs (token ids) need no gradient
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            loss.backward()
        optimizer.clip_and_accumulate()  # per-record clipping (Opacus); adds into p.summed_grad
        for p in params:
            p.grad_sample = None
        total += float(loss.detach()) * len(chunk)
    return total


def state_arrays(params: Sequence[tuple[str, Any]], optimizer: Any) -> dict[str, np.ndarray]:
    """The trainable parameters (``model/<name>``) and the wrapped optimiser's state (``optim/<i>/<key>``) as
    numpy arrays — what a DP-SGD release keeps, so a resumed run continues from it (no pickle)."""
    out = {f"model/{n}": p.detach().to("cpu").numpy().copy() for n, p in params}
    inner = getattr(optimizer, "original_optimizer", optimizer)
    for i, st in inner.state_dict()["state"].items():
        for k, v in st.items():
            out[f"optim/{i}/{k}"] = (v.detach().to("cpu").numpy().copy() if hasattr(v, "detach")
                                     else np.asarray(v))
    return out


def load_state_arrays(arrays: dict[str, np.ndarray], params: Sequence[tuple[str, Any]], optimizer: Any) -> None:
    """Inverse of :func:`state_arrays`: copy the kept parameters and optimiser state back."""
    import torch

    names = {n for n, _ in params}
    kept = {k.removeprefix("model/") for k in arrays if k.startswith("model/")}
    if kept != names:
        raise PrivacyError(f"the kept DP-SGD state holds other parameters than the model: "
                           f"{sorted(kept ^ names)[:5]}")
    with torch.no_grad():
        for n, p in params:
            p.copy_(torch.as_tensor(arrays[f"model/{n}"], device=p.device, dtype=p.dtype))
    inner = getattr(optimizer, "original_optimizer", optimizer)
    sd = inner.state_dict()
    state: dict[int, dict[str, Any]] = {}
    for k, v in arrays.items():
        if not k.startswith("optim/"):
            continue
        _, i, key = k.split("/", 2)
        state.setdefault(int(i), {})[key] = torch.as_tensor(v)
    sd["state"] = state
    inner.load_state_dict(sd)


__all__ = ["NoiseSource", "StepStats", "accumulate", "dpsgd_contribution", "dpsgd_steps", "load_state_arrays",
           "make_private", "poisson_batches", "state_arrays", "unwrap"]
