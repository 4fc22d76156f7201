"""What the Gaussian-vote methods (Aug-PE, WASP) share: the budget (a secret budget as μ-GDP, SecPE Eq 4), the
neighbouring relation (one record; a secret's group of k records; one party with its records) and the statement of
a (ε, δ)-DP / μ-GDP guarantee. The releases themselves are each method's (Aug-PE's scorers, WASP's rounds), and so
is how it generates: :class:`DPVoteMethod` is a :class:`~privtext.methods.base.MethodRun`, not an evolution loop
(Aug-PE adds :class:`~privtext.methods.base.EvolutionMethod`; WASP writes its own rounds)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..privacy.relation import NeighbouringRelation
from .base import Inputs, MethodRun, StatementParts
from .parties import HoldsParties

if TYPE_CHECKING:
    from ..privacy.budget import Budget
    from ..privacy.ledger import Ledger
    from ..privacy.statement import Assumption
    from ..secrets.base import SecretDetector
    from ..secrets.matrix import SecretMatrix


class DPVoteMethod(HoldsParties, MethodRun):
    """A method whose releases are Gaussian vote histograms with noise multiplier :attr:`sigma` (and optionally a
    Gaussian label histogram with :attr:`label_sigma`): its budget, relation and statement."""

    group_size: int | None = None  # k under secret-group sensitivity
    released_rounds: list[dict[str, Any]] | None = None  # parties: survivors and sum noise std per vote (public)
    sigma: float = 0.0
    label_sigma: float | None = None
    #: the secret detector of ``sensitivity: secret_group`` (built by :meth:`split_data`)
    detector: SecretDetector | None = None

    def budget_of(self) -> Budget:
        from ..privacy import Budget, mu_from_pr

        p = self.config.privacy
        if p.kind == "secret":
            assert p.secret is not None
            return Budget.gdp(float(mu_from_pr(p.secret.p, p.secret.r)))
        return Budget.from_config(p)

    # ------------------------------------------------------------------ the secrets and the relation
    def secret_groups(self) -> bool:
        """Whether the relation is a secret's group of k records (``sensitivity: secret_group``, Aug-PE's)."""
        return getattr(self.options, "sensitivity", "record") == "secret_group"

    def split_data(self, inputs: Inputs) -> Inputs:
        """With ``sensitivity: secret_group`` the detector runs here, and its secrets come back in
        ``Inputs.secrets`` (the guard scans every prompt and the output for their values; :meth:`neighbouring` finds
        k from them). With ``parties.files`` each record's party is logged."""
        if inputs.party_of is not None:
            parties = len(np.unique(inputs.party_of))
            self.log(f"parties: {parties} files, {len(inputs.private)} private records in all")
        if not self.secret_groups():
            return inputs
        from ..secrets import build_detector

        with self.metrics.stage("secret_detection"):
            self.detector = build_detector(self.options.detector)
            matrix = self.detector.detect(list(inputs.private.texts))
        return replace(inputs, secrets=matrix)

    def neighbouring(self, inputs: Inputs) -> NeighbouringRelation:
        """add/remove one record; a secret's group of k records (``sensitivity: secret_group``: k found here from
        the secrets :meth:`split_data` detected, before the first release); one party with its records
        (``parties.level: user``)."""
        pt = self.options.parties
        if pt is not None and pt.level == "user":
            return NeighbouringRelation.user(pt.max_records, normalised=pt.normalise)
        if self.secret_groups():
            assert inputs.secrets is not None  # split_data detected them
            return NeighbouringRelation.secret_group(self.secret_group_size(inputs.secrets))
        return NeighbouringRelation.add_remove()

    def secret_group_size(self, matrix: SecretMatrix) -> int:
        """k: the most private records any one detected secret occurs in (private, listed as an assumption)."""
        per_secret = np.asarray(matrix.matrix.sum(axis=0)).ravel()
        k = max(int(per_secret.max()) if per_secret.size else 1, 1)
        self.group_size = k
        self.diagnostic("secret_groups", None, {"group_size": k, "secrets": int(matrix.matrix.shape[1]),
                                                 "holders_per_secret_max": k})
        self.log(f"secret-group relation: the most-repeated secret sits in {k} records (Δ = {k} per vote)")
        return k

    def vocabulary_prompts_on(self) -> bool:
        """Whether the initial prompts hold DP-vocabulary terms (Aug-PE's option; none elsewhere)."""
        return False

    def vocabulary_epsilon(self) -> float | None:
        """ε of the DP vocabulary those prompts hold (None without them)."""
        return None

    def statement_parts(self, ledger: Ledger) -> StatementParts:
        """Aug-PE's guarantee in words. Numbers: the budget (configured), ε/μ spent (a function of the
        data-independent events), σ (from the budget); with secret-group sensitivity the group size k is listed as
        an assumption."""
        from ..privacy import mu_from_pr, r_from_mu_p
        from ..privacy.statement import Assumption

        p = self.config.privacy
        b = self.budget
        s = ledger.spent()
        n = len(ledger)
        k = self.group_size
        unit = self.relation.words()
        assumed: list[Assumption] = []
        coverage: list[str] = []
        if k is not None:
            assumed.append(Assumption(
                name="secret_group_size", value=k,
                why="the most records any one detected secret occurs in; it sets the sensitivity Δ = k of every "
                    "release (SecPE's group-sensitivity GDP baseline) and is computed from the private data "
                    "without noise"))
            coverage.append("Secrets the detector did not find, and records holding none, get only the group "
                            "guarantee's protection as members of some group of at most k records.")
        guarantee: dict[str, Any] = {"kind": b.kind, "budget": b.to_dict(), "neighbouring_relation": unit,
                                     "releases": n}
        if k is not None:
            from ..secrets import guarantee_structure

            structure = guarantee_structure(self.detector or self.options.detector)
            guarantee["conditional_on"] = structure["sentences"]  # k follows from which values are secrets
        if b.kind == "dp":
            guarantee["spent"] = {"epsilon": s["epsilon"], "delta": b.delta}
            head = f"({s['epsilon']:.4g}, {b.delta:g})-differential privacy for {unit} (budget ε = {b.epsilon:g})"
        elif b.kind == "gdp":
            guarantee["spent"] = {"mu": s["mu"], "epsilon_at_report_delta": s["epsilon_at_report_delta"],
                                  "report_delta": b.report_delta}
            head = (f"{s['mu']:.4g}-Gaussian differential privacy for {unit} (budget μ = {b.mu:g}; equivalently "
                    f"({s['epsilon_at_report_delta']:.4g}, {b.report_delta:g})-DP)")
            if p.kind == "secret":
                assert p.secret is not None
                mu = float(mu_from_pr(p.secret.p, p.secret.r))
                guarantee["from_secret_budget"] = {"p": p.secret.p, "r": p.secret.r, "mu": mu}
                if k is None:
                    r2 = float(r_from_mu_p(p.secret.p, 2 * mu))
                    coverage.append(
                        f"(p={p.secret.p:g}, r={p.secret.r:g})-secret protection follows (SecPE Eq 4) only for a "
                        f"secret held by ONE record; a secret repeated in k records is protected at μ·k-GDP (for "
                        f"k = 2 the posterior bound is r = {r2:.3g}); use augpe.sensitivity: secret_group to cover "
                        "repeated secrets.")
                else:
                    head += (f"; every detected secret gets (p={p.secret.p:g}, r={p.secret.r:g})-secret "
                             "protection (SecPE Eq 4 with group sensitivity)")
        else:
            guarantee["reference"] = {"epsilon_at_report_delta": s["epsilon_at_report_delta"],
                                      "report_delta": b.report_delta}
            head = (f"No privacy target was set (fixed noise multiplier σ = {self.sigma:g}); for reference the "
                    f"releases are ({s['epsilon_at_report_delta']:.4g}, {b.report_delta:g})-DP for {unit}")
        ld = self.config.synthesis.label_distribution
        public = ["the public corpus (generator training text, label values, zero-shot prompts)"]
        if self.vocabulary_prompts_on():
            public.append("the public vocabulary (words and phrases of the public corpus); the initial prompts hold "
                          "random terms of the released DP vocabulary and no class")
        if ld.kind == "public":
            public.append("the label distribution of the public corpus (samples per label)")
        elif ld.kind == "given":
            public.append("the label weights given in the configuration")
        parts = StatementParts(
            guarantee=guarantee, headline=head + f", over {n} noisy releases.",
            parameters={"noise_multiplier": self.sigma, "sensitivity": "record" if k is None else "secret_group",
                        **({"vocabulary_epsilon": self.vocabulary_epsilon()} if self.vocabulary_prompts_on()
                           else {}),
                        **({"label_noise_multiplier": self.label_sigma} if self.label_sigma else {})},
            assumed_public=assumed, treated_as_public=public, coverage=coverage)
        # no-op without parties; WASP's FuseGen baseline (feedback none) reads no votes, so states no bound
        return self.parties_statement(parts, votes=getattr(self.options, "feedback", "votes") == "votes",
                                      ledger=ledger)


__all__ = ["DPVoteMethod"]
