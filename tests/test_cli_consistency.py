"""The command line says the same thing the same way everywhere: -o/--output on every command that writes a file
or folder, -h and --version, all four methods in the help and the demo, --set errors that name the --set, resume
commands a shell can paste, and no resume advice for a finished run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

import privtext
import privtext.cli as cli
from privtext.testing.tinyrun import tiny_run, toy_corpora

METHODS = ("augpe", "secpe", "wasp", "dpkps")


def invoke(*args: str):
    cli._mount()
    return CliRunner().invoke(cli.app, list(args))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=30, n_pool=120)
    return tiny_run(tmp_path_factory.mktemp("cli") / "run", private=priv, public=pub, iterations=1,
                    num_samples=12)


def test_version_and_short_help() -> None:
    for flag in ("--version", "-V"):
        res = invoke(flag)
        assert res.exit_code == 0 and res.stdout.strip() == f"privtext {privtext.__version__}"
    top = invoke("-h")
    assert top.exit_code == 0 and "Usage" in top.stdout
    for name in ("Aug-PE", "SecPE", "WASP", "DP-KPS"):
        assert name in top.stdout, name
    for cmd in ("run", "report", "demo", "evaluate", "compare", "resume"):
        res = invoke(cmd, "-h")
        assert res.exit_code == 0 and "Usage" in res.stdout, cmd


def _plain(text: str) -> str:
    return re.sub(r"[│╭╮╰╯─]", " ", text)


def test_o_means_output_on_every_command_that_writes_one() -> None:
    for cmd in ("run", "report", "demo"):
        help_text = _plain(invoke(cmd, "-h").stdout)
        assert re.search(r"--output\S*\s+-o\b", help_text), (cmd, help_text)


def test_report_accepts_o_output_and_the_old_out(run: Path, tmp_path: Path) -> None:
    for flag in ("-o", "--output", "--out"):
        target = tmp_path / f"r{flag.strip('-')}.html"
        res = invoke("report", str(run), flag, str(target))
        assert res.exit_code == 0, res.output
        assert target.exists() and target.read_text().startswith("<!DOCTYPE html>")


def test_demo_offers_all_four_methods_and_names_them_on_a_bad_one(tmp_path: Path) -> None:
    help_text = _plain(invoke("demo", "-h").stdout)
    assert all(m in help_text for m in METHODS)
    res = invoke("demo", "--method", "gan", "-o", str(tmp_path / "d"))
    assert res.exit_code == 2
    assert all(m in res.output for m in METHODS) and "'gan'" in res.output
    assert not (tmp_path / "d").exists()  # refused before anything is written
    from privtext.demo import DEMO_METHODS, demo_config

    for f in ("patient_names.txt", "record_numbers.txt"):  # SecPE's declared secrets (the demo writes them)
        (tmp_path / f).write_text("Maria Lopez\n")
    for m in DEMO_METHODS:  # every demo configuration resolves (the method's own checks included)
        from privtext.config import config_from_dict
        from privtext.runner import resolve_config

        config, cls = resolve_config(config_from_dict(demo_config(tmp_path, m)))
        cls.check_config(config, cls.parse_options(config))
        assert config.method == m


def test_a_set_error_names_the_set_not_a_line_of_the_file(run: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    raw = yaml.safe_load((run / "config.yaml").read_text())
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    for setting, words in (("evolution.iterations=abc", "valid integer"), ("privacy.epsilon=-1", "greater than 0"),
                           ("evolution.iteratons=3", "did you mean 'evolution.iterations'")):
        res = invoke("run", str(cfg), "--set", setting, "-o", str(tmp_path / "x"))
        assert res.exit_code == 2, res.output
        assert f"(from --set {setting})" in res.output and words in res.output and "line" not in res.output
    # an error in the file itself still points at its line
    raw["evolution"]["iterations"] = 0
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    res = invoke("run", str(cfg), "-o", str(tmp_path / "x"))
    assert res.exit_code == 2 and re.search(r"evolution\.iterations \(line \d+, column \d+\)", res.output), res.output


def test_a_finished_run_is_not_offered_resume(run: Path) -> None:
    res = invoke("run", str(run / "config.yaml"), "-o", str(run))
    assert res.exit_code == 2
    assert "finished run" in res.output and "neither resumed nor replaced" in res.output
    assert "privtext resume" not in res.output


def test_the_printed_resume_command_is_shell_quoted(tmp_path: Path) -> None:
    import typer

    from privtext.cli.run import _interrupted

    root = tmp_path / "runs" / "it's a run; rm -rf x"
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("method: augpe\n")
    con = Console(record=True, width=400)
    with pytest.raises(typer.Exit):
        _interrupted(root, con)
    out = con.export_text()
    cmd = re.search(r"`(privtext resume .*?)` continues", out).group(1)  # type: ignore[union-attr]
    assert shlex.split(cmd) == ["privtext", "resume", str(root)]  # one argument, pasted as it is


def test_quiet_and_debug_are_accepted_after_the_command_too() -> None:
    from privtext.cli import global_flags_first

    assert global_flags_first(["run", "cfg.yaml", "-q"]) == ["-q", "run", "cfg.yaml"]
    assert global_flags_first(["-q", "resume", "r", "--debug"]) == ["-q", "--debug", "resume", "r"]
    # an option's value is never moved, even when it reads like a flag
    assert global_flags_first(["run", "c.yaml", "-o", "-q"]) == ["run", "c.yaml", "-o", "-q"]


def test_a_set_is_echoed_with_its_value_brackets_included(run: Path, tmp_path: Path) -> None:
    """Issue 35, item 6: `--set data.label_columns=[intnt]` was echoed without its value (rich read the
    brackets as markup). An error about a whole section names every --set inside it."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text((run / "private" / "config.yaml").read_text())  # the full one: its data files exist
    values = "data.label_values={category: [food, hotel], mood: [good, bad]}"
    res = invoke("run", str(cfg), "--set", values, "--set", "data.label_columns=[categry, mood]",
                 "-o", str(tmp_path / "x"))
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert f"--set {values}" in out and "--set data.label_columns=[categry, mood]" in out, out
    assert "['category']" in out and "['categry', 'mood']" in out  # the columns, lists as they are
    res = invoke("run", str(cfg), "--set", "data.label_columns=[intnt]", "-o", str(tmp_path / "y"))
    assert res.exit_code == 2 and "'intnt'" in res.output, res.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_the_run_summary_reads_the_guarantee_in_plain_words(run: Path) -> None:
    import json

    from privtext.cli.run import _statement_lines

    st = json.loads((run / "privacy.json").read_text())
    lines = _statement_lines(st)
    assert lines[0] == st["headline"] and lines[1] == st["meaning"]["words"]
    assert lines[1].startswith("What μ = 1 means") and "catches at most" in lines[1]
    assert not any(".;" in x for x in lines) and not any(x.startswith("Not covered") for x in lines)
    assert lines[-1].startswith("Noise: ChaCha20")  # each part names itself once


@pytest.mark.parametrize("argv,suggested", [(["cach"], "'cache'"), (["evaluat"], "'evaluate'"),
                                            (["budget", "gausian"], "'gaussian'")])
def test_a_mistyped_command_is_suggested_once(argv: list[str], suggested: str) -> None:
    """click names the close command; typer (0.20) repeated the same sentence ("Did you mean 'cache'? Did you
    mean 'cache'?"), so its own suggestion is off in every privtext app."""
    res = invoke(*argv)
    assert res.exit_code == 2
    text = " ".join(res.output.replace("│", " ").split())
    assert text.count("Did you mean") == 1, text
    assert suggested in text
