"""A one-run audit of DP-SGD (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run", §6
white-box setting with Dirac gradient canaries), through the library's own DP-SGD step.

dpft's releases are DP-SGD epochs; attacking them like the other mechanisms (thousands of trials of one release)
would mean training thousands of models. A one-run audit needs one training run: m canaries, each included in the
training data independently with probability ½ (from OS entropy), one run, and a guess per canary from the final
parameters; :mod:`privtext.audit.onerun` turns the correct guesses into an ε lower bound (their Thm 5.2, with δ).

The training run here is DP-SGD exactly as dpft runs it — :func:`privtext.mechanisms.dpsgd.make_private` (Opacus'
per-sample gradients and per-record clipping, privtext's ``NoisyDPOptimizer``), :func:`~privtext.mechanisms.dpsgd.
dpsgd_steps` (privtext's Poisson sampling from the release's noise stream, the noise through
:mod:`privtext.privacy.noise`, the configured ``noise_source``) — one call per epoch at the run's sampling rate q,
steps per epoch, clipping norm C and the noise multiplier σ the audit derives from the configuration and the
budget (:mod:`privtext.audit.calibrate`). Only the model is the audit's: the **canary model** has one parameter per
canary, θ ∈ ℝ^m (an ``nn.Embedding(m, 1)``, θ₀ = 0), and canary i's loss is ℓᵢ(θ) = −G·θᵢ with G = 1000·C: its
gradient is −G·eᵢ (a Dirac canary: all its mass on its own coordinate), far above the clipping norm, the worst
case for a DP-SGD record. With plain SGD at learning rate 1 and normaliser 1,

    θ_T,i = C·nᵢ − Σ_t ξ_t,i,     ξ_t,i ~ N(0, (σC)²),

nᵢ the number of steps whose Poisson sample held canary i (0 when it is out). The guesses: "in" for the k
canaries with the largest θ_T,i, abstain on the rest (any rule that looks only at the output is allowed), with
k = ⌊0.9·(1 − e^−qT)·m/2⌋ fixed in advance: 90 % of the included canaries expected in at least one sample.

* With the noise and the clipping as recorded, the run is (ε(δ'), δ')-DP with respect to each canary for every
  δ', and the bound exceeds ε(δ') with probability at most 1 − confidence (the theorem).
* With the noise removed (or scaled down), θ_T,i > 0 exactly for the included canaries that were sampled, so every
  guess is right; with the clipping removed the included canaries move by G·nᵢ = 1000·C·nᵢ against noise σC√T.
  Either way the k guesses are all correct and the bound exceeds the claim when m is large enough.

The claim is the ε of the DP-SGD releases alone (dp_accounting's PLD of SelfComposed(PoissonSampled(q,
Gaussian(σ)), epochs·steps)), the tighter of the run's numbers, at a δ' the plan picks (:func:`plan_canaries`).
Why not the run's δ: the theorem's δ term, 2mδ·max_i Pr[v − i ≤ Bin(r, q) < v]/i, is about 2mδ·e^ε/r for
all-correct guesses, so at δ = 1e-5 and confidence 0.999 no number of canaries certifies more than ε ≈ 3
(ln(α·r/(2mδ))). The accountant's curve claims (ε(δ'), δ') for every δ' at once; the plan fixes, before the run
and from public numbers only, the δ' ≤ δ and the fewest canaries m for which all-correct guesses would exceed
(1 + :data:`MARGIN`)·ε(δ'); the audit then compares its bound with ε(δ').
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .mechanisms import AuditResult, _noise
from .onerun import epsilon_lower_bound

#: the canary gradient's norm in units of the clipping norm C
CANARY_NORM = 1000.0
#: the planned canaries suffice for all-correct guesses to exceed (1 + MARGIN)·claim
MARGIN = 0.25
#: the most canaries planned (the canary model has one parameter per canary; per-sample gradients are dense)
MAX_CANARIES = 40_000


def dpsgd_curve(sigma: float, sampling_rate: float, steps: int) -> Callable[[float], float]:
    """δ' ↦ ε(δ') of ``steps`` Poisson-subsampled Gaussian steps on dp_accounting's PLD (∞ without noise)."""
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    from .calibrate import PLD_INTERVAL

    if not sigma > 0:
        return lambda d: math.inf
    acc = PLDAccountant(value_discretization_interval=PLD_INTERVAL)
    acc.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(sampling_rate, dp_accounting.GaussianDpEvent(sigma)), steps))
    return lambda d: float(acc.get_epsilon(d))


def guesses(m: int, expected_samples: float) -> int:
    """k: "in" guesses for the top scores, 90 % of the included canaries expected in some sample (≥ 1)."""
    return max(1, int(0.9 * (1 - math.exp(-expected_samples)) * m / 2))


def _best_bound(m: int, k: int, delta: float, confidence: float) -> float:
    return epsilon_lower_bound(m, k, k, delta=delta, confidence=confidence, tol=1e-3)


def plan_canaries(curve: Callable[[float], float], delta: float, confidence: float, expected_samples: float,
                  max_canaries: int = MAX_CANARIES) -> tuple[int, float, float]:
    """(m, δ', ε(δ')): over δ' ∈ {δ, δ/10, …, δ/10⁸}, the fewest canaries m ≤ ``max_canaries`` whose all-correct
    guesses would give a bound above (1 + :data:`MARGIN`)·ε(δ') at ``confidence``; the δ' needing the fewest
    (module docstring). Where none suffices: ``max_canaries`` at the δ' whose best bound comes closest."""
    best: tuple[float, int, float, float] | None = None  # (shortfall or -1/m, m, δ', claim)
    for j in range(9):
        d = delta / 10 ** j
        claim = curve(d)
        target = (1 + MARGIN) * claim
        if not math.isfinite(target):
            return 256, delta, math.inf
        if _best_bound(max_canaries, guesses(max_canaries, expected_samples), d, confidence) <= target:
            gap = target - _best_bound(max_canaries, guesses(max_canaries, expected_samples), d, confidence)
            cand = (gap, max_canaries, d, claim)
            if best is None or (best[0] > 0 and gap < best[0]):
                best = cand
            continue
        lo, hi = 8, 16
        while hi < max_canaries and _best_bound(hi, guesses(hi, expected_samples), d, confidence) <= target:
            lo, hi = hi, min(hi * 2, max_canaries)
        while hi - lo > max(1, lo // 32):
            mid = (lo + hi) // 2
            if _best_bound(mid, guesses(mid, expected_samples), d, confidence) > target:
                hi = mid
            else:
                lo = mid
        if best is None or best[0] > 0 or hi < best[1]:
            best = (-1.0 / hi, hi, d, claim)
    assert best is not None
    return best[1], best[2], best[3]


def canary_run(inclusion: np.ndarray, *, sigma: float, sampling_rate: float, steps_per_epoch: int, epochs: int,
               max_grad_norm: float, noise_rng: np.random.Generator, noise_source: str = "csprng") -> np.ndarray:
    """θ_T of the canary model (module docstring) trained with the library's DP-SGD on the included canaries;
    ``inclusion[i]`` says whether canary i is in the data."""
    import torch

    from ..mechanisms.dpsgd import dpsgd_steps, make_private, unwrap

    m = len(inclusion)
    idx = np.flatnonzero(inclusion)
    C = float(max_grad_norm)
    G = CANARY_NORM * C
    with torch.random.fork_rng(devices=[]):
        model = torch.nn.Embedding(m, 1).to(torch.float64)
    with torch.no_grad():
        model.weight.zero_()
    gs, opt = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0), max_grad_norm=C, normaliser=1)
    ids = torch.as_tensor(idx, dtype=torch.long)

    def loss_of(rows: np.ndarray) -> Any:  # the mean of the records' losses −G·θ_i (Opacus' loss_reduction mean)
        return -(G * gs(ids[torch.as_tensor(rows, dtype=torch.long)]).squeeze(-1)).mean()

    try:
        for _ in range(epochs):  # one dpsgd_steps call per epoch, as dpft makes one release per epoch
            dpsgd_steps(gs, opt, n_records=len(idx), loss_of=loss_of, steps=steps_per_epoch,
                        sampling_rate=sampling_rate, noise_std=sigma * C, sensitivity=C,
                        rng=noise_rng, physical_batch_size=max(64, min(len(idx), 1024)),
                        noise_source=noise_source)  # type: ignore[arg-type]
    finally:
        unwrap(gs)
    return model.weight.detach().to(torch.float64).numpy()[:, 0].copy()


def audit_dpsgd_run(*, sigma: float, sampling_rate: float, steps_per_epoch: int, epochs: int,
                    max_grad_norm: float, delta: float, canaries: int | None = None, alpha: float = 1e-3,
                    rng: np.random.Generator | None = None, noise_source: str = "csprng",
                    keys: Sequence[str] = ()) -> AuditResult:
    """The one-run audit (module docstring): passes when the ε lower bound at confidence 1 − ``alpha`` does not
    exceed the claimed ε(δ') of the DP-SGD steps. ``canaries`` caps the planned canary count (default
    :data:`MAX_CANARIES`). ``rng`` makes the canary bits and the noise reproducible (tests); by default both come
    from OS entropy, as in a run."""
    if epochs < 1 or steps_per_epoch < 1:
        raise ConfigError(f"nothing to audit: {epochs} epochs of {steps_per_epoch} steps")
    if not 0 < sampling_rate <= 1:
        raise ConfigError(f"sampling rate must be in (0, 1], got {sampling_rate!r}")
    steps = steps_per_epoch * epochs
    confidence = 1 - alpha
    curve = dpsgd_curve(sigma, sampling_rate, steps)
    expected = sampling_rate * steps
    m, d_audit, claim = plan_canaries(curve, delta, confidence, expected,
                                      max_canaries=int(canaries) if canaries is not None else MAX_CANARIES)
    if m < 8:
        raise ConfigError(f"the DP-SGD audit needs at least 8 canaries, got {m}")
    if rng is None:
        bits = np.frombuffer(secrets.token_bytes(m), dtype=np.uint8) & 1
    else:
        bits = rng.integers(0, 2, size=m)
    inclusion = bits.astype(bool)
    theta = canary_run(inclusion, sigma=sigma, sampling_rate=sampling_rate, steps_per_epoch=steps_per_epoch,
                       epochs=epochs, max_grad_norm=max_grad_norm, noise_rng=_noise(rng), noise_source=noise_source)
    k = guesses(m, expected)
    top = np.argsort(-theta, kind="stable")[:k]  # "in" for the k largest scores; abstain on the rest
    correct = int(inclusion[top].sum())
    bound = epsilon_lower_bound(m, k, correct, delta=d_audit, confidence=confidence, tol=1e-4)
    ceiling = epsilon_lower_bound(m, k, k, delta=d_audit, confidence=confidence, tol=1e-4)
    shown = "" if not keys else (f" [{keys[0]}]" if len(keys) == 1 else f" [{keys[0]} … {keys[-1]} ({len(keys)})]")
    return AuditResult(
        mechanism=f"dpsgd_one_run{shown}", quantity=f"epsilon at delta {d_audit:.0e}", claim=claim, estimate=bound,
        interval=(bound, math.inf), trials=m, alpha=alpha,
        details={"sigma": sigma, "sampling_rate": sampling_rate, "steps": steps, "epochs": epochs,
                 "max_grad_norm": max_grad_norm, "delta": delta, "audit_delta": d_audit, "canaries": m, "included": int(inclusion.sum()),
                 "guesses": k, "correct": correct, "best_possible_bound": ceiling,
                 "canary_gradient_norm": CANARY_NORM * max_grad_norm, "noise_source": noise_source,
                 "informative": bool(ceiling > claim)})


__all__ = ["CANARY_NORM", "MARGIN", "MAX_CANARIES", "audit_dpsgd_run", "canary_run", "dpsgd_curve", "guesses",
           "plan_canaries"]
