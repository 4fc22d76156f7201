"""SecPE App B.1 (Fig 3): how much less noise (p, r)-secret protection needs than μ-GDP.

Set-up (secpe.txt App B.1): N records, m secrets, each record holds each secret independently with probability
``rate``; the budget is (p, r) with μ coupled by Eq 4, μ = Φ⁻¹(1−p) − Φ⁻¹(1−r). The paper reports
σ_GDP / σ_secret (larger is better).

Two GDP baselines, because the paper does not say which sensitivity its GDP side uses:

* **record** — Δ = 1: σ_GDP = √T/μ. This protects one *record*; a secret repeated in k records is then only
  protected at μ·k (group privacy), so this baseline does not give (p, r) for repeated secrets.
* **group** — Δ = k_max, the largest number of records holding one secret: σ_GDP = k_max·√T/μ. Removing a
  secret removes every record that holds it, so this is the record-level GDP noise that actually yields (p, r)
  for every secret — the fair comparison.

σ_secret comes from :func:`privtext.privacy.secret_noise` with the chosen sampling rule, both ``exact`` (the
mixture's blow-up, an upper bound) and ``paper`` (the single-Gaussian approximation the paper uses).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import InvalidPrivacyParameter
from .conversions import mu_from_pr
from .secretnoise import secret_noise


def fig3_membership(*, records: int, secrets: int, rate: float, rng: np.random.Generator) -> sp.csr_matrix:
    """A records × secrets 0/1 matrix with independent Bernoulli(rate) entries (App B.1)."""
    if records < 1 or secrets < 1:
        raise InvalidPrivacyParameter(f"records and secrets must be positive, got {records}, {secrets}")
    if not 0 < rate <= 1:
        raise InvalidPrivacyParameter(f"rate must lie in (0, 1], got {rate!r}")
    # sample the nonzeros directly: Binomial count per column, then distinct rows
    cols, rows = [], []
    for j in range(secrets):
        k = int(rng.binomial(records, rate))
        if k:
            rows.append(rng.choice(records, size=k, replace=False))
            cols.append(np.full(k, j))
    if not rows:
        return sp.csr_matrix((records, secrets), dtype=np.float64)
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    return sp.csr_matrix((np.ones(r.size), (r, c)), shape=(records, secrets))


def noise_ratio(
    *,
    records: int,
    secrets: int,
    rate: float,
    r_over_p: float,
    p: float = 1e-4,
    compositions: int = 1,
    sampling: str = "paper",
    rng: np.random.Generator,
    blowups: tuple[str, ...] = ("exact", "paper"),
) -> dict[str, Any]:
    """σ_GDP (record and group sensitivity) and σ_secret (per blow-up method) for one Fig 3 point."""
    if not r_over_p > 1:
        raise InvalidPrivacyParameter(f"r/p must exceed 1, got {r_over_p!r}: r ≤ p protects nothing")
    r = p * r_over_p
    if r > 1:
        raise InvalidPrivacyParameter(f"r = p·(r/p) = {r:g} exceeds 1")
    mu = float(mu_from_pr(p, r))
    membership = fig3_membership(records=records, secrets=secrets, rate=rate, rng=rng)
    holders = np.asarray(membership.getnnz(axis=0))
    k_max = int(holders.max()) if holders.size else 0
    sigma_rec = math.sqrt(compositions) / mu
    sigma_grp = k_max * sigma_rec
    out: dict[str, Any] = {
        "records": records, "secrets": secrets, "rate": rate, "p": p, "r": r, "r_over_p": r_over_p, "mu": mu,
        "compositions": compositions, "sampling": sampling,
        "holders_max": k_max, "holders_mean": float(holders.mean()) if holders.size else 0.0,
        "sigma_gdp_record": sigma_rec, "sigma_gdp_group": sigma_grp,
    }
    for how in blowups:
        t0 = time.perf_counter()
        res = secret_noise(membership, p=p, r=r, compositions=compositions, sampling=sampling, blowup=how)
        s = res.sigma
        out[f"sigma_secret_{how}"] = s
        out[f"ratio_record_{how}"] = sigma_rec / s if s > 0 else math.inf
        out[f"ratio_group_{how}"] = sigma_grp / s if s > 0 else math.inf
        out[f"mode_{how}"] = res.mode
        out[f"expected_sampled_{how}"] = res.signal
        out[f"groups_{how}"] = len(res.group_info)
        out[f"seconds_{how}"] = round(time.perf_counter() - t0, 3)
    return out
