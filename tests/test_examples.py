"""Every example config in examples/ is valid as shipped: it parses, its method section validates, and where the
data it names is present (../shared/data) the run's preflight accepts it — so a user who follows
examples/README.md gets a run, not a config error."""

from __future__ import annotations

from pathlib import Path

import pytest

from privtext.config import load_config
from privtext.runner import preflight, resolve_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_examples_and_a_readme_listing_each() -> None:
    assert len(EXAMPLES) >= 4
    readme = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    for f in EXAMPLES:
        assert f"`{f.name}`" in readme, f"examples/README.md does not list {f.name}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_resolves(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples are run from the repository root
    config, cls = resolve_config(load_config(path))
    assert config.method in path.name.replace("-", "").replace(".yaml", "")
    local = [p for p in (config.data.private, config.data.public) if p and not str(p).startswith("hf:")]
    if not local:
        return  # hf: specs need the dataset in the local HF cache; nothing to read offline
    if not all(Path(p).exists() for p in local):
        pytest.skip(f"the data the example names is absent: {local}")
    preflight(config, cls)  # reads the corpora and checks columns and budget; raises on a bad example
