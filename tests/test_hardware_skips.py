"""Tests that need AVX512_BF16 or AMX skip cleanly on a CPU without them (issue 25, item 3): the skip decision
is read from the CPU's flags, and the issue's own failing test is skipped when the suite runs as on such a CPU
(``PRIVTEXT_TEST_WITHOUT_BF16=1``, conftest)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privtext.backends import hardware

from .conftest import WITHOUT_BF16_ENV, bf16_mark, require_bf16
from .test_embed_auto import EPYC, OLD, SPR

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("cpuinfo", "skips"), [(OLD, True), (EPYC, False), (SPR, False),
                                                 ("flags\t\t: fpu avx512_bf16x\n", True), ("", True)])
def test_the_mark_skips_exactly_where_bf16_is_missing(cpuinfo: str, skips: bool) -> None:
    mark = bf16_mark(cpuinfo).mark
    assert mark.name == "skipif" and mark.args[0] is skips


def test_require_bf16_skips_naming_the_cpu_without_it() -> None:
    with pytest.raises(pytest.skip.Exception, match="needs a CPU with AVX512_BF16 or AMX; this one: Intel Xeon"):
        require_bf16(OLD)
    require_bf16(EPYC)  # no skip


def test_this_machine_is_read_through_the_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mark and the embedder's choice both read hardware._machine_cpuinfo (what the simulation replaces)."""
    from privtext.embed import auto
    from privtext.embed.st import STOptions

    monkeypatch.setattr(hardware, "_machine_cpuinfo", lambda: OLD)
    assert bf16_mark().mark.args[0] is True
    kind, why = auto.choose_runtime(STOptions(precision="bf16", runtime="auto"), cuda=False, openvino=True)
    assert kind == "tiered-fp32" and "no AVX512_BF16 or AMX" in why
    monkeypatch.setattr(hardware, "_machine_cpuinfo", lambda: SPR)
    assert bf16_mark().mark.args[0] is False


def test_the_issues_test_skips_on_a_cpu_without_bf16() -> None:
    """The test issue 25 saw fail on a CPU without AVX512_BF16/AMX, run as on such a CPU: skipped, not failed."""
    env = {**os.environ, WITHOUT_BF16_ENV: "1", "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                          "tests/test_embed_mixed.py::test_mixed_vectors_are_closer_to_fp32_than_bf16s",
                          "tests/test_embed_mixed.py::test_the_last_layers_run_in_fp32_and_the_others_in_bf16"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "2 skipped" in res.stdout and "needs a CPU with AVX512_BF16 or AMX" in res.stdout
