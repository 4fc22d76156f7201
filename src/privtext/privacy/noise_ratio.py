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
    clusterings: int = 1,
    sample: str = "independent",
    samplings: tuple[str, ...] = ("paper", "auto", "all"),
    blowups: tuple[str, ...] = ("exact", "paper"),
    rng: np.random.Generator,
    compositions: int | None = None,
) -> dict[str, Any]:
    """σ_GDP (record and group sensitivity) and σ_secret per sampling rule and blow-up method for one Fig 3
    point, with the comparison at equal utility.

    Accounting: each SecPE clustering releases counts and centres — 2 compositions of the unit mixture with
    independent samples (``sample="independent"``), or one with sensitivity √2 with a shared sample — and the run
    makes ``clusterings`` of them; the GDP baselines release one vote histogram per iteration, σ_GDP = √T/μ
    (record) and k_max·√T/μ (group). ``compositions`` overrides the SecPE side (the paper's one release).

    Sampling rules: ``paper`` (Alg 1 line 4 as written: Σρ = 1/max w, about one holder sampled), ``auto`` (the
    largest expected signal per unit of noise), ``all`` (ρ = 1 for every holder: no subsampling — the same records
    as the GDP baselines).

    Equal utility: a noisy count of secret holders is the statistic both mechanisms release. GDP (group) counts
    all N_h records holding a secret with noise σ_GDP: relative error σ_GDP/N_h. SecPE counts the sampled holders
    S = Σ Bern(ρ_i) with noise σ: to estimate N_h it divides by the mean ρ, with relative error
    √(σ² + Σρ(1−ρ))/Σρ — the sampling variance counts too, so a rule that samples one record in expectation is
    not free even when σ = 0. ``error_ratio`` = SecPE's relative error / GDP's (< 1: SecPE releases the more
    accurate count at the same (p, r)); ``ratio_*`` = σ_GDP/σ_secret as in the paper's Fig 3, reported with the
    reason when σ_secret = 0 (sampling alone gives (p, r))."""
    if not r_over_p > 1:
        raise InvalidPrivacyParameter(f"r/p must exceed 1, got {r_over_p!r}: r ≤ p protects nothing")
    r = p * r_over_p
    if r > 1:
        raise InvalidPrivacyParameter(f"r = p·(r/p) = {r:g} exceeds 1")
    if sample not in ("independent", "shared"):
        raise InvalidPrivacyParameter(f"sample must be independent or shared, got {sample!r}")
    if clusterings < 1:
        raise InvalidPrivacyParameter(f"clusterings must be ≥ 1, got {clusterings}")
    mu = float(mu_from_pr(p, r))
    membership = fig3_membership(records=records, secrets=secrets, rate=rate, rng=rng)
    holders = np.asarray(membership.getnnz(axis=0))
    holding = int((np.asarray(membership.getnnz(axis=1)) > 0).sum())
    k_max = int(holders.max()) if holders.size else 0
    sigma_rec = math.sqrt(clusterings) / mu
    sigma_grp = k_max * sigma_rec
    if compositions is None:
        comps, delta = (2 * clusterings, 1.0) if sample == "independent" else (clusterings, math.sqrt(2.0))
    else:
        comps, delta = int(compositions), 1.0
    err_gdp = sigma_grp / holding if holding else math.inf
    out: dict[str, Any] = {
        "records": records, "secrets": secrets, "rate": rate, "p": p, "r": r, "r_over_p": r_over_p, "mu": mu,
        "clusterings": clusterings, "sample": sample, "compositions": comps, "release_sensitivity": delta,
        "holders_max": k_max, "holders_mean": float(holders.mean()) if holders.size else 0.0,
        "records_holding": holding, "sigma_gdp_record": sigma_rec, "sigma_gdp_group": sigma_grp,
        "count_error_gdp_group": err_gdp, "rules": {},
    }
    for rule in samplings:
        per: dict[str, Any] = {}
        for how in blowups:
            t0 = time.perf_counter()
            res = secret_noise(membership, p=p, r=r, compositions=comps, sampling=rule, blowup=how,
                               release_sensitivity=delta)
            s = float(res.sigma)
            rho = np.asarray(res.rho)[np.asarray(res.in_lp)]
            es = float(rho.sum())
            err = math.sqrt(s * s + float((rho * (1 - rho)).sum())) / es if es > 0 else math.inf
            row: dict[str, Any] = {
                "mode": res.mode, "sigma": s, "expected_sampled": es, "groups": len(res.group_info),
                "ratio_record": sigma_rec / s if s > 0 else math.inf,
                "ratio_group": sigma_grp / s if s > 0 else math.inf,
                "count_error": err, "error_ratio": err / err_gdp if err_gdp > 0 else math.inf,
                "seconds": round(time.perf_counter() - t0, 3),
            }
            if s == 0:
                row["no_noise"] = (f"no noise needed: sampling alone (E[sampled] = {es:.3g} secret holders per "
                                   "release) already gives (p, r); the count it releases has relative error "
                                   f"{err:.3g} from sampling")
            per[how] = row
        out["rules"][rule] = per
    # flat keys of the first rule, for the curves and the older callers
    first = out["rules"][samplings[0]]
    for how, row in first.items():
        for k in ("sigma", "ratio_record", "ratio_group", "mode", "expected_sampled", "groups", "seconds"):
            out[f"{k if k != 'sigma' else 'sigma_secret'}_{how}"] = row[k]
    return out
