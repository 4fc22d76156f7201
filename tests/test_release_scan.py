"""The release scan (privtext.evaluate.release_scan): a run of each method, evaluated and reported, holds nothing
outside private/ that the scan flags; every kind of fault planted into a copy of a release is caught."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from privtext.data import write_corpus
from privtext.evaluate import evaluate_run
from privtext.evaluate.release_scan import kept_values, private_counts, release_files, scan_release, summary
from privtext.report import build_report
from privtext.testing.tinyrun import method_runs, toy_corpora

N_PRIVATE = 47  # no public size of these runs is 47: an exact private count is recognisable

@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("release")
    priv, pub, real = toy_corpora(rng=np.random.default_rng(0), n_private=N_PRIVATE, n_pool=200)
    write_corpus(real.subset(np.arange(40)), root / "real.csv")  # 40 real records: no public size is 47
    out = method_runs(root, private=priv, public=pub)
    for r in out.values():
        evaluate_run(r, real=root / "real.csv", quiet=True, classifiers=("tfidf-logreg",), secrets=["pizza"])
        build_report(r)
        build_report(r, diagnostics=True)
    return out


@pytest.mark.parametrize("method", ["augpe", "secpe", "wasp", "dpkps"])
def test_release_of_every_method_is_clean(runs: dict[str, Path], method: str) -> None:
    run = runs[method]
    files = {p.relative_to(run).as_posix() for p in release_files(run)}
    assert {"config.yaml", "privacy.json", "prompts.jsonl", "synthetic.jsonl", "evaluation.json",
            "report.html"} <= files and not any(f.startswith("private/") for f in files)
    found = scan_release(run)
    assert not found, summary(found)  # config.yaml names its files only (the full one is private/config.yaml)
    # the private side holds what the release must not: the scan would flag it there
    private = json.loads((run / "private" / "evaluation.json").read_text())
    assert "runtime" in private and "seconds" in private
    assert N_PRIVATE in private_counts(run)


def _copy(run: Path, tmp: Path) -> Path:
    dst = tmp / run.name
    shutil.copytree(run, dst)
    return dst


def _kinds(run: Path) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for f in scan_release(run):
        out[(f.file, f.kind)] = out.get((f.file, f.kind), 0) + 1
    return out


def _edit_json(path: Path, **extra: object) -> None:
    obj = json.loads(path.read_text())
    obj.update(extra)
    path.write_text(json.dumps(obj, indent=2))


@pytest.mark.parametrize("method", ["augpe", "wasp"])
def test_an_unrounded_noisy_value_in_evaluation_json_is_caught(runs: dict[str, Path], tmp_path: Path,
                                                               method: str) -> None:
    run = _copy(runs[method], tmp_path)
    kept = kept_values(run)
    raw = float(kept[np.argmax(np.abs(kept))])
    assert raw != float(f"{raw:.4g}")  # a raw double: more digits than a release keeps
    _edit_json(run / "evaluation.json", planted={"votes": [raw]})
    assert _kinds(run) == {("evaluation.json", "unrounded_noisy_value"): 1}
    # the same value rounded as the release rounds it is fine
    _edit_json(run / "evaluation.json", planted={"votes": [float(f"{raw:.4g}")]})
    assert _kinds(run) == {}


def test_what_evaluation_json_held_before_the_split_is_caught(runs: dict[str, Path], tmp_path: Path) -> None:
    """evaluation.json used to hold every noisy vote bin unrounded (vote_distribution of the raw votes), the
    stage timings, a time stamp and the real corpus's absolute path: each part is flagged."""
    from privtext.evaluate.runinfo import RunView
    from privtext.evaluate.runstats import vote_distribution

    run = _copy(runs["augpe"], tmp_path)
    view = RunView(run)
    old = json.loads((run / "private" / "evaluation.json").read_text())  # timings, time stamp, absolute path
    old["votes"] = {str(t): vote_distribution(view.candidates(t), label_columns=view.label_columns)
                    for t in view.iterations()}
    (run / "evaluation.json").write_text(json.dumps(old))
    kinds = _kinds(run)
    for kind in ("unrounded_noisy_value", "unrounded_number", "timing", "timestamp", "absolute_path"):
        assert kinds.get(("evaluation.json", kind), 0) >= 1, (kind, kinds)


def test_sums_of_raw_votes_timings_and_timestamps_are_caught(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _copy(runs["augpe"], tmp_path)
    total = float(np.sum(kept_values(run)))
    _edit_json(run / "evaluation.json", total_votes=total, wall_seconds=12.5, created="2026-01-02T03:04:05")
    assert _kinds(run) == {("evaluation.json", "unrounded_number"): 1, ("evaluation.json", "timing"): 1,
                           ("evaluation.json", "timestamp"): 1}


def test_a_prompt_time_stamp_is_caught(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _copy(runs["secpe"], tmp_path)
    lines = (run / "prompts.jsonl").read_text().splitlines()
    rec = json.loads(lines[3])
    assert "t" not in rec  # the prompt log writes none
    rec["t"] = round(time.time(), 3)
    lines[3] = json.dumps(rec)
    (run / "prompts.jsonl").write_text("\n".join(lines) + "\n")
    found = [f for f in scan_release(run) if f.kind == "timestamp"]
    assert len(found) == 1 and found[0].file == "prompts.jsonl" and found[0].where.startswith("line 4")


def test_paths_counts_and_raw_values_in_the_report_are_caught(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _copy(runs["wasp"], tmp_path)
    html = (run / "report.html").read_text()
    assert str(run) not in html and str(runs["wasp"]) not in html
    raw = float(kept_values(run)[-1])
    planted = html.replace("</main>", f"<p>run <code>{run}</code></p><table><tr><td>{N_PRIVATE}</td>"
                                      f"<td>{raw!r}</td></tr></table></main>")
    (run / "report.html").write_text(planted)
    assert _kinds(run) == {("report.html", "absolute_path"): 1, ("report.html", "private_count"): 1,
                           ("report.html", "unrounded_noisy_value"): 1}


def test_an_exact_private_count_in_a_json_file_is_caught(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _copy(runs["dpkps"], tmp_path)
    _edit_json(run / "privacy.json", private_records=N_PRIVATE)
    found = scan_release(run)
    assert [(f.file, f.kind, f.where) for f in found if f.file != "config.yaml"] == [
        ("privacy.json", "private_count", "private_records")]


def test_a_new_file_anywhere_outside_private_is_scanned(runs: dict[str, Path], tmp_path: Path) -> None:
    run = _copy(runs["secpe"], tmp_path)
    (run / "extra").mkdir()
    (run / "extra" / "notes.txt").write_text(f"made at 2026-03-04 10:11 in {Path.home()}/work\n")
    (run / "extra" / "votes.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xfe")
    # anything under private/ is not the release
    (run / "private" / "notes.txt").write_text(f"{run} 2026-03-04T10:11\n")
    assert _kinds(run) == {("extra/notes.txt", "timestamp"): 1, ("extra/notes.txt", "absolute_path"): 1,
                           ("extra/votes.npy", "unreadable"): 1}


def test_scan_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    from privtext.errors import RunError

    with pytest.raises(RunError, match="not a privtext run directory"):
        scan_release(tmp_path)


def test_a_released_vocabulary_term_named_like_a_time_key_is_a_word(runs: dict[str, Path], tmp_path: Path) -> None:
    """A DP vocabulary drew the word "time" once and the scan called it a time stamp (a flaky contract case): the
    keys of released word- or label-keyed maps are data; the same key at the top is still a time stamp."""
    run = _copy(runs["augpe"], tmp_path)
    doc = json.loads((run / "privacy.json").read_text())
    doc["dp_vocabulary"] = {"time": 3.0, "seconds": 2.0, "created": 1.0}
    doc["label_histogram"] = {"date": 4.0}
    (run / "privacy.json").write_text(json.dumps(doc))
    assert not [f for f in scan_release(run) if f.file == "privacy.json"]
    doc["time"] = "noon"
    (run / "privacy.json").write_text(json.dumps(doc))
    assert [(f.kind, f.where) for f in scan_release(run) if f.file == "privacy.json"] == [("timestamp", "time")]


# ------------------------------------------------------------------------------- each rule on a hand-built run
# A run directory written here in milliseconds (config.yaml naming a private file of N_PRIVATE records, one kept
# release), so that every rule of the scan has a test of its own that a one-line change to it fails
# (benchmarks/mutants.py: the digit threshold, the timing suffixes, ...).

RAW = 123.456789012345  # a raw noisy double the run keeps


@pytest.fixture
def mini_run(tmp_path: Path) -> Path:
    from privtext.data import Corpus

    run = tmp_path / "run"
    (run / "private" / "checkpoints" / "releases").mkdir(parents=True)
    texts = tuple(f"private record number {i}" for i in range(N_PRIVATE))
    write_corpus(Corpus(tuple(str(i) for i in range(N_PRIVATE)), texts, {}), tmp_path / "private.csv")
    (run / "config.yaml").write_text(f"method: augpe\nseed: 3\ndata:\n  private: {tmp_path / 'private.csv'}\n"
                                     "evolution:\n  num_samples: 12\n")
    np.savez(run / "private" / "checkpoints" / "releases" / "votes.npz",
             noisy=np.array([RAW, -0.5, 2.0, 1234.5, 0.012345, 98765.4321, 3.14159]))
    (run / "privacy.json").write_text(json.dumps({"method": "augpe", "released": {"votes": 123.5}}))
    return run


def _found(run: Path) -> list[tuple[str, str, str]]:
    return [(f.file, f.kind, f.where) for f in scan_release(run) if f.file != "config.yaml"]


def test_the_hand_built_run_is_clean(mini_run: Path) -> None:
    assert _found(mini_run) == []
    assert private_counts(mini_run) == {N_PRIVATE: "the number of private records"}
    assert 1234.5 in kept_values(mini_run)


@pytest.mark.parametrize("kept", [1234.5, 0.012345, 98765.4321, 3.14159, RAW])
@pytest.mark.parametrize("where", ["notes.txt", "page.html", "string in json"])
def test_a_raw_value_written_in_text_with_more_digits_than_a_release_keeps_is_caught(
        mini_run: Path, kept: float, where: str) -> None:
    """Text (a log line, a page, a string in JSON) holding a kept raw value with 5, 6, 7, 9 or 15 significant digits
    is flagged; the same value rounded to the release's 4 digits is not."""
    def plant(tok: str) -> None:
        if where == "notes.txt":
            (mini_run / "notes.txt").write_text(f"the vote was {tok} in round 2\n")
        elif where == "page.html":
            (mini_run / "page.html").write_text(f"<html><body><p>the vote was {tok}</p></body></html>")
        else:
            (mini_run / "summary.json").write_text(json.dumps({"note": f"the vote was {tok}"}))

    plant(repr(kept))
    found = _found(mini_run)
    assert [k for _, k, _ in found] == ["unrounded_noisy_value"], found
    plant(f"{kept:.4g}")
    assert _found(mini_run) == []


@pytest.mark.parametrize("x", [12.345, 2.71828, 0.1234567, 2.718281828])
def test_an_unrounded_float_in_json_is_caught_but_a_rounded_one_is_not(mini_run: Path, x: float) -> None:
    """5, 6, 7 or 10 significant digits (none a kept value): one more than a release keeps is already too many."""
    (mini_run / "stats.json").write_text(json.dumps({"mean_vote": x, "fid": 0.1235, "rank": 3}))
    assert _found(mini_run) == [("stats.json", "unrounded_number", "mean_vote")]
    (mini_run / "stats.json").write_text(json.dumps({"mean_vote": 2.718, "fid": 0.1235, "rank": 3}))
    assert _found(mini_run) == []


def test_privacy_json_holds_unrounded_parameters_but_not_unrounded_released_values(mini_run: Path) -> None:
    doc = json.loads((mini_run / "privacy.json").read_text())
    doc["parameters"] = {"noise_multiplier": 1.23456789}  # a configured or calibrated parameter: public
    (mini_run / "privacy.json").write_text(json.dumps(doc))
    assert _found(mini_run) == []
    doc["released"]["label_histogram"] = {"a": 12.3456789}
    (mini_run / "privacy.json").write_text(json.dumps(doc))
    assert _found(mini_run) == [("privacy.json", "unrounded_number", "released.label_histogram.a")]


@pytest.mark.parametrize("key", ["seconds", "runtime", "elapsed", "wall_seconds", "generation_seconds",
                                 "embed_secs", "vote_ms", "round_elapsed", "stage_duration", "total_runtime"])
def test_every_timing_key_and_suffix_is_caught(mini_run: Path, key: str) -> None:
    (mini_run / "evaluation.json").write_text(json.dumps({"fid": 0.5, "parts": {key: 12.5}}))
    assert _found(mini_run) == [("evaluation.json", "timing", f"parts.{key}")]


def test_a_mapping_of_stage_timings_and_a_timing_table_header_are_caught(mini_run: Path) -> None:
    (mini_run / "evaluation.json").write_text(json.dumps({"stages": {"vote": 1.5}}))
    (mini_run / "report.html").write_text("<table><tr><th>Stage</th><th>Wall time</th></tr></table>")
    assert sorted(_found(mini_run)) == [("evaluation.json", "timing", "stages"),
                                        ("report.html", "timing", "table header")]


@pytest.mark.parametrize(("doc", "where"), [({"created": "noon"}, "created"), ({"x": {"t": 1767225600.5}}, "x.t"),
                                            ({"log": "at 2026-01-02 03:04"}, "log")])
def test_time_stamps_are_caught(mini_run: Path, doc: dict, where: str) -> None:
    (mini_run / "meta.json").write_text(json.dumps(doc))
    assert _found(mini_run) == [("meta.json", "timestamp", where)]


def test_an_exact_private_count_is_caught_unless_a_public_size_explains_it(mini_run: Path) -> None:
    (mini_run / "stats.json").write_text(json.dumps({"records_seen": N_PRIVATE, "n_candidates": N_PRIVATE}))
    assert _found(mini_run) == [("stats.json", "private_count", "records_seen")]
    (mini_run / "page.html").write_text(f"<p>{N_PRIVATE} records</p>")
    assert ("page.html", "private_count", "text") in _found(mini_run)
    cfg = (mini_run / "config.yaml").read_text().replace("num_samples: 12", f"num_samples: {N_PRIVATE}")
    (mini_run / "config.yaml").write_text(cfg)  # now a configured number: public
    (mini_run / "page.html").unlink()
    assert _found(mini_run) == []


def test_local_paths_and_binary_files_are_caught(mini_run: Path) -> None:
    (mini_run / "notes.txt").write_text(f"written to {mini_run}/synthetic.jsonl\n")
    (mini_run / "sub").mkdir()
    (mini_run / "sub" / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    (mini_run / "sub" / "private").mkdir()
    (mini_run / "sub" / "private" / "x.txt").write_text("/home/someone/data.csv\n")  # only the top private/ is not
    assert sorted(_found(mini_run)) == [("notes.txt", "absolute_path", "line 1"),
                                        ("sub/blob.bin", "unreadable", "file"),
                                        ("sub/private/x.txt", "absolute_path", "line 1")]
