"""privtext's own mutation suite: privacy-critical lines changed one at a time, each change expected to fail a test.

Every entry of :data:`MUTANTS` is one plausible bug in a line privacy rests on (a noise scale, a sensitivity, a
sampling rate, an accounting rule, a guard rule, the statement's verdict, a release-scan rule), written as the
exact source snippet and its replacement, with the test node ids expected to kill it. A mutant nobody's test kills
is a privacy bug the suite would not see (issue 36 found four: a Laplace draw at b/2, DP-SGD sampling at 2q and two
release-scan rules).

How a mutant runs. The repository's committed tree (``git archive HEAD``, or ``--rev``: src/, tests/, benchmarks/,
examples/, docs/, pyproject.toml, README.md) is unpacked into a temporary folder — the shared working tree is never
written, and other people's uncommitted edits are not in it —
the snippet is replaced there (it must occur exactly once in the file: otherwise the mutant is **stale**, never
skipped silently), and ``python -m pytest`` runs the named tests in that folder with ``PYTHONPATH`` pointing at its
``src``; a plugin loaded into that pytest asserts that ``import privtext`` resolves to the copy. Verdicts:

* ``killed`` — some named test failed;
* ``survived`` — every named test passed: the suite does not see this bug;
* ``stale`` — the snippet is not in the file exactly once (the code moved on: update the mutant);
* ``error`` — pytest could not run the tests (a node id that no longer exists, a collection error), or the
  baseline (every named test on the unmutated copy, run first) already fails one of them; ``timeout`` — the tests
  ran past ``--timeout``. A mutant's pytest stops at the first failure (``-x``), so a kill is usually quick.

The score is killed / (all mutants run); 100 % means every mutant was killed and none was stale or in error.

    python benchmarks/mutants.py                      # every mutant, one at a time (-j 1: a shared 2-core machine)
    python benchmarks/mutants.py --list               # names, files and the tests named, with stale ones marked
    python benchmarks/mutants.py laplace-half-scale 'dpsgd-*'   # a subset by name (glob patterns)
    python benchmarks/mutants.py --working-tree ...   # the working tree instead of HEAD (uncommitted tests)
    python benchmarks/mutants.py --rev 4a254da ...    # another commit
    python benchmarks/mutants.py -j 2 --json artifacts/mutants/last.json

The suite is a benchmark, not part of CI: the whole list takes about half an hour on the shared 2-core machine
(the figure is printed at the end, with the load).
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what a mutant's copy holds (tests read examples/, docs/ and README.md; some import benchmarks/)
COPY = ("src", "tests", "benchmarks", "examples", "docs", "pyproject.toml", "README.md", "DEVELOPERS.md")
RULES = ("noise", "sensitivity", "sampling", "dpsgd", "accounting", "guard", "statement", "release_scan")


@dataclass(frozen=True)
class Mutant:
    """One planted bug: in ``file`` (relative to the repository), ``snippet`` (exact, found once) becomes
    ``replacement``; ``tests`` (pytest node ids) must fail."""

    name: str
    rule: str
    file: str
    snippet: str
    replacement: str
    tests: tuple[str, ...]
    why: str = ""


def M(name: str, rule: str, file: str, snippet: str, replacement: str, tests: Sequence[str] | str,
      why: str = "") -> Mutant:
    assert rule in RULES, rule
    return Mutant(name, rule, file, snippet, replacement, (tests,) if isinstance(tests, str) else tuple(tests), why)


P = "src/privtext/"
D = "tests/test_draws.py::"
RS = "tests/test_release_scan.py::"
G = "tests/test_guard.py::"
MC = "tests/test_method_contract.py::"

MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------------------------------------ noise
    M("laplace-half-scale", "noise", P + "privacy/noise.py",
      "return v + rng.laplace(0.0, float(b), size=v.shape)", "return v + rng.laplace(0.0, float(b) / 2, size=v.shape)",
      [D + "test_add_laplace_draws_the_stated_scale", D + "test_laplace_label_histogram_noise",
       D + "test_dpkps_vocabulary_and_term_histogram_noise"],
      "issue 36 survivor 1: every Laplace release (DP-KPS, the Aug-PE vocabulary, label histograms) spends 2ε"),
    M("laplace-as-gaussian", "noise", P + "privacy/noise.py",
      "return v + rng.laplace(0.0, float(b), size=v.shape)",
      "return v + rng.normal(0.0, float(b) * 2 ** 0.5, size=v.shape)",
      [D + "test_add_laplace_draws_the_stated_scale", D + "test_dpkps_vocabulary_and_term_histogram_noise"],
      "Gaussian noise of the Laplace's variance: not ε-DP (the shape matters, not only the variance)"),
    M("gaussian-tenth-std", "noise", P + "privacy/noise.py",
      "z = rng.normal(0.0, float(s), size=v.shape)", "z = rng.normal(0.0, float(s) / 10, size=v.shape)",
      [D + "test_add_gaussian_draws_the_stated_std_with_and_without_factors",
       D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta"]),
    M("gaussian-factor-ignored", "noise", P + "privacy/noise.py",
      "return v + z if f is None else v + f * z", "return v + z",
      [D + "test_add_gaussian_draws_the_stated_std_with_and_without_factors",
       D + "test_secpe_cluster_noise_is_sigma_on_counts_and_2r_over_n_on_centres"],
      "SecPE's centres get σ instead of (2R/n_k)·σ"),
    M("gaussian-small-std-dropped", "noise", P + "privacy/noise.py",
      "    if not s > 0:\n        return v.copy()\n    z = rng.normal",
      "    if not s > 1:\n        return v.copy()\n    z = rng.normal",
      [D + "test_add_gaussian_draws_the_stated_std_with_and_without_factors",
       D + "test_secpe_cluster_noise_is_sigma_on_counts_and_2r_over_n_on_centres"],
      "noise below std 1 skipped (a non-private release the ledger calls private)"),
    M("torch-gaussian-half-std", "noise", P + "privacy/noise.py",
      "z = torch.normal(0.0, float(s), size=tuple(value.shape)",
      "z = torch.normal(0.0, float(s) / 2, size=tuple(value.shape)",
      [D + "test_add_gaussian_torch_draws_the_stated_std",
       D + "test_dpsgd_noise_is_sigma_c_on_every_trainable_tensor"]),
    M("votes-std-without-delta", "noise", P + "mechanisms/voting.py",
      "std = float(noise_multiplier) * float(sensitivity)", "std = float(noise_multiplier)",
      [D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta"],
      "Aug-PE's votes get σ whatever the relation's Δ (replace one, secret groups, users under-noised)"),
    M("label-gaussian-without-delta", "noise", P + "mechanisms/labels.py",
      "std = float(noise_multiplier) * float(sensitivity)", "std = float(noise_multiplier)",
      [D + "test_gaussian_label_histogram_noise"]),
    M("label-laplace-without-delta", "noise", P + "mechanisms/labels.py",
      "0.0 if math.isinf(eps) else float(sensitivity) / eps", "0.0 if math.isinf(eps) else 1.0 / eps",
      [D + "test_laplace_label_histogram_noise"]),
    M("label-histogram-delta-from-method", "noise", P + "methods/base.py",
      "noisy, event = dp_label_histogram(groups, len(space), noise_multiplier=sigma,\n"
      "                                                  sensitivity=r.sensitivity,",
      "noisy, event = dp_label_histogram(groups, len(space), noise_multiplier=sigma,\n"
      "                                                  sensitivity=1.0,",
      [D + "test_gaussian_label_histogram_noise"],
      "the label histogram's Δ taken as 1 instead of the relation's"),
    M("topq-std-without-delta", "noise", P + "mechanisms/topq.py",
      "std = float(noise_multiplier) * delta", "std = float(noise_multiplier)",
      [D + "test_wasp_topq_noise"]),
    M("topq-furthest-without-noise", "noise", P + "mechanisms/topq.py",
      "    return noisy[:n], noisy[n:]", "    return noisy[:n], np.asarray(hf, dtype=np.float64)",
      [D + "test_wasp_topq_noise"]),
    M("secpe-centre-noise-r-over-n", "noise", P + "mechanisms/clustering.py",
      "centres = add_gaussian(centres, sigma, rng, factor=(2 * radius / n)[:, None])",
      "centres = add_gaussian(centres, sigma, rng, factor=(radius / n)[:, None])",
      [D + "test_secpe_cluster_noise_is_sigma_on_counts_and_2r_over_n_on_centres"],
      "Eq 7's centre noise at R/n_k: half the sensitivity's 2R/n_k"),
    M("secpe-count-noise-half", "noise", P + "mechanisms/clustering.py",
      "counts = add_gaussian(counts, sigma, rng)", "counts = add_gaussian(counts, sigma / 2, rng)",
      [D + "test_secpe_cluster_noise_is_sigma_on_counts_and_2r_over_n_on_centres"]),
    M("vocabulary-scale-without-r", "noise", P + "mechanisms/vocabulary.py",
      "scale = 0.0 if math.isinf(eps) else delta1 / eps", "scale = 0.0 if math.isinf(eps) else 1.0 / eps",
      [D + "test_dpkps_vocabulary_and_term_histogram_noise"],
      "the vocabulary histogram's Laplace scale 1/ε where a document adds to r bins (Δ₁ = r)"),
    M("term-histogram-half-scale", "noise", P + "mechanisms/kde.py",
      "    noisy = add_laplace(hist, scale, rng)", "    noisy = add_laplace(hist, scale / 2, rng)",
      [D + "test_dpkps_vocabulary_and_term_histogram_noise"]),
    M("federated-share-ignores-collusion", "noise", P + "federated/noise.py",
      "tau = float(sigma) / math.sqrt(t - int(collusion))", "tau = float(sigma) / math.sqrt(t)",
      [D + "test_federated_party_noise_sums_to_sigma_over_the_honest_parties"],
      "each party's share σ/√t: the t − c honest parties' noise falls below σ when c parties collude"),
    M("length-gaussian-without-delta", "noise", P + "mechanisms/lengths.py",
      "add_gaussian(counts, float(noise_multiplier or 0.0) * float(sensitivity), rng)",
      "add_gaussian(counts, float(noise_multiplier or 0.0), rng)",
      [D + "test_dp_length_histogram_noise"]),
    M("exact-votes-no-safety-factor", "noise", P + "search/exact_votes.py",
      "    window = safety * raw + FLOOR\n", "    window = raw + FLOOR\n",
      ["tests/test_exact_votes.py::test_votes_equal_the_reference_votes_on_every_record",
       "tests/test_exact_votes.py::test_the_bound_is_calibrated_on_candidates_only"],
      "issue 36: the exact-vote safety margin (E = 2 × the calibrated maximum + floor) dropped to 1 ×; privacy "
      "does not rest on it (each record's vote is its own: Δ = 1), the votes' exactness does"),
    # ------------------------------------------------------------------------------------------------ sensitivity
    M("replace-one-l2-factor-1", "sensitivity", P + "privacy/relation.py",
      "factor = math.sqrt(2.0) if (c.norm == \"l2\" and c.nonnegative) else 2.0",
      "factor = 1.0 if (c.norm == \"l2\" and c.nonnegative) else 2.0",
      [D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta",
       D + "test_gaussian_label_histogram_noise"],
      "replacing a record moves a vote between two bins: Δ₂ = √2, not 1"),
    M("replace-one-l1-factor-sqrt2", "sensitivity", P + "privacy/relation.py",
      "factor = math.sqrt(2.0) if (c.norm == \"l2\" and c.nonnegative) else 2.0",
      "factor = math.sqrt(2.0) if (c.norm == \"l2\" and c.nonnegative) else math.sqrt(2.0)",
      [D + "test_laplace_label_histogram_noise", D + "test_dpkps_vocabulary_and_term_histogram_noise"]),
    M("group-sensitivity-one-record", "sensitivity", P + "privacy/relation.py",
      "        return float(self.group_size * c.bound)\n", "        return float(c.bound)\n",
      [D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta",
       D + "test_gaussian_label_histogram_noise"],
      "a secret's group of k records (or a user's m) accounted as one record"),
    M("normalised-user-delta-one-for-everything", "sensitivity", P + "privacy/relation.py",
      "        if self.kind == \"user\" and not self.capped:\n",
      "        if self.kind == \"user\" and self.normalised:\n            return 1.0\n"
      "        if self.kind == \"user\" and not self.capped:\n",
      ["tests/test_privacy_relation.py::"
       "test_normalised_user_level_is_m_times_the_bound_for_releases_the_parties_do_not_normalise"],
      "issue 36 (also found): normalised user level gave Δ = 1 to label histograms and vocabularies too (Δ = m)"),
    M("gaussian-release-std-without-delta", "sensitivity", P + "privacy/release.py",
      "event=gaussian_event(sigma), noise_std=sigma * delta,", "event=gaussian_event(sigma), noise_std=sigma,",
      [D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta"]),
    M("laplace-release-scale-without-delta", "sensitivity", P + "privacy/release.py",
      "scale = 0.0 if math.isinf(eps) else delta / eps", "scale = 0.0 if math.isinf(eps) else 1.0 / eps",
      [D + "test_laplace_label_histogram_noise"]),
    M("dpsgd-release-std-without-clip", "sensitivity", P + "privacy/release.py",
      "event=event, noise_std=sigma * delta, sensitivity=delta,", "event=event, noise_std=sigma, sensitivity=delta,",
      [D + "test_dpsgd_release_noise_is_sigma_times_the_clipping_norm"]),
    M("topq-sensitivity-one-histogram", "sensitivity", P + "mechanisms/topq.py",
      "return float(math.sqrt(2.0 * float(np.sum(w * w))))", "return float(math.sqrt(float(np.sum(w * w))))",
      [D + "test_wasp_topq_noise"], "Δ_Q of one histogram where both (nearest, furthest) are released"),
    M("one-vote-half", "sensitivity", P + "privacy/relation.py",
      "ONE_VOTE_L2 = Contribution(1.0, \"l2\", True, \"one vote for one bin\")",
      "ONE_VOTE_L2 = Contribution(0.5, \"l2\", True, \"one vote for one bin\")",
      [D + "test_augpe_vote_noise_is_sigma_times_the_relations_delta", D + "test_gaussian_label_histogram_noise"]),
    M("one-count-l1-half", "sensitivity", P + "privacy/relation.py",
      "ONE_COUNT_L1 = Contribution(1.0, \"l1\", True, \"one count in one bin\")",
      "ONE_COUNT_L1 = Contribution(0.5, \"l1\", True, \"one count in one bin\")",
      [D + "test_laplace_label_histogram_noise"]),
    M("secpe-shared-sample-delta-1", "sensitivity", P + "mechanisms/clustering.py",
      "return ClusteringPlan(clusterings, sample, 1, math.sqrt(2.0))",
      "return ClusteringPlan(clusterings, sample, 1, 1.0)",
      ["tests/test_mechanisms_clustering.py::test_clustering_events_match_the_plan"],
      "one shared Bernoulli sample moves count and centre together: Δ = √2, not 1"),
    M("dpsgd-clip-times-10", "sensitivity", P + "mechanisms/dpsgd.py",
      "return Contribution(float(max_grad_norm), \"l2\", nonnegative=False,",
      "return Contribution(10 * float(max_grad_norm), \"l2\", nonnegative=False,",
      [D + "test_dpsgd_release_noise_is_sigma_times_the_clipping_norm"],
      "the DP-SGD release's Δ is 10C while the optimiser clips at C"),
    # ------------------------------------------------------------------------------------------------ sampling
    M("poisson-2q", "sampling", P + "mechanisms/dpsgd.py",
      "return [np.flatnonzero(rng.random(n) < sampling_rate) for _ in range(steps)]",
      "return [np.flatnonzero(rng.random(n) < 2 * sampling_rate) for _ in range(steps)]",
      [D + "test_poisson_batches_keep_each_record_at_q_independently",
       D + "test_dpsgd_steps_sample_at_the_rate_the_event_states"],
      "issue 36 survivor 2: true ε 6.51 against a claimed 4.0"),
    M("poisson-fixed-size", "sampling", P + "mechanisms/dpsgd.py",
      "return [np.flatnonzero(rng.random(n) < sampling_rate) for _ in range(steps)]",
      "return [np.sort(rng.choice(n, size=round(n * sampling_rate), replace=False)) for _ in range(steps)]",
      [D + "test_poisson_batches_keep_each_record_at_q_independently"],
      "fixed-size batches accounted as Poisson sampling"),
    M("poisson-same-batch", "sampling", P + "mechanisms/dpsgd.py",
      "return [np.flatnonzero(rng.random(n) < sampling_rate) for _ in range(steps)]",
      "return [np.flatnonzero(rng.random(n) < sampling_rate)] * steps",
      [D + "test_poisson_batches_keep_each_record_at_q_independently"]),
    M("dpsgd-steps-sample-2q", "sampling", P + "mechanisms/dpsgd.py",
      "poisson_batches(n_records, sampling_rate, steps, rng)",
      "poisson_batches(n_records, min(1.0, 2 * sampling_rate), steps, rng)",
      [D + "test_dpsgd_steps_sample_at_the_rate_the_event_states"]),
    M("secpe-counts-sample-2rho", "sampling", P + "mechanisms/clustering.py",
      "keep_counts = rng.random(len(rho)) < rho", "keep_counts = rng.random(len(rho)) < 2 * rho",
      [D + "test_secpe_samples_each_record_at_its_rho"]),
    M("secpe-independent-is-shared", "sampling", P + "mechanisms/clustering.py",
      "keep_centres = keep_counts if sample == \"shared\" else rng.random(len(rho)) < rho",
      "keep_centres = keep_counts",
      [D + "test_secpe_samples_each_record_at_its_rho"],
      "one sample for both releases accounted as two independent ones (under-counts, clustering.py docstring)"),
    M("secpe-centres-sample-sqrt-rho", "sampling", P + "mechanisms/clustering.py",
      "keep_centres = keep_counts if sample == \"shared\" else rng.random(len(rho)) < rho",
      "keep_centres = keep_counts if sample == \"shared\" else rng.random(len(rho)) < np.sqrt(rho)",
      [D + "test_secpe_samples_each_record_at_its_rho"]),
    M("secretnoise-max-rho-doubled", "sampling", P + "privacy/secretnoise.py",
      "        rho[in_lp] = lw / wmax\n", "        rho[in_lp] = np.minimum(1.0, 2 * lw / wmax)\n",
      ["tests/test_privacy_secret_noise.py::test_rho_formulas"],
      "SecretNoise's sampling rates above the LP's: σ calibrated for ρ, records sampled more often"),
    # ------------------------------------------------------------------------------------------------ DP-SGD
    M("dpsgd-noise-tenth", "dpsgd", P + "mechanisms/dpsgd.py",
      "self.noise_std, self.noise_rng, self.noise_source = float(std), rng, source",
      "self.noise_std, self.noise_rng, self.noise_source = float(std) / 10, rng, source",
      [D + "test_dpsgd_noise_is_sigma_c_on_every_trainable_tensor"], "issue 36: DP-SGD noise at a tenth"),
    M("dpsgd-noise-first-tensor-torch", "dpsgd", P + "mechanisms/dpsgd.py",
      "                for p in params:\n                    p.grad = add_gaussian_torch(",
      "                for p in params[:1]:\n                    p.grad = add_gaussian_torch(",
      [D + "test_dpsgd_noise_is_sigma_c_on_every_trainable_tensor"],
      "issue 36: noise only on the first tensor (the rest keep their raw gradient)"),
    M("dpsgd-noise-first-tensor-csprng", "dpsgd", P + "mechanisms/dpsgd.py",
      "torch.float64) for p in params])\n"
      "                noisy = torch.from_numpy(add_gaussian(flat.numpy(), self.noise_std, self.noise_rng))\n"
      "                at = 0\n"
      "                for p in params:",
      "torch.float64) for p in params[:1]])\n"
      "                noisy = torch.from_numpy(add_gaussian(flat.numpy(), self.noise_std, self.noise_rng))\n"
      "                at = 0\n"
      "                for p in params[:1]:",
      [D + "test_dpsgd_noise_is_sigma_c_on_every_trainable_tensor"]),
    M("dpsgd-clip-check-removed", "dpsgd", P + "mechanisms/dpsgd.py",
      "if abs(optimizer.max_grad_norm - sensitivity) > 1e-12 * max(1.0, sensitivity):", "if False:",
      ["tests/test_dpft.py::test_the_optimiser_refuses_a_noise_scale_for_another_clipping_norm"],
      "issue 36: the check that the optimiser clips at the release's Δ removed"),
    M("dpsgd-no-clipping", "dpsgd", P + "mechanisms/dpsgd.py",
      "        optimizer.clip_and_accumulate()  # per-record clipping",
      "        optimizer.max_grad_norm = 1e12\n        optimizer.clip_and_accumulate()  # per-record clipping",
      [D + "test_dpsgd_clips_each_records_whole_gradient_to_c"], "issue 36: the clip removed"),
    M("dpsgd-optimiser-clips-at-10c", "dpsgd", P + "mechanisms/dpsgd.py",
      "noise_multiplier=0.0, max_grad_norm=float(max_grad_norm),",
      "noise_multiplier=0.0, max_grad_norm=10 * float(max_grad_norm),",
      [D + "test_dpsgd_clips_each_records_whole_gradient_to_c"], "issue 36: clip ×10"),
    M("dpsgd-no-noise-on-empty-batch", "dpsgd", P + "mechanisms/dpsgd.py",
      "    optimizer.add_noise()\n    for p in params:  # the public normaliser",
      "    if len(idx):\n        optimizer.add_noise()\n    for p in params:  # the public normaliser",
      [D + "test_dpsgd_empty_batch_releases_noise"],
      "an empty Poisson batch skips the noise (the analysis assumes every step is taken, noise included)"),
    M("dpft-plan-steps-one-epoch", "accounting", P + "methods/dpft/method.py",
      "        e = dpsgd_event(s, q, steps)\n", "        e = dpsgd_event(s, q, per_epoch)\n",
      ["tests/test_dpft.py::test_a_run_records_the_events_it_calibrated_and_spends_its_budget"],
      "issue 36: σ calibrated for one epoch's steps while the run takes every epoch"),
    M("dpft-plan-no-label-composition", "accounting", P + "methods/dpft/method.py",
      "return e if label_sigma is None else composed([gaussian_event(label_sigma), e])", "return e",
      ["tests/test_dpft.py::test_a_run_records_the_events_it_calibrated_and_spends_its_budget"],
      "issue 36: σ calibrated without the DP label histogram's share of the budget"),
    M("dpft-release-steps-one", "accounting", P + "methods/dpft/method.py",
      "sampling_rate=plan.sampling_rate, steps=plan.steps_per_epoch, contribution=contribution,",
      "sampling_rate=plan.sampling_rate, steps=1, contribution=contribution,",
      ["tests/test_dpft.py::test_a_run_records_the_events_it_calibrated_and_spends_its_budget"],
      "the ledger records one step per epoch while the epoch takes round(1/q)"),
    M("code-delta-mask-removed", "dpsgd", P + "methods/dpft/codedelta.py",
      "return self.base(ids) + self.delta(s.clamp(max=k - 1)) * on",
      "return self.base(ids) + self.delta(s.clamp(max=k - 1))",
      ["tests/test_dpft.py::test_a_code_delta_gets_each_records_own_gradient_and_nothing_from_other_tokens"],
      "issue 36: every token that is not a code adds to the last code's delta"),
    # ------------------------------------------------------------------------------------------------ accounting
    M("dpsgd-event-half-q", "accounting", P + "privacy/events.py",
      "step = poisson_sampled(q, dp_accounting.GaussianDpEvent(float(noise_multiplier)))",
      "step = poisson_sampled(q / 2, dp_accounting.GaussianDpEvent(float(noise_multiplier)))",
      ["tests/test_dpft.py::test_ledger_epsilon_equals_opacus_accountants"]),
    M("dpsgd-event-one-step", "accounting", P + "privacy/events.py",
      "return self_composed(step, int(steps))", "return step",
      ["tests/test_dpft.py::test_ledger_epsilon_equals_opacus_accountants"]),
    M("gaussian-event-count-ignored", "accounting", P + "privacy/events.py",
      "return ev if count == 1 else self_composed(ev, count)", "return ev",
      ["tests/test_mechanisms_clustering.py::test_clustering_events_match_the_plan"],
      "SecPE's clustering (two Gaussian releases) accounted as one"),
    M("laplace-event-half", "accounting", P + "privacy/events.py",
      "return dp_accounting.LaplaceDpEvent(noise_multiplier=0.0 if math.isinf(e) else 1.0 / e)",
      "return dp_accounting.LaplaceDpEvent(noise_multiplier=0.0 if math.isinf(e) else 2.0 / e)",
      ["tests/test_dpkps_core.py::test_event_is_the_data_free_factory_and_composes"]),
    M("ledger-refusal-removed", "accounting", P + "privacy/ledger.py",
      "            if spent[\"exceeded\"]:\n                raise BudgetExceededError(",
      "            if False:\n                raise BudgetExceededError(",
      ["tests/test_privacy_ledger.py::test_calibrated_sigma_passes_and_one_more_is_refused_before_data"],
      "a release over the budget is recorded instead of refused"),
    M("ledger-dp-budget-doubled", "accounting", P + "privacy/ledger.py",
      "\"exceeded\": bool(eps > b.epsilon)}", "\"exceeded\": bool(eps > 2 * b.epsilon)}",
      ["tests/test_privacy_ledger.py::test_calibrated_sigma_passes_and_one_more_is_refused_before_data"]),
    M("pure-epsilon-composition-max", "accounting", P + "privacy/pure.py",
      "return math.fsum(pure_epsilon(e) for e in event.events)", "return max(pure_epsilon(e) for e in event.events)",
      ["tests/test_dpkps_core.py::test_event_is_the_data_free_factory_and_composes"],
      "pure ε of a composition taken as the largest part instead of the sum"),
    M("calibration-returns-below-target", "accounting", P + "privacy/calibration.py",
      "    s = hi * (1 + SAFETY)\n    for _ in range(6):\n        if gap(s) <= 0:\n            return s",
      "    s = hi * 0.95\n    for _ in range(6):\n        if True:\n            return s",
      ["tests/test_privacy_calibration.py::test_dp_round_trip"], "the calibrated σ 5 % below the one that meets the target"),
    M("budget-split-shares-of-mu", "accounting", P + "privacy/budget.py",
      "return cls(\"gdp\", float(mu), tuple((str(k), float(v) * float(mu) ** 2) for k, v in shares.items()))",
      "return cls(\"gdp\", float(mu), tuple((str(k), float(v) * float(mu)) for k, v in shares.items()))",
      ["tests/test_privacy_budget_split.py::test_gdp_parts_are_shares_of_mu_squared"], "shares of μ instead of μ²: the parts compose to more than μ"),
    M("secret-blowup-ignores-compositions", "accounting", P + "privacy/secretnoise.py",
      "    return blowup_of(self_composed(ev, compositions), p)",
      "    return blowup_of(ev, p)",
      ["tests/test_privacy_secret_noise.py::test_secret_noise_paper_mode_and_events"]),
    # ------------------------------------------------------------------------------------------------ guard
    # (the rules that stay: a whole record in a prompt, a private-only 8-gram, a detected secret value no public
    # text holds, and order — a generator's echo after the prompt excuses nothing)
    M("guard-long-record-missed", "guard", P + "guard.py",
      "                    if i + L <= W and grams[i + L - n] in self._tails:",
      "                    if False:",
      [G + "test_the_whole_record_check_alone_catches_a_record_whose_every_8gram_is_public"],
      "a whole private record of ≥ 8 public words, verbatim in a prompt, passes the audit"),
    M("guard-short-record-missed", "guard", P + "guard.py",
      "                for L in self._first_word.get(wh, ()):\n                    if i + L <= W:",
      "                for L in self._first_word.get(wh, ()):\n                    if False:",
      [G + "test_a_short_private_record_inside_a_prompt_is_flagged"]),
    M("guard-record-hits-not-counted", "guard", P + "guard.py",
      "        record = bool(found)\n", "        record = False\n",
      [G + "test_a_long_private_record_of_ordinary_words_verbatim_in_a_prompt_is_flagged"]),
    M("guard-public-word-ngrams-dropped", "guard", P + "guard.py",
      "                (self._grams_rare if any(rare[j:j + n]) else self._grams_only)[g] = i",
      "                if any(rare[j:j + n]):\n                    self._grams_rare[g] = i",
      [G + "test_any_private_8gram_that_no_public_text_holds_is_flagged"],
      "only 8-grams holding a private-only word are flagged (the rule before issue 21)"),
    M("guard-ngram-hits-not-counted", "guard", P + "guard.py",
      "        res.ngram_hits += bool(kept)", "        res.ngram_hits += 0",
      [G + "test_any_private_8gram_that_no_public_text_holds_is_flagged"]),
    M("guard-secret-values-ignored", "guard", P + "guard.py",
      "        private = found - self.public_secrets\n", "        private = set()\n",
      [G + "test_detected_secret_values_are_found_in_prompts_and_synthetic_text"],
      "a detected secret value no public text holds passes in prompts and in the output"),
    M("guard-clean-ignores-secrets", "guard", P + "guard.py",
      "return self.record_hits == 0 and self.ngram_hits == 0 and self.secret_hits == 0",
      "return self.record_hits == 0 and self.ngram_hits == 0",
      [G + "test_detected_secret_values_are_found_in_prompts_and_synthetic_text"]),
    M("guard-echo-after-the-prompt-excuses", "guard", P + "guard.py",
      "return line is not None and self._generated.get(key, line) < line",
      "return line is not None and key in self._generated",
      [G + "test_a_private_8gram_echoed_by_a_generator_after_the_prompt_is_still_flagged"],
      "order: a private text put into a prompt is excused when a generator echoes it afterwards"),
    M("guard-generated-memorised-record-excused", "guard", P + "guard.py",
      "elif ((L < n or self._public_chain(grams, i, L)) and self._explained_at(h, line)) or (",
      "elif self._explained_at(h, line) or (",
      [G + "test_a_long_record_a_generator_wrote_from_public_ngrams_is_explained_one_with_a_private_ngram_is_not",
       G + "test_generated_text_never_excuses_a_whole_record_or_a_secret"],
      "a long record a generator wrote is excused even with an 8-gram no public text holds (a memorised record)"),
    M("guard-any-generator-excuses-long-records", "guard", P + "guard.py",
      "                if public_model:  # a model trained on checked public text",
      "                if True:  # a model trained on checked public text",
      [G + "test_a_model_trained_on_checked_public_text_writes_nothing_private_however_long"],
      "output of any generator (an API model that may have memorised the records) excuses a long private record"),
    M("guard-output-not-scanned", "guard", P + "guard.py",
      "            if self._private_secrets(self.secrets_in(t), res):",
      "            if self._private_secrets(set(), res):",
      [G + "test_detected_secret_values_are_found_in_prompts_and_synthetic_text"],
      "the synthetic output is never scanned for detected secret values"),
    # (not a mutant: "a generator's output excuses a long record" — the guard enforces it twice, in note_generated
    # (only records under n words are noted) and in _audit (L < n), so changing either alone is equivalent)
    # ------------------------------------------------------------------------------------------------ statement
    M("statement-private-after-failed-prompt-audit", "statement", P + "methods/base.py",
      "        if not audit.clean:\n            private = False\n",
      "        if not audit.clean:\n            pass\n",
      [MC + "test_a_leaked_prompt_makes_the_statement_say_not_private[augpe]"],
      "issue 36: a run whose prompt audit failed still says private: true"),
    M("statement-private-after-failed-output-audit", "statement", P + "methods/base.py",
      "        if not output_clean:\n            private = False\n",
      "        if not output_clean:\n            pass\n",
      [MC + "test_a_detected_secret_value_in_the_output_makes_the_statement_say_not_private[secpe]"],
      "issue 36: a run whose output holds a secret value still says private"),
    M("statement-private-without-noise", "statement", P + "methods/base.py",
      "            private = False\n            headline = f\"NOT PRIVATE: at least one release was made without noise",
      "            headline = f\"NOT PRIVATE: at least one release was made without noise",
      [MC + "test_a_release_without_noise_makes_the_statement_say_not_private[augpe]"]),
    M("statement-private-with-reproducible-noise", "statement", P + "methods/base.py",
      "        if reproducible:\n            private = False\n",
      "        if reproducible:\n            pass\n",
      ["tests/test_privacy_statement.py::test_reproducible_noise_says_not_private_first"]),
    # ------------------------------------------------------------------------------------------------ release scan
    M("scan-digit-threshold-plus-3", "release_scan", P + "evaluate/release_scan.py",
      "            if digits > RELEASE_DIGITS:", "            if digits > RELEASE_DIGITS + 3:",
      [RS + "test_a_raw_value_written_in_text_with_more_digits_than_a_release_keeps_is_caught"],
      "issue 36 survivor 3"),
    M("scan-timing-suffix-seconds-dropped", "release_scan", P + "evaluate/release_scan.py",
      "_TIMING_SUFFIXES = (\"_seconds\", \"_secs\",", "_TIMING_SUFFIXES = (\"_secs\",",
      [RS + "test_every_timing_key_and_suffix_is_caught"], "issue 36 survivor 4"),
    M("scan-timing-suffixes-ignored", "release_scan", P + "evaluate/release_scan.py",
      "            if low in _TIMING_KEYS or low.endswith(_TIMING_SUFFIXES):\n                self.add(file, \"timing\", "
      "path, v,",
      "            if low in _TIMING_KEYS:\n                self.add(file, \"timing\", path, v,",
      [RS + "test_every_timing_key_and_suffix_is_caught"]),
    M("scan-unrounded-at-7-digits", "release_scan", P + "evaluate/release_scan.py",
      "return math.isfinite(x) and x != 0 and round_release(x) != x",
      "return math.isfinite(x) and x != 0 and round_release(x, RELEASE_DIGITS + 3) != x",
      [RS + "test_an_unrounded_float_in_json_is_caught_but_a_rounded_one_is_not"]),
    M("scan-privacy-json-released-exempt", "release_scan", P + "evaluate/release_scan.py",
      "precision_rule_at=lambda p: p == \"released\" or p.startswith(\"released.\"))",
      "precision_rule_at=lambda p: False)",
      [RS + "test_privacy_json_holds_unrounded_parameters_but_not_unrounded_released_values"]),
    M("scan-private-count-threshold", "release_scan", P + "evaluate/release_scan.py",
      "if n >= min_count and n not in public}", "if n >= 3 * min_count and n not in public}",
      [RS + "test_an_exact_private_count_is_caught_unless_a_public_size_explains_it"]),
    M("scan-unix-time-range", "release_scan", P + "evaluate/release_scan.py",
      "if low == \"t\" and 1e9 <= x <= 1e10:", "if low == \"t\" and 1e10 <= x <= 1e11:",
      [RS + "test_time_stamps_are_caught"]),
    M("scan-iso-date-in-json-ignored", "release_scan", P + "evaluate/release_scan.py",
      "if not content and _ISO.search(v):", "if False:",
      [RS + "test_time_stamps_are_caught"]),
    M("scan-timing-table-header-ignored", "release_scan", P + "evaluate/release_scan.py",
      "            if _TIMING_WORDS.search(label):", "            if False:",
      [RS + "test_a_mapping_of_stage_timings_and_a_timing_table_header_are_caught"]),
    M("scan-unreadable-skipped", "release_scan", P + "evaluate/release_scan.py",
      "            self.add(rel, \"unreadable\", \"file\", path.name,",
      "            return\n            self.add(rel, \"unreadable\", \"file\", path.name,",
      [RS + "test_local_paths_and_binary_files_are_caught"]),
    M("scan-private-folders-at-any-depth", "release_scan", P + "evaluate/release_scan.py",
      "        if here == root:\n            dirnames[:] = [d for d in dirnames if d != \"private\"]",
      "        if True:\n            dirnames[:] = [d for d in dirnames if d != \"private\"]",
      [RS + "test_local_paths_and_binary_files_are_caught"],
      "a folder named private anywhere (not only the run's private/) escapes the scan"),
]


# ------------------------------------------------------------------------------------------------ the runner


@dataclass
class Result:
    name: str
    verdict: str  # killed | survived | stale | error | timeout
    seconds: float
    detail: str = ""


def committed(path: str, rev: str = "HEAD") -> str:
    """The file as committed at ``rev`` (what the copies hold by default)."""
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


def source(path: str, working_tree: bool, rev: str = "HEAD") -> str:
    return (ROOT / path).read_text(encoding="utf-8") if working_tree else committed(path, rev)


def stale_reason(m: Mutant, text: str) -> str | None:
    """Why ``m`` cannot be applied to ``text`` (None: its snippet is there exactly once)."""
    if not m.snippet:
        return "no snippet"
    n = text.count(m.snippet)
    if n != 1:
        return f"snippet found {n} times in {m.file}"
    if m.snippet == m.replacement:
        return "replacement equals the snippet"
    return None


def make_copy(dest: Path, working_tree: bool, rev: str = "HEAD") -> None:
    """The repository's files that tests need, from ``rev`` (``git archive``) or from the working tree."""
    dest.mkdir(parents=True, exist_ok=True)
    present = [p for p in COPY if (ROOT / p).exists()]
    if working_tree:
        for p in present:
            s = ROOT / p
            if s.is_dir():
                shutil.copytree(s, dest / p, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(s, dest / p)
        return
    tracked = subprocess.run(["git", "ls-tree", "--name-only", rev, *present], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    data = subprocess.run(["git", "archive", "--format=tar", rev, *tracked], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


PLUGIN = '''"""Loaded into a mutant's pytest: privtext must be the copy's, never the shared checkout's."""
import os
from pathlib import Path


def pytest_configure(config):
    import privtext

    root = Path(os.environ["PRIVTEXT_MUTANT_ROOT"]).resolve()
    here = Path(privtext.__file__).resolve()
    if root not in here.parents:
        raise RuntimeError(f"import privtext resolved to {here}, not to the mutant's copy under {root}")
'''


def pytest_env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "src"), str(copy)])
    env["PRIVTEXT_MUTANT_ROOT"] = str(copy)
    shared = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data"))
    if shared.is_dir():
        env["PRIVTEXT_SHARED_DATA"] = str(shared)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def run_tests(copy: Path, tests: Sequence[str], timeout: float, *, first_failure: bool = True
              ) -> tuple[int | None, str]:
    (copy / "_mutant_check.py").write_text(PLUGIN)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_mutant_check", "--no-header",
           "-rfE", *(["-x"] if first_failure else []), *tests]
    try:
        p = subprocess.run(cmd, cwd=copy, env=pytest_env(copy), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out
    return p.returncode, p.stdout + p.stderr


def _failed(out: str) -> list[str]:
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)


def run_mutant(m: Mutant, *, working_tree: bool, rev: str, timeout: float, keep: bool,
               baseline_bad: dict[str, str]) -> Result:
    t0 = time.perf_counter()
    text = source(m.file, working_tree, rev)
    why = stale_reason(m, text)
    if why:
        return Result(m.name, "stale", 0.0, why)
    bad = [t for t in m.tests if t in baseline_bad]
    if bad:
        return Result(m.name, "error", 0.0, f"{bad[0]}: {baseline_bad[bad[0]]}")
    tmp = Path(tempfile.mkdtemp(prefix=f"privtext-mutant-{m.name}-"))
    try:
        copy = tmp / "repo"
        make_copy(copy, working_tree, rev)
        target = copy / m.file
        target.write_text(text.replace(m.snippet, m.replacement, 1), encoding="utf-8")
        rc, out = run_tests(copy, m.tests, timeout)
        secs = time.perf_counter() - t0
        if rc is None:
            return Result(m.name, "timeout", secs, f"past {timeout:.0f} s")
        if rc == 0:
            return Result(m.name, "survived", secs, f"{len(m.tests)} test id(s) passed")
        failed = _failed(out)
        if rc == 1 and failed:
            return Result(m.name, "killed", secs, f"by {failed[0]}")
        tail = " | ".join(line for line in out.strip().splitlines()[-3:])
        return Result(m.name, "error", secs, f"pytest exit {rc}: {tail[:300]}")
    finally:
        if keep:
            print(f"  kept {tmp}", flush=True)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _covers(t: str, f: str) -> bool:
    """Whether the named test ``t`` includes the failed node id or file ``f``."""
    return f == t or f.startswith((t + "[", t + "::")) or t.startswith((f + "::", f + "["))


def baseline(ms: Sequence[Mutant], *, working_tree: bool, rev: str, timeout: float
             ) -> tuple[dict[str, str], float]:
    """Run every test the selected mutants name on the unmutated copy. Returns {test id: why it is unusable} (it
    fails unmutated, is not found, or its file does not collect) and the seconds taken."""
    t0 = time.perf_counter()
    todo = sorted({t for m in ms for t in m.tests})
    bad: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="privtext-mutant-baseline-") as tmp:
        copy = Path(tmp) / "repo"
        make_copy(copy, working_tree, rev)
        for _ in range(4):
            if not todo:
                break
            rc, out = run_tests(copy, todo, timeout, first_failure=False)
            if rc == 0:
                break
            if rc is None:
                bad.update({t: "the baseline timed out" for t in todo})
                break
            missing = [x.removeprefix(str(copy) + "/") for x in
                       re.findall(r"(?:found no collectors for|not found:) (\S+)", out)]
            failed = _failed(out) + missing
            hit = {t for t in todo for f in failed if _covers(t, f)}
            if not hit:
                bad.update({t: f"pytest exit {rc}: " + " | ".join(out.strip().splitlines()[-2:]) for t in todo})
                break
            for t in hit:
                why = "not found or does not collect" if any(_covers(t, f) for f in missing) or rc != 1 else \
                    "fails on the unmutated tree"
                bad[t] = why
            if rc == 1:
                break  # a complete run: everything else passed
            todo = [t for t in todo if t not in hit]
    return bad, time.perf_counter() - t0


def select(names: Sequence[str]) -> list[Mutant]:
    if not names:
        return list(MUTANTS)
    out = [m for m in MUTANTS if any(fnmatch.fnmatchcase(m.name, pat) for pat in names)]
    unknown = [pat for pat in names if not any(fnmatch.fnmatchcase(m.name, pat) for m in MUTANTS)]
    if unknown:
        raise SystemExit(f"no mutant matches {', '.join(unknown)} (see --list)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="mutant names or glob patterns (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="mutants at once (default 1)")
    ap.add_argument("--list", action="store_true", help="list the mutants (stale ones marked) and exit")
    ap.add_argument("--working-tree", action="store_true", help="copy the working tree instead of a commit")
    ap.add_argument("--rev", default="HEAD", help="the commit the copies hold (default HEAD)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant's tests (default 900)")
    ap.add_argument("--no-baseline", action="store_true", help="skip running the named tests unmutated first")
    ap.add_argument("--keep", action="store_true", help="keep each mutant's copy (prints its path)")
    ap.add_argument("--json", type=Path, help="write the verdicts here")
    a = ap.parse_args(argv)
    ms = select(a.names)
    if a.list:
        for m in ms:
            why = stale_reason(m, source(m.file, a.working_tree, a.rev))
            print(f"{m.name:48s} {m.rule:13s} {m.file.removeprefix(P)}{'  STALE: ' + why if why else ''}")
            for t in m.tests:
                print(f"{'':50s}{t}")
        print(f"{len(ms)} mutants")
        return 0
    t0 = time.perf_counter()
    tree = "working tree" if a.working_tree else f"{a.rev} {committed_head(a.rev)}"
    print(f"{len(ms)} mutants against {tree}; -j {a.jobs}; load {os.getloadavg()[0]:.2f}", flush=True)
    bad: dict[str, str] = {}
    if not a.no_baseline:
        bad, secs = baseline(ms, working_tree=a.working_tree, rev=a.rev, timeout=a.timeout)
        print(f"baseline (every named test, unmutated): {'ok' if not bad else 'UNUSABLE TESTS:'} in {secs:.0f} s",
              flush=True)
        for t, why in sorted(bad.items()):
            print(f"  {t}: {why}", flush=True)
    results: list[Result] = []

    def one(m: Mutant) -> Result:
        r = run_mutant(m, working_tree=a.working_tree, rev=a.rev, timeout=a.timeout, keep=a.keep, baseline_bad=bad)
        print(f"{r.verdict:8s} {r.name:48s} {r.seconds:6.0f} s  {r.detail}", flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        results = list(ex.map(one, ms))
    total = time.perf_counter() - t0
    killed = [r for r in results if r.verdict == "killed"]
    others = [r for r in results if r.verdict != "killed"]
    print(f"\nscore: {len(killed)}/{len(results)} killed ({100 * len(killed) / max(len(results), 1):.1f} %) in "
          f"{total / 60:.1f} min (load {os.getloadavg()[0]:.2f})")
    for v in ("survived", "stale", "error", "timeout"):
        rs = [r for r in others if r.verdict == v]
        if rs:
            print(f"{v}: " + ", ".join(r.name for r in rs))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"tree": tree, "seconds": round(total, 1), "results": [asdict(r) for r in
                                                                                            results]}, indent=1))
    return 0 if not others else 1


def committed_head(rev: str = "HEAD") -> str:
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
