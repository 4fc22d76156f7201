"""A sixth method, added the way docs/architecture.md says a method is added, and run through the contract suite.

``PublicOnly`` is the smallest honest method: the no-private-signal control. It reads no private record and
releases nothing: its records are samples of the public generator, as many per label as the public label weights
give. It is registered from this test (``METHODS.register``) and declares its :class:`MethodDescription`; nothing
under ``src/`` changes for it. As a method of the library it would be ``src/privtext/methods/public_only/``
(``__init__.py`` and ``method.py``, the class below) and one registration line in ``src/privtext/methods/
__init__.py`` — the files :data:`FILES_A_METHOD_TOUCHES` lists.

It then runs through the generic checks of ``tests/test_method_contract.py`` (the run skeleton is not overridden,
it records no release and draws no noise, no prompt holds private text, a planted leak makes its statement say NOT
PRIVATE, privacy.json depends on the private data only through released values, no file outside ``private/``
holds a kept value, the release scan finds nothing, its description is what its run did, its control resolves),
and through the shared code that reads descriptions instead of names: the configuration (its section is checked
against the registry, its options by its ``Options``; ``privacy: {epsilon}`` alone is refused for it), the
report, the evaluation and the demo's list of methods. The mechanism audit (audit/derive.py, audit/calibrate.py)
derives relations and noise per method on purpose, independently of the methods' code: it refuses the new method
until its derivation is written there (:data:`FILES_ITS_AUDIT_TOUCHES`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import Field

from privtext.backends import BackendOptions
from privtext.config import config_from_dict
from privtext.errors import ConfigError
from privtext.methods import METHODS
from privtext.methods.base import MethodDescription, MethodRun, RunContext, StatementParts, Synthetic
from tests import test_method_contract as contract

NAME = "public-only"
#: the files under src/ a sixth method that reuses the shared release kinds (here: none) touches to run; the
#: mechanism audit (``privtext audit RUN``) derives every run's relation and noise independently of the methods'
#: code, so auditing its runs adds its relation to audit/derive.py (and its noise to audit/calibrate.py)
FILES_A_METHOD_TOUCHES = ("src/privtext/methods/public_only/__init__.py", "src/privtext/methods/public_only/method.py",
                          "src/privtext/methods/__init__.py (one METHODS.register line)")
FILES_ITS_AUDIT_TOUCHES = ("src/privtext/audit/derive.py (relation_of)", "src/privtext/audit/calibrate.py")


class PublicOnlyOptions(BackendOptions):
    batch: int = Field(default=16, gt=0, description="texts per generator call")


class PublicOnly(MethodRun):
    """The no-private-signal control: ``synthesis.num_samples`` samples of the public generator, split over the
    labels by the public label weights; no private record is read by the generation, nothing is released."""

    name: ClassVar[str] = NAME
    description: ClassVar[MethodDescription] = MethodDescription(
        section=NAME, title="public-only control", guarantee="approximate", audit_game="membership",
        unit="one shot", progress_words="one pass of the public generator, no private data read",
        release_words="nothing (no private record reaches the output)",
        zero_shot_words="its whole output is generator-only: it is a zero-shot run",
        control_words="it is its own control")
    Options = PublicOnlyOptions
    options: PublicOnlyOptions
    uses_embedder: ClassVar[bool] = False

    def generate(self, ctx: RunContext) -> Synthetic:
        counts = ctx.label_counts(None)  # public weights; a DP label histogram is refused (no release)
        texts: list[str] = []
        groups: list[int] = []
        for g, n in enumerate(counts):
            rng = self.rng(NAME, g)
            for s in range(0, int(n), self.options.batch):
                out = ctx.generator.random(ctx.space.info(g) if ctx.space.columns else None,
                                           min(self.options.batch, int(n) - s), rng=rng)
                texts += out
                groups += [g] * len(out)
        return Synthetic(texts=texts, groups=np.asarray(groups, dtype=np.int64))

    def statement_parts(self, ledger: Any) -> StatementParts:
        b = self.budget
        s = ledger.spent()
        unit = self.relation.words()
        guarantee = {"kind": b.kind, "budget": b.to_dict(), "neighbouring_relation": unit, "releases": len(ledger),
                     "spent": {"epsilon": s["epsilon"], "delta": b.delta}}
        return StatementParts(
            guarantee=guarantee,
            headline=(f"({s['epsilon']:.4g}, {b.delta:g})-differential privacy for {unit}: the records are "
                      "samples of the public generator alone, no private record reaches them"),
            parameters={"num_samples": self.config.synthesis.num_samples, "batch": self.options.batch},
            treated_as_public=["the public corpus (generator training text, label values and weights)"])

    def statement_parameters(self) -> dict[str, Any]:
        return {}


@pytest.fixture(scope="module")
def sixth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """PublicOnly registered (and its contract case added) for this module only, and the contract's runs folder."""
    METHODS.register(NAME, PublicOnly)
    case = contract.Case("public_only", NAME, {"privacy": {"epsilon": 4.0, "delta": 1e-5},
                                               NAME: {"batch": 5}}, {}, "adding or removing one private record")
    contract.CASES.append(case)
    contract.CASE[case.name] = case
    try:
        yield tmp_path_factory.mktemp("sixth")
    finally:
        contract.CASES.remove(case)
        del contract.CASE[case.name]
        del METHODS._entries[NAME]
        for key in [k for k in contract._RUNS if k[0] == case.name]:
            del contract._RUNS[key]


CONTRACT_CHECKS = [
    "test_every_recorded_sensitivity_is_the_relations",
    "test_every_release_drew_the_noise_its_ledger_entry_states",
    "test_noise_is_in_the_path_users_run_and_comes_from_os_entropy",
    "test_no_prompt_holds_private_text",
    "test_no_file_outside_private_holds_an_unrounded_released_value",
    "test_the_release_scan_finds_nothing_outside_private",
    "test_the_method_description_is_what_its_run_did",
]


def test_it_is_registered_and_runs_on_the_skeleton(sixth: Path) -> None:
    contract.test_no_method_overrides_the_run_skeleton(NAME)
    contract.test_every_method_declares_what_the_shared_code_needs(NAME)
    assert contract.test_every_registered_method_has_a_case() is None


@pytest.mark.parametrize("check", CONTRACT_CHECKS)
def test_the_contract_holds_for_it(check: str, sixth: Path) -> None:
    getattr(contract, check)("public_only", sixth)


def test_a_leak_and_the_private_data_show_in_its_statement_as_for_every_method(
        sixth: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contract.test_a_leaked_prompt_makes_the_statement_say_not_private("public_only", tmp_path / "leak", monkeypatch)
    contract.test_the_statement_depends_on_private_data_only_through_released_values("public_only",
                                                                                      tmp_path / "two")
    contract.test_the_declared_control_is_a_configuration_that_passes_the_checks("public_only", tmp_path / "ctl")


def test_the_shared_code_reads_its_description(sixth: Path, tmp_path: Path) -> None:
    """Configuration, report, evaluation, audit and demo handle the new method without an edit: its section is
    a registered one (a typo of it is suggested), its options are its Options', pure ε alone is refused for it; the
    report and the evaluation speak of its one shot; the demo does not offer it (it declares no demo settings).
    The mechanism audit alone names methods (its derivations stay independent of their code) and refuses it."""
    from privtext.audit.run import audit_run
    from privtext.data import write_corpus
    from privtext.demo import demo_methods
    from privtext.evaluate import evaluate_run
    from privtext.report import build_report
    from privtext.runner import resolve_config

    ran = contract._ran(contract.CASE["public_only"], sixth)
    base = _yaml(ran.root / "private" / "config.yaml")  # the run's resolved configuration
    cfg, cls = resolve_config(config_from_dict(base))
    assert cls is PublicOnly and cfg.section(NAME) == {"batch": 5}
    with pytest.raises(ConfigError, match=r"public-only: unknown option 'bacth' \(did you mean 'batch'\?\)"):
        resolve_config(config_from_dict({**base, NAME: {"bacth": 5}}))
    with pytest.raises(ConfigError, match=r"unknown key 'public-onyl' \(did you mean 'public-only'\?\)"):
        resolve_config(config_from_dict({**base, "public-onyl": {}}))
    with pytest.raises(ConfigError, match=r"needs privacy\.delta.*public-only's guarantee is approximate"):
        resolve_config(config_from_dict({**base, "privacy": {"epsilon": 4.0}}))

    real = tmp_path / "real.csv"
    write_corpus(ran.private, real)
    ev = evaluate_run(ran.root, real=real, quiet=True, classifiers=("tfidf-logreg",))
    assert ev["progress_unit"] == "one shot" and "zero_shot" not in ev["train_sets"]
    assert "no zero-shot baseline: its whole output is generator-only: it is a zero-shot run" in ev["notes"]
    html = build_report(ran.root).read_text(encoding="utf-8")
    assert "method <b>public-only</b> · one pass of the public generator, no private data read</p>" in html
    assert "public-only control takes no votes: it releases nothing (no private record reaches the output)" in html
    assert "public-only control is not iterative" in html and "0 iterations" not in html
    # the audit derives each release's Δ and noise on its own, independently of the methods' code (on purpose):
    # a new method adds its neighbouring relation (and noise formula) to audit/derive.py and audit/calibrate.py
    with pytest.raises(ConfigError, match="the audit has no neighbouring relation for method 'public-only'"):
        audit_run(ran.root, attack=False)
    assert NAME not in demo_methods()


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))
