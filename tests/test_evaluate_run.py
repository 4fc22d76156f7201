"""evaluate_run, ``privtext evaluate`` and ``privtext compare`` on fabricated run directories (and, when the
runner is present, on real Aug-PE runs)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import privtext.cli as cli
from privtext.data import load_corpus, write_corpus
from privtext.evaluate import RunView, evaluate_run, fid, guarantee_text, resolve_embedder
from privtext.evaluate.compare import build_table, compare_configs, compare_runs
from privtext.testing.tinyrun import tiny_run, toy_corpora

from .conftest import shared_file


def invoke(*args: str) -> object:
    if not any(c.name == "evaluate" for c in cli.app.registered_commands):
        cli._mount()
    return CliRunner().invoke(cli.app, list(args))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two fabricated runs on the same toy data, their private corpus and a real (held-out) corpus."""
    root = tmp_path_factory.mktemp("eval-runs")
    rng = np.random.default_rng(0)
    priv, pool, real = toy_corpora(rng=rng, n_private=40, n_pool=200)
    write_corpus(priv, root / "private.csv")
    write_corpus(real, root / "real.csv")
    a = tiny_run(root / "augpe", private=priv, public=pool, seed=1, iterations=3, num_samples=20,
                 privacy={"mu": 1.2})
    s = tiny_run(root / "secpe", private=priv, public=pool, seed=2, iterations=2, num_samples=20, method="secpe",
                 privacy={"secret": {"p": 1e-4, "r": 1e-3}}, secpe={"detector": "regex", "clusters": 6})
    return {"root": root, "augpe": a, "secpe": s, "real": root / "real.csv", "private": root / "private.csv"}


@pytest.fixture(scope="module")
def evaluated(runs: dict[str, Path]) -> dict:
    return evaluate_run(runs["augpe"], real=runs["real"], quiet=True)


def test_evaluation_is_complete_and_written(runs: dict[str, Path], evaluated: dict) -> None:
    ev = evaluated
    from privtext.privacy.statement import released_tree

    on_disk = json.loads((runs["augpe"] / "evaluation.json").read_text())
    assert on_disk["fid"] == released_tree(ev["fid"]) and on_disk["real"]["fingerprint"] == ev["real"]["fingerprint"]
    assert on_disk["fid"]["fid"] == float(f"{ev['fid']['fid']:.4g}")  # rounded as a released value is
    # the shareable file holds no private diagnostics: no OnlyPrivate baseline, timings, time stamps or paths
    assert "only_private" not in on_disk["train_sets"] and not ({"runtime", "seconds", "created", "run"} & set(on_disk))
    assert all("only_private" not in per for per in on_disk["downstream"]["results"].values())
    assert on_disk["real"]["path"] == "real.csv"
    private = json.loads((runs["augpe"] / "private" / "evaluation.json").read_text())
    assert private["fid"] == ev["fid"] and private["runtime"] == ev["runtime"] and private["private"] is True
    assert ev["method"] == "augpe" and ev["guarantee_text"] == "μ=1.2-GDP"
    assert ev["embedder"]["name"].startswith("hashing")  # the run's own embedder section
    assert ev["synthetic"] == {"n": 20, "source": "synthetic.jsonl"}
    assert ev["real"]["n"] == 40 and ev["real"]["label_columns"] == ["category", "mood"]
    assert ev["train_sets"] == {"synthetic": 20, "only_private": 20, "zero_shot": 20}
    assert [r["iteration"] for r in ev["per_iteration"]] == [0, 1, 2]
    assert all(r["n_selected"] == 20 and set(r["accuracy"]) == {"category", "mood"} for r in ev["per_iteration"])
    for cname in ("embedding-logreg", "tfidf-logreg"):
        per_set = ev["downstream"]["results"][cname]
        assert set(per_set) == {"synthetic", "only_private", "zero_shot"}
        assert all(0 <= per_set[s][c]["accuracy"] <= 1 for s in per_set for c in ("category", "mood"))
    assert 0 <= ev["precision_recall"]["precision"] <= 1 and ev["precision_recall"]["k"] == 3
    assert ev["next_word"] is None and ev["mauve"] is None and ev["secrets"] is None
    from privtext.evaluate.runstats import runtime_split

    metrics = RunView(runs["augpe"]).metrics  # private/metrics.json of the real run
    assert ev["runtime"]["groups"]["generation"] == pytest.approx(runtime_split(metrics)["groups"]["generation"])
    assert ev["runtime"]["groups"]["generation"] > 0
    assert ev["runtime"]["llm_calls"] > 0
    assert set(ev["votes"]) == {"0", "1", "2"} and "sorted_votes" in next(iter(ev["votes"]["2"].values()))
    assert "sorted_votes" not in next(iter(ev["votes"]["0"].values()))
    assert ev["lengths"]["n_synthetic"] == 20 and ev["lengths"]["n_real"] == 40


def test_fid_is_computed_on_the_right_rows(runs: dict[str, Path], evaluated: dict) -> None:
    """Final FID = synthetic.jsonl vs real; per-iteration FID = the *selected* rows, not all candidates."""
    view = RunView(runs["augpe"])
    emb = resolve_embedder({"backend": "hashing", "dim": 64})  # the run's own embedder
    real = load_corpus(runs["real"], label_columns=["category", "mood"])
    real_emb = emb.embed(list(real.texts))
    syn = view.synthetic()
    # rel 1e-6: FID goes through a matrix square root whose last digits depend on the BLAS threads in use
    assert evaluated["fid"]["fid"] == pytest.approx(fid(emb.embed(list(syn.texts)), real_emb).fid, rel=1e-6)
    cands = view.candidates(1)
    selected = cands[cands["selected"]]
    want = fid(emb.embed(list(selected["text"])), real_emb).fid
    everything = fid(emb.embed(list(cands["text"])), real_emb).fid
    got = evaluated["per_iteration"][1]["fid"]
    assert got == pytest.approx(want, rel=1e-6) and abs(got - everything) > 1e-4
    # the last iteration's selected samples are the released synthetic set
    assert evaluated["per_iteration"][-1]["fid"] == pytest.approx(evaluated["fid"]["fid"], rel=1e-6)


def test_zero_shot_baseline_is_random_origin_rows_of_iteration_zero(runs: dict[str, Path]) -> None:
    view = RunView(runs["augpe"])
    random_rows = view.candidates(0)
    random_texts = set(random_rows.loc[random_rows["origin"] == "random", "text"])
    a = view.zero_shot(10, rng=np.random.default_rng(5))
    b = view.zero_shot(10, rng=np.random.default_rng(5))
    assert a is not None and b is not None and len(a) == 10 and a.texts == b.texts
    assert set(a.texts) <= random_texts
    assert a.label_columns == ["category", "mood"]


def test_unlabelled_real_data_gets_next_word_and_secret_exposure(runs: dict[str, Path]) -> None:
    real = load_corpus(runs["real"])  # texts only
    ev = evaluate_run(runs["augpe"], real=real, quiet=True, write=False, per_iteration=False,
                      classifiers=(), next_word_options={"steps": 5, "hidden": 16, "emb_dim": 8},
                      secrets=["pizza", "lobby", "no-such-secret"])
    assert ev["downstream"] is None and ev["per_iteration"] == []
    assert set(ev["next_word"]) == {"synthetic", "only_private", "zero_shot"}
    assert ev["next_word"]["synthetic"]["steps"] == 5
    s = ev["secrets"]
    assert s["n_secrets"] == 3 and s["exposed"] <= 2 and s["baseline_exposed"] is not None


def test_missing_private_corpus_skips_only_private_with_a_note(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(runs["augpe"], copy)
    cfg = yaml.safe_load((copy / "private" / "config.yaml").read_text())
    cfg["data"]["private"] = str(tmp_path / "gone.csv")
    (copy / "private" / "config.yaml").write_text(yaml.safe_dump(cfg))
    ev = evaluate_run(copy, real=runs["real"], quiet=True, per_iteration=False, classifiers=("tfidf-logreg",))
    assert "only_private" not in ev["train_sets"] and any("OnlyPrivate" in n for n in ev["private_notes"])


def test_max_real_samples_the_real_corpus(runs: dict[str, Path]) -> None:
    ev = evaluate_run(runs["augpe"], real=runs["real"], max_real=15, quiet=True, write=False, per_iteration=False,
                      baselines=False, classifiers=("tfidf-logreg",))
    assert ev["real"]["n"] == 15 and ev["precision_recall"]["n_real"] == 15


def test_guarantee_text_reads_both_privacy_shapes() -> None:
    assert guarantee_text({"guarantee": {"kind": "dp", "budget": {"epsilon": 4, "delta": 1e-5}}}) == \
        "(ε=4, δ=1e-05)-DP"
    assert guarantee_text({"private": False, "guarantee": {"kind": "gdp", "budget": {"mu": 1}}}) == \
        "NOT PRIVATE (μ=1-GDP)"
    assert guarantee_text({"guarantee": "words", "budget": {"kind": "secret", "p": 1e-4, "r": 2e-4}}) == \
        "(p=0.0001, r=0.0002)-secret"
    assert guarantee_text({"guarantee": "w", "budget": {"kind": "secret", "p": [1e-4, 1e-3], "r": [2e-4, 2e-3]}}) \
        == "(p=per-secret, r=per-secret)-secret"
    assert guarantee_text({}) == "(none recorded)"


# --------------------------------------------------------------------------------------------------- CLI


def test_cli_evaluate_json_and_errors(runs: dict[str, Path], tmp_path: Path) -> None:
    res = invoke("evaluate", str(runs["secpe"]), "--real", str(runs["real"]), "--json", "--max-real", "30",
                 "--classifier", "tfidf-logreg", "--embedder", "hashing")
    assert res.exit_code == 0, res.output
    ev = json.loads(res.stdout)
    assert ev["real"]["n"] == 30 and ev["guarantee_text"] == "(p=0.0001, r=0.001)-secret"
    assert ev["statement"].startswith("(p=0.0001, r=0.001)-secret protection")
    assert list(ev["downstream"]["results"]) == ["tfidf-logreg"]
    assert (runs["secpe"] / "evaluation.json").exists()

    human = invoke("evaluate", str(runs["secpe"]), "--real", str(runs["real"]), "--classifier", "tfidf-logreg",
                   "--no-baselines")
    assert human.exit_code == 0, human.output
    assert "FID (synthetic)" in human.stdout and "per iteration" in human.stdout

    bad = invoke("evaluate", str(tmp_path), "--real", str(runs["real"]))
    assert bad.exit_code == 2 and "not a privtext run directory" in bad.output
    missing = invoke("evaluate", str(runs["secpe"]), "--real", str(tmp_path / "nope.csv"))
    assert missing.exit_code == 2 and "nope.csv" in missing.output


def test_cli_compare_prints_the_table_and_writes_csv(runs: dict[str, Path], tmp_path: Path) -> None:
    out_csv = tmp_path / "cmp.csv"
    res = invoke("compare", str(runs["augpe"]), str(runs["secpe"]), "--real", str(runs["real"]), "--csv",
                 str(out_csv), "--classifier", "tfidf-logreg")
    assert res.exit_code == 0, res.output
    for word in ("augpe", "secpe", "μ=1.2-GDP", "(p=0.0001, r=0.001)-secret", "FID", "category acc", "generator calls"):
        assert word in res.stdout, word
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert [r["name"] for r in rows] == ["augpe", "secpe"]
    assert {"fid", "acc:category", "acc:mood", "generation_s", "embedding_s", "histogram_s", "wall_s",
            "llm_calls", "guarantee", "method"} <= set(rows[0])
    for r, key in zip(rows, ("augpe", "secpe"), strict=True):
        ev = json.loads((runs[key] / "private" / "evaluation.json").read_text())  # the whole, unrounded one
        assert float(r["fid"]) == pytest.approx(ev["fid"]["fid"], rel=1e-12)
        assert float(r["acc:mood"]) == pytest.approx(
            ev["downstream"]["results"]["tfidf-logreg"]["synthetic"]["mood"]["accuracy"], rel=1e-12)
    for r, key in zip(rows, ("augpe", "secpe"), strict=True):
        ev = json.loads((runs[key] / "private" / "evaluation.json").read_text())
        assert float(r["generation_s"]) == pytest.approx(ev["runtime"]["groups"]["generation"], rel=1e-6)

    js = invoke("compare", str(runs["augpe"]), str(runs["secpe"]), "--real", str(runs["real"]), "--json",
                "--classifier", "tfidf-logreg")
    assert js.exit_code == 0, js.output
    assert [r["name"] for r in json.loads(js.stdout)["rows"]] == ["augpe", "secpe"]


def test_compare_reuses_matching_evaluations(runs: dict[str, Path]) -> None:
    kw = {"real": runs["real"], "classifiers": ("tfidf-logreg",), "quiet": True}
    compare_runs([runs["augpe"]], **kw)
    stamp = os.stat(runs["augpe"] / "evaluation.json").st_mtime_ns
    t = compare_runs([runs["augpe"]], **kw)
    assert os.stat(runs["augpe"] / "evaluation.json").st_mtime_ns == stamp
    t2 = compare_runs([runs["augpe"]], max_real=20, **kw)  # other real records: evaluated again
    assert os.stat(runs["augpe"] / "evaluation.json").st_mtime_ns != stamp
    assert t.real["n"] == 40 and t2.real["n"] == 20 and t.rows[0]["fid"] != t2.rows[0]["fid"]


def test_compare_asked_for_mauve_does_not_reuse_an_evaluation_without_it(runs: dict[str, Path]) -> None:
    """A run evaluated without MAUVE (a benchmark's first pass) and compared again with ``mauve=True`` is evaluated
    again: reusing it left its MAUVE cell empty in the 5000-review side-by-side table."""
    pytest.importorskip("mauve")
    kw = {"real": runs["real"], "classifiers": ("tfidf-logreg",), "quiet": True}
    # evaluated afresh without MAUVE (another test of this module may have stored one with it)
    assert compare_runs([runs["secpe"]], reuse=False, **kw).rows[0].get("mauve") is None
    stamp = os.stat(runs["secpe"] / "evaluation.json").st_mtime_ns
    t = compare_runs([runs["secpe"]], mauve=True, **kw)
    assert os.stat(runs["secpe"] / "evaluation.json").st_mtime_ns != stamp
    assert 0 < t.rows[0]["mauve"] <= 1
    stamp = os.stat(runs["secpe"] / "evaluation.json").st_mtime_ns
    compare_runs([runs["secpe"]], mauve=True, **kw)  # now it holds MAUVE: reused
    assert os.stat(runs["secpe"] / "evaluation.json").st_mtime_ns == stamp


def test_build_table_unions_label_columns_and_warns() -> None:
    e1 = {"name": "a", "fid": {"fid": 1.0}, "downstream": {"primary": "x", "results": {"x": {"synthetic": {
        "y1": {"accuracy": 0.5}}}}}}
    e2 = {"name": "b", "fid": {"fid": 2.0}, "next_word": {"synthetic": {"accuracy": 0.25}}}
    t = build_table([e1, e2], warnings=["different data"])
    assert "acc:y1" in t.columns and "next_word" in t.columns
    assert t.rows[1]["acc:y1"] is None and t.rows[1]["next_word"] == 0.25
    assert t.to_csv().splitlines()[0].startswith("name,method,guarantee") and t.warnings == ["different data"]


def test_compare_configs_runs_real_augpe_configs(tmp_path: Path) -> None:
    pytest.importorskip("privtext.runner")
    rng = np.random.default_rng(0)
    priv, pool, real = toy_corpora(rng=rng, n_private=60, n_pool=300)
    for name, c in (("private", priv), ("public", pool), ("real", real)):
        write_corpus(c, tmp_path / f"{name}.csv")
    base = {"method": "augpe", "seed": 0,
            "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                     "label_columns": ["category", "mood"]},
            "generator": {"backend": "ngram", "order": 3}, "embedder": {"backend": "hashing"},
            "evolution": {"num_samples": 16, "iterations": 2, "variations": 3}}
    (tmp_path / "eps4.yaml").write_text(yaml.safe_dump({**base, "privacy": {"epsilon": 4.0, "delta": 1e-5}}))
    (tmp_path / "eps1.yaml").write_text(yaml.safe_dump({**base, "privacy": {"epsilon": 1.0, "delta": 1e-5}}))
    table = compare_configs([tmp_path / "eps4.yaml", tmp_path / "eps1.yaml"], real=tmp_path / "real.csv",
                            out_dir=tmp_path / "runs", classifiers=("tfidf-logreg",), quiet=True,
                            overrides=["evolution.iterations=2"])
    assert [r["name"] for r in table.rows] == ["eps4", "eps1"]
    assert [r["guarantee"] for r in table.rows] == ["(ε=4, δ=1e-05)-DP", "(ε=1, δ=1e-05)-DP"]
    for r in table.rows:
        assert r["n_synthetic"] == 16 and r["fid"] > 0 and 0 <= r["acc:category"] <= 1
        assert r["llm_calls"] > 0 and r["generation_s"] > 0 and r["wall_s"] > 0
        assert (Path(r["run"]) / "evaluation.json").exists()


@pytest.mark.slow
def test_compare_augpe_and_secpe_on_yelp(tmp_path: Path) -> None:
    """The acceptance run: Aug-PE and SecPE on a small Yelp set-up with the offline defaults (MiniLM, n-gram)."""
    pytest.importorskip("privtext.runner")
    cols = ["label1", "label2"]
    dev = load_corpus(shared_file("yelp", "dev.csv"), label_columns=cols)
    test = load_corpus(shared_file("yelp", "test.csv"), label_columns=cols)
    rng = np.random.default_rng(0)
    short = [i for i, t in enumerate(dev.texts) if len(t.split()) < 60]
    write_corpus(dev.subset(rng.choice(short, 300, replace=False)), tmp_path / "private.csv")
    idx = rng.permutation(len(test))
    write_corpus(test.subset(idx[:1500]), tmp_path / "public.csv")
    write_corpus(test.subset(idx[1500:1800]), tmp_path / "real.csv")
    base = {"seed": 0, "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                                "label_columns": cols},
            "generator": {"backend": "ngram"}, "evolution": {"num_samples": 100, "iterations": 2, "variations": 3}}
    (tmp_path / "augpe.yaml").write_text(yaml.safe_dump(
        {**base, "method": "augpe", "name": "augpe", "privacy": {"mu": 1.0}}))
    (tmp_path / "secpe.yaml").write_text(yaml.safe_dump(
        {**base, "method": "secpe", "name": "secpe", "privacy": {"secret": {"p": 1e-4, "r": 1e-3}},
         "secpe": {"clusters": 40, "detector": {"name": "random_words", "from_private": True}}}))
    table = compare_configs([tmp_path / "augpe.yaml", tmp_path / "secpe.yaml"], real=tmp_path / "real.csv",
                            out_dir=tmp_path / "runs", quiet=True)
    assert [r["method"] for r in table.rows] == ["augpe", "secpe"]
    assert all(r["fid"] is not None and r["acc:label1"] is not None and r["acc:label2"] is not None
               for r in table.rows)
    print(table.to_csv())


def test_corpus_names_real_path(runs: dict[str, Path]) -> None:
    t = compare_runs([runs["augpe"]], real=runs["real"], classifiers=("tfidf-logreg",), quiet=True)
    ev = json.loads((runs["augpe"] / "private" / "evaluation.json").read_text())
    assert ev["real"]["path"] == str(runs["real"]) and t.real["path"] == str(runs["real"])
    # the shareable evaluation names the file only (no local path in a release)
    assert json.loads((runs["augpe"] / "evaluation.json").read_text())["real"]["path"] == "real.csv"


def test_classifier_options_from_the_command_line(runs: dict[str, Path]) -> None:
    from privtext.cli.evaluate import parse_classifier_options
    from privtext.errors import ConfigError

    assert parse_classifier_options(["hf-finetune.model=/m/roberta", "hf-finetune.epochs=2", "tfidf-logreg.C=0.5"]) \
        == {"hf-finetune": {"model": "/m/roberta", "epochs": 2}, "tfidf-logreg": {"C": 0.5}}
    with pytest.raises(ConfigError, match=r"CLASSIFIER\.KEY=VALUE"):
        parse_classifier_options(["C=1"])
    bad = invoke("evaluate", str(runs["augpe"]), "--real", str(runs["real"]), "--classifier", "tfidf-logreg",
                 "--classifier-option", "tfidf-logreg.C=-1", "--no-baselines")
    assert bad.exit_code == 2 and "C must be positive" in bad.output


def test_compare_identifies_private_data_by_content(tmp_path: Path) -> None:
    from privtext.evaluate.compare import file_fingerprint

    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    a.write_text("text\nhello\n")
    b.write_bytes(a.read_bytes())  # a byte-identical copy at another path
    c.write_text("text\nhello!\n")
    assert file_fingerprint(a) == file_fingerprint(b) != file_fingerprint(c)
    assert file_fingerprint("hf:yelp_review_full") == "name:hf:yelp_review_full"


def test_evaluating_on_the_private_data_is_flagged(runs: dict[str, Path]) -> None:
    ev = evaluate_run(runs["augpe"], real=runs["private"], quiet=True, write=False, per_iteration=False,
                      classifiers=("tfidf-logreg",))
    assert any("shares 40 texts with the private corpus" in n for n in ev["private_notes"])
    assert not any("shares" in n for n in ev["notes"])  # an exact private count: private notes only
    clean = evaluate_run(runs["augpe"], real=runs["real"], quiet=True, write=False, per_iteration=False,
                         classifiers=("tfidf-logreg",))
    assert not any("private corpus" in n for n in clean["notes"])


def test_metric_objects_compose_and_a_user_metric_lands_in_the_result(runs: dict[str, Path]) -> None:
    from privtext.errors import ConfigError
    from privtext.evaluate.suite import DEFAULT_METRICS, EvaluationOptions

    class MeanLength:
        name = "mean_length"

        def steps(self, ctx) -> int:
            return 0

        def compute(self, ctx) -> dict:
            return {"mean_length": sum(map(len, ctx.syn.texts)) / len(ctx.syn)}

    opts = EvaluationOptions(classifiers=("tfidf-logreg",), per_iteration=False, baselines=False)
    ev = evaluate_run(runs["augpe"], real=runs["real"], options=opts, metrics=[*DEFAULT_METRICS, MeanLength()],
                      quiet=True, write=False)
    syn = RunView(runs["augpe"]).synthetic()
    assert ev["mean_length"] == pytest.approx(sum(map(len, syn.texts)) / len(syn))
    only = evaluate_run(runs["augpe"], real=runs["real"], options=opts, metrics=[DEFAULT_METRICS[0]], quiet=True,
                        write=False)
    assert only["fid"] == ev["fid"] and "downstream" not in only
    with pytest.raises(ConfigError, match="unknown option"):
        evaluate_run(runs["augpe"], real=runs["real"], classifer=("x",), quiet=True, write=False)


def test_compare_checks_every_configuration_before_the_first_run(tmp_path: Path) -> None:
    """A configuration that its method refuses (SecPE with a DP label histogram), given last, fails the comparison
    before the first configuration runs: nothing is written under out_dir (it failed after every run before it)."""
    from privtext.errors import ConfigError

    pytest.importorskip("privtext.runner")
    rng = np.random.default_rng(0)
    priv, pool, real = toy_corpora(rng=rng, n_private=60, n_pool=300)
    for name, c in (("private", priv), ("public", pool), ("real", real)):
        write_corpus(c, tmp_path / f"{name}.csv")
    base = {"seed": 0, "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                                "label_columns": ["category"]},
            "generator": {"backend": "ngram", "order": 3}, "embedder": {"backend": "hashing"},
            "synthesis": {"num_samples": 16, "label_distribution": {"kind": "dp"}},
            "evolution": {"iterations": 1, "variations": 3}}
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump({**base, "method": "augpe",
                                                      "privacy": {"epsilon": 4.0, "delta": 1e-5}}))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**base, "method": "secpe",
                                                       "privacy": {"secret": {"p": 1e-3, "r": 2e-2}}}))
    with pytest.raises(ConfigError, match="secpe uses the public label distribution"):
        compare_configs([tmp_path / "ok.yaml", tmp_path / "bad.yaml"], real=tmp_path / "real.csv",
                        out_dir=tmp_path / "runs", seeds=[0, 1], quiet=True)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_compare_asked_for_mauve_without_the_package_fails_before_any_run(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``--mauve`` without mauve-text: the missing package is named before the first run, not after the runs."""
    import sys

    from privtext.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "mauve", None)  # import mauve raises ImportError
    cfg = {"method": "augpe", "seed": 0, "privacy": {"epsilon": 4.0, "delta": 1e-5},
           "data": {"private": str(tmp_path / "missing.csv")}, "generator": {"backend": "ngram"}}
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(cfg))
    with pytest.raises(MissingDependencyError, match="mauve-text"):
        compare_configs([tmp_path / "a.yaml"], real=tmp_path / "real.csv", out_dir=tmp_path / "runs", mauve=True)
    assert not (tmp_path / "runs").exists()
