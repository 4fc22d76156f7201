"""Configuration: validation, typos named, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from privtext.config import config_from_dict, load_config
from privtext.errors import ConfigError

BASE = {"data": {"private": "p.csv"}, "privacy": {"epsilon": 4.0, "delta": 1e-5}}


def _raw(**kw):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    d.update(kw)
    return d


def _resolve(raw: dict, **kw):
    """What a run checks before anything is written: the configuration, then the method sections and the budget
    form against the registered methods (privtext.runner.resolve_config)."""
    from privtext.runner import resolve_config

    return resolve_config(config_from_dict(raw, **kw))


@pytest.mark.parametrize(
    "raw,needle",
    [
        (_raw(evolutoin={}), "unknown key 'evolutoin' (did you mean 'evolution'?)"),
        (_raw(evolution={"num_sample": 3}), "unknown key 'evolution.num_sample' (did you mean 'synthesis.num_samples'?)"),
        (_raw(privacy={"epsilon": 4.0, "delta": 1e-5, "dleta": 1}), "unknown key 'privacy.dleta'"),
        (_raw(zzz=1), "unknown key 'zzz' (valid keys here: method, seed,"),
        # method sections: config.py knows no method, the runner checks them against the registered ones
        (_raw(agupe={"q": 1}), "unknown key 'agupe' (did you mean 'augpe'?)"),
        (_raw(method="dpft", dfpt={}), "unknown key 'dfpt' (did you mean 'dpft'?)"),
        (_raw(zzz={}), "unknown key 'zzz' (valid keys here: method, seed, name, data, generator, generators, "
                       "embedder, privacy, synthesis, evolution, voting, cluster, output, augpe, dpft, dpkps, secpe, wasp)"),
    ],
)
def test_typo_is_named(raw: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        _resolve(raw)
    assert needle in str(e.value)


def test_a_section_is_checked_against_the_registered_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    """A section is a method's when a registered method declares it: the same key is refused, then accepted once
    a method of that name is registered (config.py holds no list of methods), and its options reach the method."""
    from privtext.methods import METHODS
    from privtext.methods.augpe import AugPE

    raw = _raw(method="augpe", newmethod={"k": 1})
    with pytest.raises(ConfigError, match="unknown key 'newmethod'"):
        _resolve(raw)
    monkeypatch.setitem(METHODS._entries, "newmethod", AugPE)
    cfg, _ = _resolve(raw)
    assert cfg.section("newmethod") == {"k": 1} and cfg.section("augpe")["sensitivity"] == "record"
    assert config_from_dict(cfg.dump()).sections().keys() == {"newmethod", "augpe"}


@pytest.mark.parametrize(
    "raw,needle",
    [
        (_raw(method="secpe", secpe={"cluster": 4}), "secpe: unknown option 'cluster' (did you mean 'clusters'?)"),
        (_raw(augpe={"sensitivity": "group"}), "augpe: sensitivity"),
        (_raw(method="secpee"), "unknown method 'secpee'"),
    ],
)
def test_method_sections_are_checked_by_their_method_before_a_run_starts(raw: dict, needle: str, tmp_path: Path) -> None:
    """A method's own section is validated by its Options model when the run is resolved, before anything is
    written; the resolved config then holds every option with its default."""
    from privtext.runner import resolve_config, run_config

    cfg = config_from_dict({**raw, "output": str(tmp_path / "run")})
    with pytest.raises(ConfigError) as e:
        resolve_config(cfg)
    assert needle in str(e.value)
    with pytest.raises(ConfigError):
        run_config(cfg)
    assert not (tmp_path / "run").exists()
    ok, cls = resolve_config(config_from_dict(_raw(method="Sec-PE", secpe={"clusters": 7})))
    assert ok.method == "secpe" and cls.name == "secpe"
    assert ok.secpe.options()["clusters"] == 7 and ok.secpe.options()["sample"] == "independent"


def test_pure_epsilon_follows_the_method_description() -> None:
    """``privacy: {epsilon}`` alone (pure ε-DP) runs only for a method whose description says its guarantee is
    pure ε-DP (DP-KPS), refused for the others before anything is written, with the list of pure-DP methods."""
    with pytest.raises(ConfigError, match=r"needs privacy\.delta.*\(dpkps\); method augpe's guarantee is approximate"):
        _resolve(_raw(privacy={"epsilon": 4.0}))
    with pytest.raises(ConfigError, match=r"method secpe's guarantee is secret"):
        _resolve(_raw(method="secpe", privacy={"epsilon": 4.0}))
    cfg, cls = _resolve(_raw(method="dp-kps", privacy={"epsilon": 4.0}))
    assert cls.description.guarantee == "pure" and cfg.privacy.kind == "pure"


@pytest.mark.parametrize(
    "privacy,needle",
    [
        ({"epsilon": 4.0, "delta": 1e-5, "mu": 1.0}, "exactly one"),
        ({}, "exactly one"),
        ({"secret": {"p": 0.2, "r": 0.1}}, "must exceed p"),
        ({"epsilon": -1, "delta": 1e-5}, "privacy.epsilon"),
        ({"mu": 0}, "privacy.mu"),
    ],
)
def test_privacy_forms(privacy: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        config_from_dict(_raw(privacy=privacy))


def test_unknown_method_lists_valid() -> None:
    from privtext.runner import resolve_config

    with pytest.raises(ConfigError, match="valid names: augpe, dpft, dpkps, secpe, wasp"):
        resolve_config(config_from_dict(_raw(method="magic")))


def test_overrides_parse_yaml_values() -> None:
    c = config_from_dict(BASE, overrides=["evolution.iterations=3", "privacy.epsilon=2", "voting.metric=cosine",
                                          "generator.order=5", "data.label_columns=[a, b]"])
    assert c.evolution.iterations == 3 and c.privacy.epsilon == 2.0 and c.voting.metric == "cosine"
    assert c.generator.options() == {"order": 5} and c.data.label_columns == ["a", "b"]
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        config_from_dict(BASE, overrides=["evolution.iterations"])
    with pytest.raises(ConfigError, match=r"evolution\.iterations"):
        config_from_dict(BASE, overrides=["evolution.iterations=0"])


def test_secure_mode_refuses_seed() -> None:
    with pytest.raises(ConfigError, match="refuses a seed"):
        config_from_dict(_raw(privacy={"mu": 1.0, "secure": True}))
    c = config_from_dict(_raw(seed=None, privacy={"mu": 1.0, "secure": True}))
    assert c.privacy.secure and c.seed is None


def test_load_yaml_file(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("method: augpe\ndata: {private: x.csv}\nprivacy: {mu: 1}\nevolutoin: {}\n", encoding="utf-8")
    from privtext.runner import resolve_config

    with pytest.raises(ConfigError, match=r"c.yaml: unknown key 'evolutoin' \(line 4, column 1\) \(did you mean "
                                          r"'evolution'\?\)"):
        resolve_config(load_config(p))
    with pytest.raises(ConfigError, match=r"unknown key 'evolutoin' \(from --set evolutoin.iterations=2\)"):
        resolve_config(load_config(tmp_path / "c.yaml", overrides=["evolutoin.iterations=2"]))
    p.write_text("method: augpe\ndata: {private: x.csv}\nprivacy: {mu: 1}\nevolutoin: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown key 'evolutoin' \(line 4, column 1\) \(did you mean"):
        load_config(p)
    p.write_text("- not a mapping\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(p)
    with pytest.raises(ConfigError, match="no such config"):
        load_config(tmp_path / "nope.yaml")


def test_dump_round_trip() -> None:
    c = config_from_dict(_raw(method="secpe", privacy={"secret": {"p": 1e-4, "r": 2e-4}}))
    again = config_from_dict(c.dump())
    assert again == c


def test_yaml_errors_point_to_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: augpe\ndata: {private: x.csv\nprivacy: {mu: 1}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:3:8: not valid YAML"):
        load_config(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("method: augpe\ndata: {private: x.csv}\nprivacy:\n  mu: 1\nevolution:\n  num_sample: 3\n")
    with pytest.raises(ConfigError) as e:
        load_config(typo)
    assert "unknown key 'evolution.num_sample' (line 6, column 3) (did you mean 'synthesis.num_samples'?)" in str(e.value)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("method: augpe\ndata: {private: x.csv}\nprivacy:\n  mu: -1\n")
    with pytest.raises(ConfigError, match=r"privacy\.mu \(line 4, column 3\)"):
        load_config(wrong)
