"""The federated threat model (issue 21, bug 6): SecAgg+ as used protects against an honest-but-curious server;
a server colluding with c parties learns their noise shares. ``parties.collusion: c`` has each party add
σ/√(t − c) so that the stated guarantee holds against a server colluding with up to c parties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privtext.errors import ConfigError
from privtext.privacy.events import gaussian_event
from privtext.privacy.release import Release

Z, T, DELTA = 2.162, 4, 1e-5


def _releases(z: float = Z, *, parties: int, t: int | None = None, collusion: int = 0) -> list[Release]:
    t = parties if t is None else t
    return [Release(key=f"votes/iter_{i:03d}", mechanism="federated_nn_vote_sum", event=gaussian_event(z),
                    noise_std=z, sensitivity=1.0, iteration=i,
                    meta={"parties": parties, "aggregation": "secagg", "min_survivors": t, "collusion": collusion})
            for i in range(T)]


@pytest.mark.parametrize(("parties", "colluding", "epsilon"), [(3, 0, 4.00), (3, 1, 5.06), (10, 9, 16.1)])
def test_the_issues_numbers(parties: int, colluding: int, epsilon: float) -> None:
    """z = 2.162, T = 4, δ = 1e-5 is (4, 1e-5)-DP against the server alone; a server colluding with 1 of 3
    parties faces ε ≈ 5.06, with 9 of 10 ε ≈ 16.1 (every party adds σ/√t, the coalition removes c shares)."""
    from privtext.federated.threat import collusion_epsilon

    eps = collusion_epsilon(_releases(parties=parties), delta=DELTA, colluding=colluding)
    assert eps == pytest.approx(epsilon, abs=0.01 if epsilon < 10 else 0.05)


def test_collusion_c_restores_the_stated_bound_against_c_colluders() -> None:
    from privtext.federated.threat import collusion_epsilon

    rel = _releases(parties=3, collusion=1)
    nominal = collusion_epsilon(rel, delta=DELTA, colluding=0)
    assert collusion_epsilon(rel, delta=DELTA, colluding=1) == pytest.approx(4.0007, abs=1e-3)
    assert nominal < 4.0  # against the server alone there is more noise than stated
    assert collusion_epsilon(rel, delta=DELTA, colluding=2) == pytest.approx(
        collusion_epsilon(_releases(Z / math.sqrt(2), parties=3), delta=DELTA, colluding=0), rel=1e-6)
    assert collusion_epsilon(rel, delta=DELTA, colluding=3) == math.inf


def test_other_releases_are_not_rescaled() -> None:
    """A release that is not a party sum (a central label histogram) keeps its event."""
    from privtext.federated.threat import collusion_epsilon
    from privtext.privacy.accounting import epsilon_for_delta

    label = Release(key="labels/histogram", mechanism="dp_label_histogram", event=gaussian_event(3.0),
                    noise_std=3.0, sensitivity=1.0)
    rel = [*_releases(parties=3), label]
    want = epsilon_for_delta([gaussian_event(Z * math.sqrt(2 / 3), count=T), gaussian_event(3.0)], DELTA)
    assert collusion_epsilon(rel, delta=DELTA, colluding=1) == pytest.approx(want, rel=1e-9)


def test_each_party_adds_sigma_over_root_t_minus_c() -> None:
    from privtext.federated.noise import local_noisy_vector, plan_quantisation

    sigma, L, c = 2.0, 5, 2
    plan = plan_quantisation(n_parties=L, dim=4000, sigma=sigma, value_bound=1.0, collusion=c)
    assert plan.party_std == pytest.approx(sigma / math.sqrt(L - c)) and plan.collusion == c
    assert plan_quantisation(n_parties=L, dim=3, sigma=sigma, value_bound=1.0).party_std == pytest.approx(
        sigma / math.sqrt(L))
    # the noise the L − c honest parties add: its std is σ (χ² on 4000 coordinates, 4-sigma tolerance)
    rng = np.random.default_rng(0)
    honest = sum(local_noisy_vector(np.zeros(4000), plan, rng) for _ in range(L - c))
    ratio = float(np.var(honest) / sigma**2)
    assert abs(ratio - 1) < 4 * math.sqrt(2 / 4000), ratio
    with pytest.raises(ConfigError, match="collusion"):
        plan_quantisation(n_parties=L, dim=3, sigma=sigma, value_bound=1.0, min_survivors=3, collusion=3)


def test_plain_sum_with_collusion_carries_the_larger_noise() -> None:
    from privtext.federated.aggregate import federated_sum

    L, c, sigma, dim = 4, 1, 1.0, 3000
    r = federated_sum([np.zeros(dim)] * L, lambda d: d, dim=dim, sigma=sigma, value_bound=1.0, aggregation="plain",
                      collusion=c)
    assert r.noise_std == pytest.approx(sigma * math.sqrt(L / (L - c)))
    assert abs(float(np.var(r.values)) / r.noise_std**2 - 1) < 4 * math.sqrt(2 / dim)


def test_threat_model_sentences_and_bounds() -> None:
    from privtext.federated.threat import threat_model

    tm = threat_model(aggregation="secagg", parties=3, min_survivors=3, collusion=0, releases=_releases(parties=3),
                      delta=DELTA)
    assert tm["model"] == "honest-but-curious server"
    words = " ".join(tm["sentences"])
    assert "honest-but-curious" in words and "collusion" in words and "malicious" in words
    bounds = {b["colluding"]: b["epsilon"] for b in tm["bounds"]}
    assert bounds[0] == pytest.approx(4.0, abs=0.01) and bounds[1] == pytest.approx(5.06, abs=0.01)
    assert bounds[2] > bounds[1]
    plain = threat_model(aggregation="plain", parties=3, min_survivors=3, collusion=0)
    assert plain["model"].startswith("none") and plain["bounds"] == []


def test_parties_options_take_collusion_and_refuse_c_at_least_t() -> None:
    from privtext.config import Config
    from privtext.methods.parties import PartiesOptions, check_parties

    pt = PartiesOptions(count=3, collusion=1)
    assert pt.collusion == 1 and PartiesOptions(count=3).collusion == 0
    cfg = Config.model_validate({"method": "augpe", "data": {"private": "x.csv"}, "cluster": {"backend": "local"},
                                 "privacy": {"epsilon": 4.0, "delta": 1e-5}})
    check_parties(cfg, pt, "augpe")
    with pytest.raises(ConfigError, match="collusion"):
        check_parties(cfg, PartiesOptions(count=3, min_survivors=2, collusion=2), "augpe")
