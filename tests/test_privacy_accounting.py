"""Accounting on dp_accounting PLDs: known values, the blow-up direction, closed form vs PLD vs Monte Carlo,
events and their JSON form."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import integrate
from scipy.stats import norm

from privtext.errors import PrivacyError
from privtext.privacy import (
    blowup_lower_bound,
    blowup_of,
    epsilon_for_delta,
    event_from_dict,
    event_to_dict,
    flatten,
    gdp_epsilon,
    gdp_mu_of,
    mixture_event,
    mixture_pld,
    r_from_mu_p,
)
from privtext.privacy.accounting import (
    FastMixtureGaussianPrivacyLoss,
    FastSampledGaussianPrivacyLoss,
    blowup_argmin,
    blowup_from_pld,
    pld_remove_arrays,
)
from privtext.privacy.events import MixtureOfGaussiansDpEvent

G = dp_accounting.GaussianDpEvent
SC = dp_accounting.SelfComposedDpEvent

# ------------------------------------------------------------------------------------------------ (ε, δ)


def test_known_value_sigma1_T10() -> None:
    assert epsilon_for_delta(SC(G(1.0), 10), 1e-5) == pytest.approx(17.857, abs=5e-4)


def test_separate_gaussian_releases_equal_self_composed() -> None:
    # exact merge: T separate Gaussian events have the PLD of one Gaussian with z/√T
    sep = [G(1.3)] * 7
    assert epsilon_for_delta(sep, 1e-6) == epsilon_for_delta(SC(G(1.3), 7), 1e-6)
    assert flatten(sep).gaussian_z == pytest.approx(1.3 / math.sqrt(7), rel=1e-14)


@pytest.mark.parametrize("z", [0.5, 1.0, 4.0])
def test_pld_is_pessimistic_and_tight_for_gaussians(z: float) -> None:
    exact = gdp_epsilon(1e-5, 1 / z)
    pld = epsilon_for_delta(G(z), 1e-5)
    assert exact <= pld <= exact + 1e-5


def test_gdp_mu_of_composition_and_refusal() -> None:
    ev = dp_accounting.ComposedDpEvent([G(2.0), SC(G(1.0), 3)])
    assert gdp_mu_of(ev) == pytest.approx(math.sqrt(0.25 + 3), rel=1e-14)
    with pytest.raises(PrivacyError, match="Gaussian releases"):
        gdp_mu_of([G(1.0), dp_accounting.LaplaceDpEvent(1.0)])


def test_non_private_event_is_infinite() -> None:
    assert epsilon_for_delta([G(1.0), G(0.0)], 1e-5) == math.inf
    assert blowup_of([G(0.0)], 1e-4) == 1.0


def test_unsupported_event_is_refused() -> None:
    with pytest.raises(PrivacyError, match="cannot account"):
        epsilon_for_delta(dp_accounting.ZCDpEvent(rho=1.0), 1e-5)


# ------------------------------------------------------------------------------------ mixture PLD (fast)


def test_fast_inverse_honours_the_library_contract() -> None:
    # "the smallest multiple of precision, x, such that the privacy loss at x is at most l"
    for adj, eps in [(plm.AdjacencyType.REMOVE, np.linspace(-0.2, 0.5, 40)),
                     (plm.AdjacencyType.ADD, np.linspace(-0.5, 0.2, 40))]:
        ref = plm.MixtureGaussianPrivacyLoss(2.0, [0, 1, 2], [0.81, 0.18, 0.01], adjacency_type=adj)
        fast = FastMixtureGaussianPrivacyLoss(2.0, [0, 1, 2], [0.81, 0.18, 0.01], adjacency_type=adj)
        xs = fast.inverse_privacy_losses(eps)
        for x, e in zip(xs, eps, strict=True):
            assert fast.privacy_loss(x) <= e < fast.privacy_loss(x - 1e-6)
        np.testing.assert_allclose(xs, ref.inverse_privacy_losses(eps), atol=1.01e-6)


def test_mixture_pld_matches_library_deltas() -> None:
    sens, probs = [0.0, 1.0, 2.0], [0.81, 0.18, 0.01]
    ours = mixture_pld(2.0, sens, probs)
    for adj, side in [(plm.AdjacencyType.REMOVE, ours._pmf_remove), (plm.AdjacencyType.ADD, ours._pmf_add)]:
        ref = plm.MixtureGaussianPrivacyLoss(2.0, sens, probs, adjacency_type=adj)
        for e in (0.0, 0.3, 1.0):
            true = float(ref.get_delta_for_epsilon([e])[0])  # (the scalar path fails on numpy 2)
            got = side.get_delta_for_epsilon(e)
            assert true - 1e-12 <= got <= true * (1 + 1e-4) + 1e-12  # pessimistic, tight


# ---------------------------------------------------------------------------- subsampled Gaussian PLD (fast)


@pytest.mark.parametrize(("sigma", "q"), [(1.0, 0.01), (0.5, 1e-4), (5.0, 0.25), (0.8, 0.5), (2.0, 1.0)])
def test_fast_sampled_gaussian_equals_the_library(sigma: float, q: float) -> None:
    """The vectorised inverse and δ(ε) are dp_accounting's scalar ones (to round-off), across and beyond the
    loss's range (below log(1 − q) on REMOVE, above −log(1 − q) on ADD)."""
    for adj in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD):
        ref = plm.GaussianPrivacyLoss(sigma, sampling_prob=q, adjacency_type=adj)
        fast = FastSampledGaussianPrivacyLoss(sigma, sampling_prob=q, adjacency_type=adj)
        b = ref.connect_dots_bounds()
        eps = np.linspace(b.epsilon_lower - 0.1, b.epsilon_upper + 0.1, 2001)
        np.testing.assert_allclose(fast.get_delta_for_epsilon(eps), ref.get_delta_for_epsilon(eps), rtol=0, atol=1e-15)
        asymptote = math.log1p(-q) if q < 1 else -math.inf
        inside = eps[eps > asymptote + 1e-6] if adj == plm.AdjacencyType.REMOVE else eps[eps < -asymptote - 1e-6]
        np.testing.assert_allclose(fast.inverse_privacy_losses(inside[::20]),
                                   [ref.inverse_privacy_loss(e) for e in inside[::20]], rtol=1e-11, atol=1e-11)


def test_subsampled_pld_is_the_librarys_on_an_adaptive_grid() -> None:
    """One DP-SGD step's PLD: at every ε its δ is at least dp_accounting's on the full grid of the same interval
    minus round-off (pessimistic: the adaptive grid only drops points) and within 1e-4 of it, relative."""
    from privtext.privacy.accounting import _subsampled_pld

    for sigma, q, h in [(1.0, 0.01, 1e-3), (0.5, 1e-3, 1e-4), (2.0, 1e-4, 5e-6)]:
        ours = _subsampled_pld(dp_accounting.PoissonSampledDpEvent(q, G(sigma)), 1, h)
        ref = dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism(
            sigma, value_discretization_interval=h, sampling_prob=q)
        for e in (0.0, 0.01, 0.1, 0.5, 1.0):
            got, want = ours.get_delta_for_epsilon(e), ref.get_delta_for_epsilon(e)
            assert want - 1e-12 <= got <= want * (1 + 1e-4) + 1e-12, (sigma, q, e, got, want)


def _hockey_stick(sigma: float, sens: list[float], probs: list[float], eps: float, *, p_wrt_q: bool) -> float:
    """∫ (a − e^ε b)₊ with (a, b) = (mixture, N(0,σ²)) or the reverse, by quadrature."""
    def mix(x: float) -> float:
        return sum(q * norm.pdf(x, s, sigma) for s, q in zip(sens, probs, strict=True))

    def f(x: float) -> float:
        a, b = (mix(x), norm.pdf(x, 0, sigma)) if p_wrt_q else (norm.pdf(x, 0, sigma), mix(x))
        return max(a - math.exp(eps) * b, 0.0)

    val, _ = integrate.quad(f, -12 * sigma, max(sens) + 12 * sigma, limit=400, points=[0.0, max(sens)])
    return val


def test_blowup_direction_is_mixture_wrt_gaussian() -> None:
    # REMOVE side of dp_accounting's mixture PLD is H(P‖Q) with P the mixture (with the secret), Q = N(0, σ²)
    sigma, sens, probs = 0.7, [0.0, 1.0, 2.0], [0.6, 0.3, 0.1]
    pld = mixture_pld(sigma, sens, probs, both_directions=False)
    for eps in (0.5, 2.0):
        want = _hockey_stick(sigma, sens, probs, eps, p_wrt_q=True)
        other = _hockey_stick(sigma, sens, probs, eps, p_wrt_q=False)
        got = float(pld.get_delta_for_epsilon(eps))
        assert got == pytest.approx(want, rel=2e-3, abs=1e-12)
        assert abs(other - want) > 0.1 * want  # the two directions really differ here


def test_pmf_arrays_agree_with_public_api() -> None:
    pld = mixture_pld(1.0, [0.0, 1.0, 3.0], [0.5, 0.4, 0.1], both_directions=False).self_compose(3)
    losses, probs, inf = pld_remove_arrays(pld)
    for eps in (0.0, 0.7, 2.0):
        mine = inf + float(np.sum(probs[losses > eps] * -np.expm1(eps - losses[losses > eps])))
        assert mine == pytest.approx(float(pld.get_delta_for_epsilon(eps)), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize(("sigma", "T"), [(1.0, 1), (2.0, 10), (0.5, 3), (5.0, 20)])
def test_single_record_rho1_equals_gaussian_closed_form(sigma: float, T: int) -> None:
    # mixture with ρ = 1 for one record: N(Δ, σ²)^T vs N(0, σ²)^T — blow-up r_from_mu_p(p, √T·Δ/σ)
    p = 1e-4
    exact = r_from_mu_p(p, math.sqrt(T) / sigma)
    pld = mixture_pld(sigma, [1.0], [1.0], both_directions=False).self_compose(T)
    got = blowup_from_pld(pld, p)
    assert exact * (1 - 1e-12) <= got <= exact * (1 + 1e-4)
    # through the event path the same event is recognised as Gaussian and computed in closed form
    assert blowup_of(SC(mixture_event([1.0], sigma), T), p) == pytest.approx(exact, rel=1e-12)


def _mc_delta(sigma: float, sens: np.ndarray, probs: np.ndarray, T: int, eps: float, n: int,
              rng: np.random.Generator) -> tuple[float, float]:
    """Monte Carlo H_{e^ε}(P^T‖Q^T) = E_P[(1 − e^{ε − L})₊] (L: summed log-likelihood ratio): (mean, sd of Y)."""
    loss = np.zeros(n)
    logp = np.log(probs)
    for _ in range(T):
        k = rng.choice(len(sens), size=n, p=probs)
        x = sens[k] + sigma * rng.standard_normal(n)
        a = logp[None, :] + (np.multiply.outer(x, sens) - sens[None, :] ** 2 / 2) / sigma**2
        amax = a.max(axis=1)
        loss += amax + np.log(np.exp(a - amax[:, None]).sum(axis=1))
    y = np.clip(-np.expm1(eps - loss), 0.0, None)
    return float(y.mean()), float(y.std())


def test_blowup_closed_form_pld_and_monte_carlo_agree(rng: np.random.Generator) -> None:
    """Mixture blow-up: PLD value vs a Monte Carlo estimate at the PLD's minimising ε.

    B(p) = e^ε* p + δ(ε*). δ̂ is a mean of n i.i.d. values Y ∈ [0, 1]: |δ̂ − δ| ≤ 6·sd(Y)/√n fails with
    probability ~1e-9 (CLT at 6 sd; sd(Y) ≤ √δ in any case). The PLD is pessimistic and within ~1e-3 of δ."""
    p, sigma, T, n = 1e-3, 1.2, 3, 200_000
    sens = np.array([0.0, 1.0, 2.0])
    probs = np.array([0.49, 0.42, 0.09])  # Poisson-binomial of two records with ρ = 0.3
    pld = mixture_pld(sigma, list(sens), list(probs), both_directions=False).self_compose(T)
    b_pld, eps_star = blowup_argmin(pld, p)
    d_pld = float(pld.get_delta_for_epsilon(eps_star))
    assert b_pld == pytest.approx(math.exp(eps_star) * p + d_pld, rel=1e-9)
    d_mc, sd = _mc_delta(sigma, sens, probs, T, eps_star, n, rng)
    tol = 6 * sd / math.sqrt(n)
    assert tol < 0.1 * d_pld  # the check has teeth: ≤ 10 % of δ, ≤ 4 % of B
    assert d_pld * (1 - 1e-3) - tol <= d_mc <= d_pld + tol
    # the cheap lower bound is below the PLD value
    lb = blowup_lower_bound(SC(MixtureOfGaussiansDpEvent(sigma, list(sens), list(probs)), T), p)
    assert lb is not None and lb <= b_pld


def test_paper_single_gaussian_is_not_an_upper_bound() -> None:
    """Counterexample (docs/privacy.md): one record, ρ = ½, Δ/σ = 4, p = 1e-4, one release.

    The paper's single Gaussian N(E[S]Δ, σ²) = N(2σ, σ²) gives B = 1 − Φ(Φ⁻¹(1−p) − 2) ≈ 0.043, but the true
    mixture ½N(0,σ²) + ½N(4σ, σ²) has B ≥ ½·B_{N(4σ)}(p) ≈ 0.30 (the test that rejects on N(4σ)'s tail)."""
    p = 1e-4
    paper = r_from_mu_p(p, 2.0)
    exact = blowup_of(MixtureOfGaussiansDpEvent(1.0, [0.0, 4.0], [0.5, 0.5]), p)
    lower = 0.5 * r_from_mu_p(p, 4.0) + 0.5 * p  # any test of level p has power ≥ this under the mixture
    assert paper == pytest.approx(0.0428, abs=5e-4)
    assert exact >= lower > 0.3 > 5 * paper


def test_blowup_monotone_in_sigma_and_compositions() -> None:
    ev = lambda s: MixtureOfGaussiansDpEvent(s, [0.0, 1.0, 2.0], [0.5, 0.4, 0.1])  # noqa: E731
    b = [blowup_of(SC(ev(s), 4), 1e-4) for s in (1.0, 2.0, 4.0)]
    assert b[0] > b[1] > b[2] > 1e-4
    assert blowup_of(SC(ev(2.0), 8), 1e-4) > blowup_of(SC(ev(2.0), 4), 1e-4)


# ---------------------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("ev", [
    dp_accounting.GaussianDpEvent(1.5),
    dp_accounting.LaplaceDpEvent(0.5),
    MixtureOfGaussiansDpEvent(2.0, [0.0, 1.0], [0.9, 0.1]),
    SC(dp_accounting.GaussianDpEvent(1.0), 5),
    dp_accounting.ComposedDpEvent([G(1.0), SC(dp_accounting.LaplaceDpEvent(2.0), 3),
                                   MixtureOfGaussiansDpEvent(1.0, [0.0, 1.0, 2.0], [0.25, 0.5, 0.25])]),
    dp_accounting.PoissonSampledDpEvent(0.01, G(1.0)),
    dp_accounting.NoOpDpEvent(),
])
def test_event_json_round_trip(ev: dp_accounting.DpEvent) -> None:
    import json

    d = json.loads(json.dumps(event_to_dict(ev)))
    back = event_from_dict(d)
    assert event_to_dict(back) == event_to_dict(ev)
    assert type(back) is type(ev)


def test_event_json_refuses_unknown_types_and_fields() -> None:
    with pytest.raises(PrivacyError, match="unknown event type"):
        event_from_dict({"type": "os.system", "noise_multiplier": 1})
    with pytest.raises(PrivacyError, match="unknown field"):
        event_from_dict({"type": "GaussianDpEvent", "noise_multiplier": 1, "extra": 2})


# ------------------------------------------------------------------------------------- near-zero noise (memory)


def test_near_zero_noise_coarsens_the_pld_and_stays_an_upper_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """σ = 0.05 per step: the coarsened interval's ε is at least the fine one's (pessimistic estimate) and agrees
    to 1e-4; realistic releases keep the requested interval."""
    from privtext.privacy import accounting as acc
    from privtext.privacy.events import dpsgd_event

    ev = dpsgd_event(0.05, 0.5, 40)
    coarse_h = acc.pld_interval(acc.flatten(ev))
    assert coarse_h > acc.DEFAULT_DISCRETIZATION
    coarse = acc.epsilon_for_delta(ev, 1e-5)
    monkeypatch.setattr(acc, "MAX_PLD_POINTS", 10**12)
    monkeypatch.setattr(acc, "FAST_PLD_POINTS", 10**12)
    assert acc.pld_interval(acc.flatten(ev)) == acc.DEFAULT_DISCRETIZATION
    fine = acc.epsilon_for_delta(ev, 1e-5)
    assert fine <= coarse <= fine * (1 + 1e-4)
    monkeypatch.undo()
    for realistic in (dpsgd_event(0.5, 0.5, 40), dpsgd_event(0.9, 0.064, 48), dpsgd_event(1.0, 0.25, 20)):
        assert acc.pld_interval(acc.flatten(realistic)) == acc.DEFAULT_DISCRETIZATION


def test_epsilon_of_near_zero_noise_fits_in_memory(tmp_path) -> None:
    """``privacy: {noise_multiplier: 0.001}`` on dpft was killed for memory computing its ε (10⁹ PLD points):
    under a 4 GiB address-space limit it now returns a finite, huge ε."""
    import os
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS bounds the address space on Linux only")
    # one BLAS thread: on a many-core machine each thread's buffers take address space of their own
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
            "from privtext.privacy.accounting import epsilon_for_delta; "
            "from privtext.privacy.events import dpsgd_event, gaussian_event; "
            "print(epsilon_for_delta(dpsgd_event(0.001, 0.5, 40), 1e-5), epsilon_for_delta(gaussian_event(0.001), 1e-5))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    a, b = map(float, out.stdout.split())
    assert 1e6 < a < math.inf and 1e5 < b < math.inf
