"""``synthesis:`` (issue 37): the number of synthetic records and their label mix, read by every method, in one
method-neutral section. The old keys ``evolution.num_samples`` and ``evolution.label_distribution`` keep working:
the loader moves them with a deprecation note, and the same value at both places is read once; different values
are a ConfigError naming both keys."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from privtext.config import Config, ConfigDeprecationWarning, config_from_dict, load_config
from privtext.errors import ConfigError

BASE: dict[str, Any] = {"data": {"private": "p.csv"}, "privacy": {"epsilon": 4.0, "delta": 1e-5}}
DP_LABELS = {"kind": "dp", "budget_fraction": 0.2}


def _raw(**kw: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(BASE)), **kw}


def test_the_new_section_holds_both_keys_and_evolution_no_longer_does() -> None:
    cfg = config_from_dict(_raw(synthesis={"num_samples": 12, "label_distribution": DP_LABELS}))
    assert cfg.synthesis.num_samples == 12
    assert (cfg.synthesis.label_distribution.kind, cfg.synthesis.label_distribution.budget_fraction) == ("dp", 0.2)
    assert "num_samples" not in cfg.dump()["evolution"] and "label_distribution" not in cfg.dump()["evolution"]
    assert Config.model_fields["synthesis"].default_factory().num_samples == 2000  # type: ignore[misc]


@pytest.mark.parametrize("via", ["config_from_dict", "model_validate"])
def test_the_old_keys_are_moved_with_a_deprecation_note(via: str) -> None:
    raw = _raw(evolution={"num_samples": 12, "iterations": 2, "label_distribution": DP_LABELS})
    with pytest.warns(ConfigDeprecationWarning) as notes:
        cfg = config_from_dict(raw) if via == "config_from_dict" else Config.model_validate(raw)
    assert issubclass(ConfigDeprecationWarning, DeprecationWarning)
    texts = sorted(str(n.message) for n in notes)
    assert len(texts) == 2
    assert "evolution.label_distribution is deprecated: it moved to synthesis.label_distribution" in texts[0]
    assert "evolution.num_samples is deprecated: it moved to synthesis.num_samples" in texts[1]
    assert cfg.synthesis.num_samples == 12 and cfg.evolution.iterations == 2
    assert cfg.synthesis.label_distribution.kind == "dp"
    assert raw["evolution"]["num_samples"] == 12  # the caller's mapping is left as it was
    # what the run directory keeps (config.yaml) has only the new keys: a resume reads it without a note
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert config_from_dict(cfg.dump()).dump() == cfg.dump()


def test_the_new_keys_read_without_a_note() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config_from_dict(_raw(synthesis={"num_samples": 12}, evolution={"iterations": 2}))


def test_the_same_value_at_both_places_is_read_once() -> None:
    with pytest.warns(ConfigDeprecationWarning):
        cfg = config_from_dict(_raw(synthesis={"num_samples": 12}, evolution={"num_samples": 12}))
    assert cfg.synthesis.num_samples == 12


def test_different_values_at_both_places_name_both_keys_and_where(tmp_path: Path) -> None:
    f = tmp_path / "both.yaml"
    f.write_text("data: {private: p.csv}\nprivacy: {mu: 1}\nsynthesis:\n  num_samples: 100\nevolution:\n"
                 "  num_samples: 50\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    msg = str(e.value)
    assert "evolution.num_samples (line 6, column 3) = 50" in msg
    assert "synthesis.num_samples (line 4, column 3) = 100" in msg and "give synthesis.num_samples only" in msg
    with pytest.raises(ConfigError, match=r"evolution\.num_samples \(from --set evolution\.num_samples=7\) = 7"):
        config_from_dict(_raw(synthesis={"num_samples": 100}), overrides=["evolution.num_samples=7"])
    with pytest.raises(ConfigError, match=r"synthesis\.label_distribution"):
        config_from_dict(_raw(synthesis={"label_distribution": {"kind": "uniform"}},
                              evolution={"label_distribution": {"kind": "public"}}))
    with pytest.raises(ValueError, match=r"give synthesis\.num_samples only"):  # the model's own path too
        Config.model_validate(_raw(synthesis={"num_samples": 100}, evolution={"num_samples": 50}))


def test_runs_with_the_old_and_the_new_keys_state_the_same_parameters(tmp_path: Path) -> None:
    """Every method reads the new section: DP-KPS writes synthesis.num_samples records with the DP label
    histogram, and a configuration with the old keys gives the same synthetic records and privacy.json's
    parameters, byte for byte (reproducible noise)."""
    from privtext.data import Corpus
    from privtext.runner import run_config
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    private, pool, _ = toy_corpora(rng=np.random.default_rng(0))
    public = Corpus(pool.ids, pool.texts, {}, name="pool")
    common: dict[str, Any] = dict(private=private, public=public, method="dpkps",
                                  privacy={"epsilon": 6.0, "reproducible_noise": True},
                                  data={"label_values": {"category": ["food", "hotel"], "mood": ["good", "bad"]}},
                                  dpkps={"vocab_size": 20, "length": 4, "n_features": 32})
    new = tiny_run(tmp_path / "new", num_samples=16, synthesis={"label_distribution": DP_LABELS}, **common)
    raw = yaml.safe_load((new / "private" / "config.yaml").read_text())
    syn = raw.pop("synthesis")  # the same configuration, written with the old keys
    raw["evolution"].update(syn)
    raw["output"] = str(tmp_path / "old")
    with pytest.warns(ConfigDeprecationWarning):
        old = run_config(config_from_dict(raw))
    assert len((new / "synthetic.jsonl").read_text().splitlines()) == 16
    assert (new / "synthetic.jsonl").read_bytes() == (old / "synthetic.jsonl").read_bytes()
    p_new, p_old = (json.loads((r / "privacy.json").read_text())["parameters"] for r in (new, old))
    assert p_new == p_old and p_new["label_distribution"] == "dp" and p_new["num_samples"] == 16
    ledger = [json.loads(x) for x in (new / "private" / "ledger.jsonl").read_text().splitlines()]
    assert any("label" in e["key"] for e in ledger)  # the DP label histogram was released
