"""privacy/events.py's factories — the one place privtext builds an event: each builds exactly the dp_accounting
event it names (so moving a hand-built event onto a factory changes no accounting), checks what it is given, and
the scaling of the federated threat model scales every Gaussian leaf and nothing else."""

from __future__ import annotations

import dp_accounting
import pytest
from dp_accounting import dp_event

from privtext.errors import ConfigError, InvalidPrivacyParameter, PrivacyError
from privtext.privacy import epsilon_for_delta, gdp_mu_of
from privtext.privacy.events import (
    SecretEvent,
    composed,
    dpsgd_event,
    event_from_dict,
    event_to_dict,
    gaussian_event,
    laplace_event,
    mixture_of_gaussians_event,
    no_op_event,
    poisson_sampled,
    scaled_noise,
    secret_event,
    self_composed,
)

G = dp_accounting.GaussianDpEvent
L = dp_accounting.LaplaceDpEvent
SC = dp_accounting.SelfComposedDpEvent
C = dp_accounting.ComposedDpEvent


def test_each_factory_builds_the_event_it_names() -> None:
    assert gaussian_event(1.5) == G(1.5)
    assert gaussian_event(1.5, count=4) == SC(G(1.5), 4)
    assert laplace_event(2.0) == L(0.5)
    assert composed([G(1.0), L(2.0)]) == C([G(1.0), L(2.0)])
    assert self_composed(G(2.0), 1) == SC(G(2.0), 1)  # kept at n = 1: the event says how it was planned
    assert poisson_sampled(0.25, G(3.0)) == dp_accounting.PoissonSampledDpEvent(0.25, G(3.0))
    assert dpsgd_event(1.1, 0.0625, 16) == SC(dp_accounting.PoissonSampledDpEvent(0.0625, G(1.1)), 16)
    assert no_op_event() == dp_accounting.NoOpDpEvent()
    mog = mixture_of_gaussians_event(2.0, [0.0, 1.0, 2.0], [0.49, 0.42, 0.09])
    assert mog == dp_event.MixtureOfGaussiansDpEvent(standard_deviation=2.0, sensitivities=[0.0, 1.0, 2.0],
                                                     sampling_probs=[0.49, 0.42, 0.09])


def test_factory_events_round_trip_and_account_like_the_classes() -> None:
    ev = composed([gaussian_event(2.0), self_composed(gaussian_event(3.0), 5), laplace_event(4.0)])
    assert event_from_dict(event_to_dict(ev)) == ev
    hand = C([G(2.0), SC(G(3.0), 5), L(0.25)])
    assert epsilon_for_delta(ev, 1e-5) == epsilon_for_delta(hand, 1e-5)


@pytest.mark.parametrize("count", [-1, 2.0, True, "3"])
def test_self_composed_refuses_a_count_that_is_not_a_non_negative_integer(count: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match="non-negative integer"):
        self_composed(G(1.0), count)  # type: ignore[arg-type]


def test_factories_refuse_what_is_not_an_event_or_a_probability() -> None:
    with pytest.raises(PrivacyError, match="not a dp_accounting DpEvent"):
        composed([G(1.0), 1.0])  # type: ignore[list-item]
    with pytest.raises(PrivacyError, match="not a dp_accounting DpEvent"):
        self_composed("G(1)", 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidPrivacyParameter, match=r"in \[0, 1\], got 1.5"):
        poisson_sampled(1.5, G(1.0))
    with pytest.raises(PrivacyError, match="not a dp_accounting DpEvent"):
        secret_event(0.5, p=1e-4, r=1e-3)  # type: ignore[arg-type]


def test_scaled_noise_scales_every_gaussian_leaf_and_keeps_the_tree() -> None:
    ev = composed([gaussian_event(2.0), self_composed(gaussian_event(4.0), 3)])
    half = scaled_noise(ev, 0.5)
    assert half == C([G(1.0), SC(G(2.0), 3)])
    # μ-GDP of Gaussians is Σ(1/z²)^½: halving every z doubles μ
    assert gdp_mu_of(half) == pytest.approx(2 * gdp_mu_of(ev), rel=1e-12)


@pytest.mark.parametrize("event", [L(1.0), C([G(1.0), L(1.0)]), dp_accounting.PoissonSampledDpEvent(0.1, G(1.0))])
def test_scaled_noise_refuses_a_leaf_without_one_noise_multiplier(event: object) -> None:
    with pytest.raises(InvalidPrivacyParameter, match=r"cannot scale the noise of a (LaplaceDpEvent|PoissonSampled)"):
        scaled_noise(event, 0.5)  # type: ignore[arg-type]


def test_the_threat_model_still_refuses_a_party_sum_that_is_not_gaussian() -> None:
    from privtext.federated.threat import collusion_epsilon
    from privtext.privacy.release import Release

    r = Release(key="votes", mechanism="federated_nn_vote_sum", event=L(1.0), sensitivity=1.0, noise_std=1.0,
                meta={"parties": 3, "min_survivors": 3})
    with pytest.raises(ConfigError, match=r"party-sum release.*LaplaceDpEvent.*only Gaussian party sums"):
        collusion_epsilon([r], delta=1e-5, colluding=1)


def test_secret_event_holds_its_fields_and_round_trips() -> None:
    se = secret_event(SC(G(2.0), 2), p=1e-4, r=1e-3, secrets=[3, 1], approximate=True, planned=5)
    assert se == SecretEvent(event=SC(G(2.0), 2), p=1e-4, r=1e-3, secrets=(3, 1), approximate=True, planned=5)
    assert SecretEvent.from_dict(se.to_dict()) == se
