"""Shared fixtures. Tests that need ../shared/data skip cleanly when it is absent."""

from __future__ import annotations

import os
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
