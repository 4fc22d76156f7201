"""Empirical privacy audits that can fail.

* :mod:`.derive` — a second derivation of every release's sensitivity from the configuration and the
  neighbouring relation (never from the method code);
* :mod:`.calibrate` — a second calibration of every release's noise from the configuration and the budget;
* :mod:`.dpsgd` — a one-run audit of DP-SGD (dpft): canary gradients through the library's DP-SGD step;
* :mod:`.mechanisms` — attacks on each mechanism as the methods run it, with canaries of g neighbours sized from
  the claim and trial counts that catch halved noise with probability ≥ 0.95;
* :mod:`.run` — ``privtext audit RUN_DIR``: the derivation checks and the attacks of a run;
* :mod:`.onerun` — one-run auditing (Steinke, Nasr & Jagielski 2023): an ε lower bound from guesses on m
  canaries of one run;
* :mod:`.endtoend` — ``privtext audit --end-to-end CONFIG``: canaries planted in the private data, the whole
  method run, every canary scored from the shareable outputs only;
* :mod:`.stats` — Clopper-Pearson bounds, the GDP and pure-DP bounds, power and trial counts.

See docs/audit.md.
"""

from __future__ import annotations

from .calibrate import check_noise, noise_plan
from .derive import Derivation, Relation, check_release, relation_of
from .dpsgd import audit_dpsgd_run
from .mechanisms import (
    POWER,
    TARGET_CLAIM,
    AuditResult,
    _public_code_topq_sensitivity,
    audit_dp_term_histogram,
    audit_dp_vocabulary,
    audit_federated_sum,
    audit_gaussian_release,
    audit_label_histogram,
    audit_laplace_label_histogram,
    audit_laplace_release,
    audit_rff_sketch,
    audit_secpe_hybrid,
    audit_secret_clustering,
    audit_topq_histograms,
    audit_vote_histogram,
    group_size,
    plan_laplace,
)
from .onerun import canaries_needed, epsilon_lower_bound, p_value
from .run import audit_run
from .stats import clopper_pearson, trials_for_halved_gaussian_noise

__all__ = [
    "POWER",
    "TARGET_CLAIM",
    "AuditResult",
    "Derivation",
    "Relation",
    "_public_code_topq_sensitivity",
    "audit_dp_term_histogram",
    "audit_dp_vocabulary",
    "audit_dpsgd_run",
    "audit_federated_sum",
    "audit_gaussian_release",
    "audit_label_histogram",
    "audit_laplace_label_histogram",
    "audit_laplace_release",
    "audit_rff_sketch",
    "audit_run",
    "audit_secpe_hybrid",
    "audit_secret_clustering",
    "audit_topq_histograms",
    "audit_vote_histogram",
    "canaries_needed",
    "check_noise",
    "check_release",
    "clopper_pearson",
    "epsilon_lower_bound",
    "group_size",
    "noise_plan",
    "p_value",
    "plan_laplace",
    "relation_of",
    "trials_for_halved_gaussian_noise",
]
