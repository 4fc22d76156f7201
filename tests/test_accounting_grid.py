"""Issue 36: ε of long Poisson-subsampled Gaussian compositions (DP-SGD) is tight and stays an upper bound.

Over σ ∈ [0.5, 5], q ∈ [1e-4, 0.25], T ∈ [10, 10⁵], privtext's ε must be within 0.5 % of dp_accounting's PLD at fine
discretisation, and never below it beyond numerical noise. The reference is computed here, every time:
``from_gaussian_mechanism(σ, sampling_prob=q)`` self-composed T times, on 1e-4 (the issue's reference) or on a
quarter of privtext's own interval where that is finer (at q = 1e-4 the 1e-4 grid overstates ε by up to 80 %:
each step's loss has a standard deviation of q·√(e^{1/σ²} − 1) ≈ 2e-5 nats at σ = 5) or where privtext went
coarser than 1e-3 (ε in the hundreds or more). Opacus' PRV accountant checks validity independently: its
certified lower bound on the true ε.

The default suite runs points whose reference takes seconds; ``-m slow`` runs the 4 × 4 × 4 grid. Timings are
printed by benchmarks/accounting.py, not asserted here.
"""

from __future__ import annotations

import math

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from privtext.privacy import accounting as acc
from privtext.privacy.events import dpsgd_event

DELTA = 1e-5
#: ε may exceed the reference by this fraction (issue 36's acceptance)
TIGHT = 5e-3
#: … and fall below it by this much at most (FFT and δ-difference round-off; a valid estimate never goes lower)
NOISE = 1e-4


def _reference(sigma: float, q: float, steps: int, h: float) -> float:
    p = pld.from_gaussian_mechanism(sigma, value_discretization_interval=h, sampling_prob=q)
    return float(p.self_compose(steps).get_epsilon_for_delta(DELTA))


def _reference_interval(h: float) -> float:
    """1e-4, or a quarter of privtext's interval where that is finer; a quarter of it where privtext coarsened
    beyond 1e-3 (ε in the hundreds or more, :data:`~privtext.privacy.accounting.FAST_PLD_POINTS`)."""
    return h / 4 if h > acc.DEFAULT_DISCRETIZATION else min(1e-4, h / 4)


def _check(sigma: float, q: float, steps: int) -> tuple[float, float]:
    ev = dpsgd_event(sigma, q, steps)
    eps = acc.epsilon_for_delta(ev, DELTA)
    h = acc.pld_interval(acc.flatten(ev))
    ref = _reference(sigma, q, steps, _reference_interval(h))
    assert eps <= ref * (1 + TIGHT), (sigma, q, steps, eps, ref, h)
    assert eps >= ref * (1 - NOISE), (sigma, q, steps, eps, ref, h)
    return eps, ref


# a handful spanning the range: the issue's three points, T = 10⁵ at the smallest q and σ, the widest steps
POINTS = [
    (1.0, 0.01, 5000),  # the issue: 5.33 before, 4.20 reference
    (0.8, 0.01, 5000),  # the issue: 8.10 before, 6.84
    (2.0, 0.004, 10000),  # the issue: 2.55 before, 0.786
    (0.5, 1e-3, 100_000),
    (5.0, 1e-4, 100_000),  # ε ≈ 0.0165: steps of 2e-5 nats
    (2.0, 1e-4, 100_000),
    (5.0, 0.01, 100_000),
    (1.0, 0.25, 100),
    (1.4, 0.01, 10),  # few steps: ε rests on the sampled record's tail, which must stay on the fine grid
    (1.0, 1e-3, 100),
]


@pytest.mark.parametrize(("sigma", "q", "steps"), POINTS)
def test_long_subsampled_compositions_are_tight(sigma: float, q: float, steps: int) -> None:
    _check(sigma, q, steps)


def test_the_issues_points_against_their_published_references() -> None:
    """The issue's table: dp_accounting and Opacus PRV give 4.20, 6.84 and 0.786 where privtext said 5.33, 8.10,
    2.55."""
    for (sigma, q, steps), want in zip(POINTS[:3], (4.20, 6.84, 0.786), strict=True):
        eps = acc.epsilon_for_delta(dpsgd_event(sigma, q, steps), DELTA)
        assert eps == pytest.approx(want, rel=TIGHT), (sigma, q, steps, eps)


@pytest.mark.parametrize(("sigma", "q", "steps"),
                         [(2.0, 0.004, 10000), (1.0, 1e-3, 10000), (5.0, 1e-3, 100_000), (1.0, 1e-4, 100_000)])
def test_epsilon_lies_between_opacus_prv_bounds(sigma: float, q: float, steps: int) -> None:
    """Validity without trusting dp_accounting: Opacus' PRV accountant (Gopi et al. 2021, another discretisation
    and another FFT composition) certifies a lower and an upper bound on the true ε, 0.01 either side of its
    estimate. privtext's ε is at least the lower one, and within 0.5 % of the estimate."""
    pytest.importorskip("opacus")
    import warnings

    from opacus.accountants import PRVAccountant

    a = PRVAccountant()
    a.history = [(sigma, q, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, est, _ = a._get_dprv(eps_error=0.01, delta_error=DELTA / 1000).compute_epsilon(DELTA, DELTA / 1000, 0.01)
    eps = acc.epsilon_for_delta(dpsgd_event(sigma, q, steps), DELTA)
    assert low <= eps <= est * (1 + TIGHT), (eps, low, est)


def test_the_interval_follows_the_width_of_one_step() -> None:
    """The interval is finer than 1e-3 exactly where a step's loss is narrow, and ~0.09 of its standard
    deviation √(V/C) there (q·√(e^{1/σ²} − 1) nats per step for small q)."""
    assert acc.pld_interval(acc.flatten(dpsgd_event(1.0, 0.25, 100))) == acc.DEFAULT_DISCRETIZATION
    for sigma, q in [(2.0, 0.004), (5.0, 1e-4), (1.0, 1e-3)]:
        h = acc.pld_interval(acc.flatten(dpsgd_event(sigma, q, 10_000)))
        sd = q * math.sqrt(math.expm1(1 / sigma**2))
        assert 0.06 * sd <= h <= 0.12 * sd, (sigma, q, h, sd)


def test_a_composition_with_a_gaussian_release_is_tight() -> None:
    """dpft's event: a Gaussian label histogram composed with DP-SGD; the reference composes the same two PLDs
    on the fine grid."""
    from privtext.privacy.events import ComposedDpEvent, gaussian_event

    sigma, q, steps, z = 1.0, 1e-3, 50_000, 8.0
    ev = ComposedDpEvent([gaussian_event(z), dpsgd_event(sigma, q, steps)])
    eps = acc.epsilon_for_delta(ev, DELTA)
    h = _reference_interval(acc.pld_interval(acc.flatten(ev)))
    ref_pld = pld.from_gaussian_mechanism(sigma, value_discretization_interval=h, sampling_prob=q).self_compose(steps)
    ref = float(ref_pld.compose(pld.from_gaussian_mechanism(z, value_discretization_interval=h))
                .get_epsilon_for_delta(DELTA))
    assert ref * (1 - NOISE) <= eps <= ref * (1 + TIGHT), (eps, ref)


GRID = [(s, q, t) for s in (0.5, 1.0, 2.0, 5.0) for q in (1e-4, 1e-3, 1e-2, 0.25) for t in (10, 100, 10_000, 100_000)]


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "q", "steps"), GRID)
def test_the_grid(sigma: float, q: float, steps: int) -> None:
    _check(sigma, q, steps)


# ---------------------------------------------------------------------------------------------- dpft's σ


@pytest.mark.parametrize("options", [{"sampling_rate": 64 / 100_000, "batch_size": 64}, {}],
                         ids=["N=100k,B=64", "dpft-default"])
def test_dpft_sigma_matches_opacus_prv(options: dict) -> None:
    """dpft at N = 100k (q = B/N with dpft's default B = 64, 3 epochs of round(1/q) steps: 4686), and dpft's
    default configuration: the σ dpft_plan calibrates for (ε = 4, δ = 1e-5) is within 0.5 % of Opacus'
    ``get_noise_multiplier`` with the PRV accountant for the same (ε, δ, q, T). (Before issue 36 it was 2 %
    above at N = 100k.)"""
    pytest.importorskip("opacus")
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    from privtext.config import config_from_dict
    from privtext.methods.dpft import DPFTOptions, dpft_plan

    cfg = config_from_dict({"method": "dpft", "data": {"private": "private.csv"},
                            "privacy": {"epsilon": 4.0, "delta": DELTA}, "output": "out"})
    plan = dpft_plan(cfg, DPFTOptions(**options))
    assert plan.label_sigma is None  # no label columns: DP-SGD alone, as Opacus accounts for it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = get_noise_multiplier(target_epsilon=4.0, target_delta=DELTA, sample_rate=plan.sampling_rate,
                                    steps=plan.steps, accountant="prv")
    assert plan.noise_multiplier == pytest.approx(want, rel=5e-3)
    assert acc.epsilon_for_delta(dpsgd_event(plan.noise_multiplier, plan.sampling_rate, plan.steps), DELTA) <= 4.0
