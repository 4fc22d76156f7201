"""SecPE's own wiring, end to end (the scorer tests build the scorer by hand and cannot see it): who votes exactly,
and at which rate the holders are sampled. Two mutants of issue 21 lived because nothing checked these."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privtext.data import Corpus
from privtext.testing.tinyrun import tiny_run, toy_corpora

N_PRIVATE = 120
GROUPED = 80  # 20 secrets, each held by 4 records
SINGLE = 100  # one more record holds a secret of its own


def _corpus() -> tuple[Corpus, Corpus, int]:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=N_PRIVATE, n_pool=160)
    t = list(priv.texts)
    for i in range(GROUPED):
        t[i] += f" please call me on 555 {1000 + i // 4:04d}"
    t[SINGLE] += " please call me on 555 7777"
    holders = GROUPED + 1
    return Corpus(priv.ids, tuple(t), priv.labels, name="private"), pub, holders


@pytest.fixture(scope="module")
def secpe_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, list, list]:
    """One hybrid SecPE run; the ρ SecretNoise calibrated σ for and the ρ every clustering release sampled with
    are captured at the library's two ends (the calibration's result, the mechanism's argument)."""
    import privtext.methods.secpe.scorer as scorer_mod
    import privtext.privacy as privacy_mod

    calibrated: list[np.ndarray] = []
    sampled_with: list[np.ndarray] = []
    real_noise, real_clustering = privacy_mod.secret_noise, scorer_mod.secret_clustering

    def noise(*a: object, **k: object):  # type: ignore[no-untyped-def]
        out = real_noise(*a, **k)  # type: ignore[arg-type]
        calibrated.append(np.array(out.rho, copy=True))
        return out

    def clustering(*a: object, **k: object):  # type: ignore[no-untyped-def]
        sampled_with.append(np.array(k["rho"], copy=True))
        return real_clustering(*a, **k)  # type: ignore[arg-type]

    mp = pytest.MonkeyPatch()
    mp.setattr(privacy_mod, "secret_noise", noise)
    mp.setattr(scorer_mod, "secret_clustering", clustering)
    try:
        priv, pub, holders = _corpus()
        root = tiny_run(tmp_path_factory.mktemp("wiring") / "run", private=priv, public=pub, method="secpe",
                        iterations=3, privacy={"secret": {"p": 1e-3, "r": 2e-2}},
                        secpe={"clusters": 4, "sampling": "max", "voting": "hybrid"})
    finally:
        mp.undo()
    return root, holders, calibrated, sampled_with


def test_the_holders_are_sampled_at_the_rho_the_noise_was_calibrated_for(secpe_run: tuple) -> None:
    """Each release samples the holders with exactly the ρ SecretNoise calibrated σ for (sampling at 2ρ while σ
    and the ledger use ρ lived through the suite before). Known value: with ``sampling: max`` the LP (Eq 6) gives
    each secret of 4 holders total weight η = Φ⁻¹(1−p) − Φ⁻¹(1−r) and the single holder weight 1 ≥ η, so
    Σρ = 20·η + 1; and every release's sampled count is within 6 standard deviations of Σρ."""
    from scipy.stats import norm

    root, _, calibrated, sampled_with = secpe_run
    assert len(calibrated) == 1 and len(sampled_with) == 3
    for rho in sampled_with:
        np.testing.assert_array_equal(rho, calibrated[0])
    eta = norm.ppf(1 - 1e-3) - norm.ppf(1 - 2e-2)
    rho_sum = (GROUPED // 4) * eta + 1.0
    assert calibrated[0].sum() == pytest.approx(rho_sum, rel=1e-6)
    diag = json.loads((root / "private" / "diagnostics.json").read_text())
    assert diag["secret_noise"]["expected_sampled"] == pytest.approx(rho_sum, rel=1e-6)
    var = float(np.sum(calibrated[0] * (1 - calibrated[0])))
    for n in diag["sampled_secret_holders"].values():
        assert abs(n - rho_sum) <= 6 * np.sqrt(var) + 1e-9, (n, rho_sum)


def test_only_the_secret_free_records_vote_exactly(secpe_run: tuple) -> None:
    """Hybrid voting: the records holding no declared secret (public under secret protection) vote record by
    record; every holder reaches the votes only through the noisy clusters. Each iteration's exact direct votes
    number exactly the secret-free records (every label group has candidates), never the holders too."""
    root, holders, _, _ = secpe_run
    free = N_PRIVATE - holders
    diag = json.loads((root / "private" / "diagnostics.json").read_text())
    assert diag["secrets"]["records_public"] == free
    for t in range(3):
        state = json.loads((root / "private" / "checkpoints" / f"iter_{t:03d}" / "state.json").read_text())
        assert state["direct_votes"] == free, (t, state["direct_votes"], free)
