"""Shared fixtures. Tests that need ../shared/data skip cleanly when it is absent."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PRIVTEXT_SHARED_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PRIVTEXT_QUIET", "1")
# the user's private embedding cache (privtext.embed.private) and ONNX exports: a folder of this session, never ~/.cache
if not os.environ.get("PRIVTEXT_CACHE_HOME"):
    os.environ["PRIVTEXT_CACHE_HOME"] = tempfile.mkdtemp(prefix="privtext-test-cache-")
    atexit.register(shutil.rmtree, os.environ["PRIVTEXT_CACHE_HOME"], ignore_errors=True)


#: set to 1: the suite runs as on a CPU without AVX512_BF16/AMX (see _pretend_no_bf16)
WITHOUT_BF16_ENV = "PRIVTEXT_TEST_WITHOUT_BF16"


def _pretend_no_bf16() -> None:
    """``PRIVTEXT_TEST_WITHOUT_BF16=1``: privtext (:mod:`privtext.backends.hardware`) reads this CPU's flags without
    AVX512_BF16 and AMX-BF16, so on a bf16 machine the suite shows what a CPU without them sees: every test that
    needs them skips, every other passes (``tests/test_hardware_skips.py`` runs the issue's test that way)."""
    from privtext.backends import hardware

    text = re.sub(r"\b(?:" + "|".join(hardware.BF16_FLAGS) + r")\b", "", hardware._read_cpuinfo())
    hardware._machine_cpuinfo = lambda: text  # type: ignore[assignment]


if os.environ.get(WITHOUT_BF16_ENV, "") not in ("", "0"):
    _pretend_no_bf16()


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """AVX512_BF16 or AMX on this CPU (privtext.backends.hardware): what OpenVINO's and oneDNN's bf16 need."""
    from privtext.backends.hardware import has_fast_bf16

    return has_fast_bf16(cpuinfo)


def require_bf16(cpuinfo: str | None = None) -> None:
    """Skip the calling test on a CPU without AVX512_BF16 or AMX (bf16 there runs as fp32, or is refused)."""
    if not cpu_has_bf16(cpuinfo):
        from privtext.backends.hardware import cpu_summary

        pytest.skip(f"needs a CPU with AVX512_BF16 or AMX; this one: {cpu_summary(cpuinfo)}")


def bf16_mark(cpuinfo: str | None = None) -> pytest.MarkDecorator:
    """The skip mark of tests that need a bf16 CPU (this machine's when ``cpuinfo`` is None)."""
    return pytest.mark.skipif(not cpu_has_bf16(cpuinfo), reason="needs a CPU with AVX512_BF16 or AMX")


#: mark for tests that need a bf16 CPU: ``@needs_bf16``
needs_bf16 = bf16_mark()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data; skips the test when it is absent (a user's fresh machine)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def shared_file(*parts: str) -> Path:
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data file {p} not found")
    return p


@pytest.fixture(params=[0, 1, 2, 12345])
def any_seed(request: pytest.FixtureRequest) -> int:
    """Tests that must pass for any seed take this fixture (several seeds, one run each)."""
    return int(request.param)


@pytest.fixture
def rng(any_seed: int) -> np.random.Generator:
    return np.random.default_rng(any_seed)


def plant_in_first_prompt(monkeypatch: pytest.MonkeyPatch, text: str) -> list[bool]:
    """A planted leak: ``text`` appended to the first prompt any generator logs (``PromptLog.log``, which every
    generator calls before it sends a prompt). Returns a list that holds ``True`` once the prompt was planted, so
    the test can check the fault was reached."""
    from privtext.atomicio import PromptLog

    real, done = PromptLog.log, []

    def leaky(self, **kw):  # type: ignore[no-untyped-def]
        if not done:
            done.append(True)
            kw["prompt"] = f"{kw['prompt']} {text}"
        return real(self, **kw)

    monkeypatch.setattr(PromptLog, "log", leaky)
    return done


def toy_preference_pairs(subjects: int = 3) -> list:
    """Preference pairs over the tiny GPT-2's vocabulary (privtext.testing.tiny_lm): chosen the friendly / fresh
    sentence, rejected the same sentence slow / cold, for the first ``subjects`` of six subjects."""
    from privtext.learn.pairs import PreferencePair

    pool = [("the food", "today"), ("our waiter", "again"), ("the room", "as usual"), ("the coffee", "for us"),
            ("the staff", "in the end"), ("the pizza", "today")]
    return [PreferencePair(0, f"{s} was {good} {t} .", f"{s} was {bad} {t} .", 5.0, 1.0, "tiny", "test")
            for s, t in pool[:subjects] for good, bad in [("friendly", "slow"), ("fresh", "cold")]]


@pytest.fixture
def one_torch_thread():
    """torch on one thread for the test (restored after): small models train faster and reproducibly so."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight GPT-2 folder (2 layers, width 32) with a tokenizer trained in the test."""
    from privtext.testing.tiny_lm import make_tiny_gpt2

    return make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), n_embd=32, n_layer=2)
