"""The run's guard: a prompt that holds a private record's whole text (any length), a private 8-gram that no public
text holds, or a detected secret value is flagged (issue 21: bug 3 and the two guard mutants)."""

from __future__ import annotations

import pytest

from privtext.guard import PrivateGuard
from tests.conftest import plant_in_first_prompt

PUBLIC = [
    "the staff was friendly and the food came out quickly so we will be back again soon",
    "parking was easy to find and the prices were fair for the portion sizes we got",
    "i ordered the soup and a salad and both were fresh and tasty and hot",
    "we sat outside on the patio and enjoyed the warm evening with a cold drink",
    "service was slow at first but the waiter apologized and brought us free dessert",
]
# 33 ordinary words, every one of them in PUBLIC: no private-only word anywhere
LONG = ("the staff was friendly and the prices were fair so we sat outside on the patio and enjoyed the soup and "
        "a salad and both were fresh and the waiter brought us free dessert")


def _prompt(body: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You write restaurant reviews."},
            {"role": "user", "content": f"Rephrase this review:\n{body}\nKeep it short."}]


def test_the_long_record_is_made_of_public_words_only() -> None:
    pub_words = {w for t in PUBLIC for w in t.split()}
    assert len(LONG.split()) >= 30 and set(LONG.split()) <= pub_words


def test_a_long_private_record_of_ordinary_words_verbatim_in_a_prompt_is_flagged() -> None:
    """Mutant (a): WASP put a private record verbatim into every contrastive prompt and the audit said clean."""
    guard = PrivateGuard([LONG, "another private note about the parking lot"], PUBLIC)
    res = guard.scan([_prompt("the food came out quickly"), _prompt(LONG.upper() + "!")])
    assert res.flagged == [2], res.to_dict()
    assert res.record_hits == 1 and not res.clean


def test_the_whole_record_check_alone_catches_a_record_whose_every_8gram_is_public() -> None:
    """Mutant (b): without the whole-record check nothing fails. Here every 8-gram of the private record occurs in
    public text (its two halves are public records that overlap by 8 words), so only the whole-record check can
    see it; the two halves alone are not the record and are clean."""
    words = LONG.split()
    halves = [" ".join(words[:20]), " ".join(words[12:])]
    guard = PrivateGuard([LONG], [*PUBLIC, *halves])
    assert not guard.hits(halves[0])[0]
    res = guard.scan([_prompt(halves[0]), _prompt(halves[1]), _prompt("intro " + LONG + " outro")])
    assert res.ngram_hits == 0
    assert res.flagged == [3] and res.record_hits == 1


@pytest.mark.parametrize("record", ["card not working", "why was my card declined twice today"])
def test_a_short_private_record_inside_a_prompt_is_flagged(record: str) -> None:
    guard = PrivateGuard([record], PUBLIC)
    assert guard.scan([_prompt(f"Example: {record.title()}. Write one like it.")]).flagged == [1]


def test_any_private_8gram_that_no_public_text_holds_is_flagged() -> None:
    """An 8-gram of public words that occurs in a private record and in no public text: private text."""
    private = ["after the waiter apologized we sat outside on the patio with free dessert"]
    guard = PrivateGuard(private, PUBLIC)
    piece = "apologized we sat outside on the patio with"  # 8 words, all public, the 8-gram is not
    res = guard.scan([_prompt(f"x {piece} y"), _prompt("we sat outside on the patio and enjoyed the warm evening")])
    assert res.flagged == [1] and res.ngram_hits == 1


def test_public_prompts_are_clean() -> None:
    guard = PrivateGuard([LONG], PUBLIC)
    res = guard.scan([_prompt(t) for t in PUBLIC])
    assert res.clean and res.flagged == [] and res.prompts == len(PUBLIC)


# ----------------------------------------------------------------------------------------------- secret values


def test_detected_secret_values_are_found_in_prompts_and_synthetic_text() -> None:
    """Bug 3: a detected value (canonical: digits-only) in a prompt or a synthetic text is reported."""
    from privtext.secrets import build_detector

    private = ["Please call me on 467 3395 after six", "my email is ann@example.com thanks"]
    matrix = build_detector("regex").detect(private)
    guard = PrivateGuard(private, PUBLIC, secret_values=matrix)
    res = guard.scan([_prompt("Call 467-3395 now"), _prompt(PUBLIC[0]), _prompt("write to ANN@example.com")])
    assert res.secret_hits == 2 and res.flagged == [1, 3] and not res.clean
    assert res.to_dict()["prompts_with_secret_value"] == 2
    syn = guard.scan_texts(["a nice place", "locker 4673395", "ok"])
    assert syn.secret_hits == 1 and syn.flagged == [2] and not syn.clean
    assert "467" not in repr(res.to_dict()) + repr(syn.to_dict())  # counts and lines, never values


def test_without_secret_values_the_secret_scan_finds_nothing() -> None:
    from privtext.secrets import build_detector

    private = ["Please call me on 467 3395 after six"]
    guard = PrivateGuard(private, PUBLIC)
    assert guard.scan_texts(["locker 4673395"]).clean
    guard.set_secret_values(build_detector("regex").detect(private))  # detected after the guard was built
    assert not guard.scan_texts(["locker 4673395"]).clean
    with pytest.raises(TypeError, match="secret_values"):
        guard.set_secret_values(["4673395"])


def test_a_secret_value_that_public_text_holds_is_counted_not_flagged() -> None:
    """SecPE's random-word secrets are ordinary words: the 5000-review Yelp benchmark called every SecPE run NOT
    PRIVATE because the public 4-gram wrote such words (all present in the public reviews). A value some public
    text holds explains itself; one no public text holds is still flagged, alone or beside a public one."""
    from privtext.secrets import build_detector

    private = ["the pedicure was relaxing", "call me on 467 3395 about the pedicure", "great lobster rolls"]
    public = [*PUBLIC, "my pedicure took an hour"]  # "pedicure" is public, "lobster" and the number are not
    det = build_detector({"name": "random_words", "from_private": True, "quantile": 0.5, "num_secrets": 20,
                          "stop_words": None})
    matrix = det.detect(private)
    assert {"pedicure", "lobster"} <= set(det.words)
    union = build_detector(["regex"]).detect(private)
    public_words = {w for t in public for w in t.split()}
    assert len(PrivateGuard(private, public, secret_values=matrix).public_secrets) == len(
        [w for w in det.words if w in public_words])  # "pedicure" among them, "lobster" not
    assert PrivateGuard(private, public, secret_values=union).public_secrets == frozenset()  # the number
    guard = PrivateGuard(private, public, secret_values=matrix)
    res = guard.scan([_prompt("a pedicure and a nap"), _prompt("fresh lobster"), _prompt("pedicure then lobster")])
    assert res.flagged == [2, 3] and res.secret_hits == 2 and res.public_secret_hits == 1 and not res.clean
    assert res.to_dict()["prompts_with_public_secret_value"] == 1
    syn = guard.scan_texts(["my pedicure took an hour", "ok"])
    assert syn.clean and syn.public_secret_hits == 1 and syn.flagged == []
    assert not guard.scan_texts(["lobster bisque"]).clean
    # without the public text that holds it, the same word is flagged as before
    strict = PrivateGuard(private, PUBLIC, secret_values=matrix)
    assert not strict.scan_texts(["my pedicure took an hour"]).clean


# ------------------------------------------------------------------------------ text a generator wrote (provenance)


PIECE = "apologized we sat outside on the patio with"  # 8 public words; the 8-gram is only in the private record
PRIVATE = ["after the waiter apologized we sat outside on the patio with free dessert"]


def test_a_private_8gram_a_generator_wrote_before_the_prompt_is_not_flagged() -> None:
    """A generator trained on public text recombined it into a private 8-gram; the prompt built from its output
    holds nothing that was not already public (a function of public text). Counted, not flagged."""
    guard = PrivateGuard(PRIVATE, PUBLIC)
    guard.note_generated([f"so the waiter {PIECE} us"], lines=0)  # written before prompt line 1
    res = guard.scan([_prompt(f"x {PIECE} y")])
    assert res.clean and res.flagged == [] and res.explained_hits == 1 and res.ngram_hits == 0


def test_a_private_8gram_echoed_by_a_generator_after_the_prompt_is_still_flagged() -> None:
    """Order keeps it sound: private text that reached prompt line 2 and was echoed back by the generator after
    line 2 was logged explains nothing about line 2 (it explains line 3, built from the echo)."""
    guard = PrivateGuard(PRIVATE, PUBLIC)
    guard.note_generated([f"echo {PIECE}"], lines=2)
    res = guard.scan([_prompt("the food came out quickly"), _prompt(f"x {PIECE} y"), _prompt(f"again {PIECE}")])
    assert res.flagged == [2] and res.ngram_hits == 1 and res.explained_hits == 1


def test_generated_text_never_excuses_a_whole_record_or_a_secret() -> None:
    guard = PrivateGuard([LONG], PUBLIC)
    guard.note_generated([LONG], lines=0)
    res = guard.scan([_prompt(LONG)])
    assert res.flagged == [1] and res.record_hits == 1


def test_the_prompt_log_tells_the_guard_its_line_count_across_a_resume(tmp_path) -> None:
    """The log counts the lines an earlier process wrote, so generated text is placed against the right lines."""
    from privtext.atomicio import PromptLog

    path = tmp_path / "prompts.jsonl"
    seen: list[tuple[list[str], int]] = []
    with PromptLog(path) as log:
        log.log(backend="b", operation="random", prompt="p1")
        log.observer = lambda texts, lines: seen.append((list(texts), lines))
        log.generated(["out1"])
    with PromptLog(path) as log:  # a resumed run appends
        log.observer = lambda texts, lines: seen.append((list(texts), lines))
        log.log(backend="b", operation="variation", prompt="p2")
        log.generated(["out2"])
    assert seen == [(["out1"], 1), (["out2"], 2)]


def test_a_run_tells_the_guard_what_its_generators_wrote(tmp_path) -> None:
    """The generators' common path (BaseGenerator._finish) reports every output to the run's prompt log."""
    import numpy as np

    from privtext.atomicio import PromptLog
    from privtext.generate.scripted import ScriptedGenerator

    log = PromptLog(None)
    seen: list[tuple[list[str], int]] = []
    log.observer = lambda texts, lines: seen.append((list(texts), lines))
    gen = ScriptedGenerator(prompt_log=log)
    out = gen.random(None, 3, rng=np.random.default_rng(0))
    assert seen == [(out, 3)] and log.count == 3  # after its three prompts


# ------------------------------------------------------------------ public sources (issue 35: no false alarms)


TICKETS_PUBLIC = ["what does a pending transaction mean on my statement",
                  "why is my top up still pending transaction history shows nothing",
                  "how long does a pending transaction take to clear"]


def test_a_short_private_record_that_public_text_holds_is_public_not_flagged() -> None:
    """Issue 35: a private ticket "pending transaction?" that three public messages hold; the 4-gram wrote it into
    variation prompts and every run said NOT PRIVATE. A record some public text holds is public by the run's own
    assumption: counted, not flagged. A short record no public text holds is still flagged."""
    guard = PrivateGuard(["pending transaction?", "refund never arrived wtf"], TICKETS_PUBLIC)
    assert guard.public_records == 1
    res = guard.scan([_prompt("Rephrase: Pending transaction?"), _prompt("x refund never arrived wtf y")])
    assert res.flagged == [2] and res.record_hits == 1 and res.public_record_hits == 1, res.to_dict()


def test_a_long_private_record_that_a_public_text_holds_is_public() -> None:
    guard = PrivateGuard([LONG], [*PUBLIC, "intro " + LONG + " outro"])
    assert guard.public_records == 1
    assert guard.scan([_prompt(LONG)]).clean


def test_templates_and_label_values_are_public_sources() -> None:
    """A private record that only a prompt template (or a label value) holds is public: add_public."""
    guard = PrivateGuard(["keep it short", "card arrival"], PUBLIC)
    prompts = [_prompt("the food came out quickly"), _prompt("intent: card arrival. Write one.")]
    assert guard.scan(prompts).flagged == [1, 2]  # "Keep it short." is in _prompt's own template text
    assert guard.add_public(["Rephrase this review: ... Keep it short.", "card arrival"], source="templates") == 2
    assert guard.scan(prompts).clean


def test_add_public_removes_private_only_ngrams_and_secret_values() -> None:
    from privtext.secrets import build_detector

    private = ["after the waiter apologized we sat outside on the patio with free dessert call 467 3395"]
    guard = PrivateGuard(private, PUBLIC, secret_values=build_detector("regex").detect(private))
    piece = "apologized we sat outside on the patio with"
    assert not guard.scan([_prompt(piece), _prompt("467-3395")]).clean
    guard.add_public([f"a glossary line: {piece}", "hotline 467 3395"], source="glossary")
    assert guard.scan([_prompt(piece), _prompt("467-3395")]).clean


def test_a_short_private_record_a_generator_wrote_before_the_prompt_is_explained() -> None:
    """A 4-gram writes a three-word ticket that no public message holds as such (recombined from public text):
    public by provenance before the prompt that holds it; an echo after the prompt explains nothing."""
    guard = PrivateGuard(["card not working"], PUBLIC)
    guard.note_generated(["my card not working again"], lines=1)
    res = guard.scan([_prompt("Card not working"), _prompt("so card not working")])
    assert res.flagged == [1] and res.record_hits == 1 and res.generated_record_hits == 1, res.to_dict()


def test_a_flagged_prompt_says_what_matched_where_and_why() -> None:
    """The findings (private/diagnostics.json) give the kind, the span of the prompt's words, which record, and
    why no public source explains it — for a whole record, a private-only 8-gram and a secret value."""
    from privtext.guard import prompt_words
    from privtext.secrets import build_detector

    private = ["card not working", "after the waiter apologized we sat outside on the patio with free dessert",
               "please call me on 467 3395 after six"]
    guard = PrivateGuard(private, PUBLIC, secret_values=build_detector("regex").detect(private))
    prompts = [_prompt("x card not working y"), _prompt(f"z {PIECE} z"), _prompt("ring 467-3395")]
    res = guard.scan(prompts)
    assert res.flagged == [1, 2, 3]
    by_line = {f.line: f for f in res.findings}
    f1 = by_line[1]
    assert f1.kind == "private_record" and f1.record == 0 and "no generator wrote it" in f1.why
    assert prompt_words(prompts[0])[slice(*f1.words)] == ["card", "not", "working"]
    f2 = by_line[2]
    assert f2.kind == "private_ngram" and f2.record == 1
    assert " ".join(prompt_words(prompts[1])[slice(*f2.words)]) == PIECE
    assert by_line[3].kind == "secret_value" and by_line[3].record is None
    d = res.to_dict()
    assert len(d["findings"]) == 3 and "467" not in repr(d)


def test_diagnose_prompts_shows_the_matched_text_the_record_and_why(tmp_path, monkeypatch) -> None:
    """A run whose prompt log gets a private record planted into one prompt: the statement says NOT PRIVATE,
    private/diagnostics.json holds the finding, and ``privtext diagnose RUN --prompts`` prints the matched words,
    the record's id and text, and why no public source explains it."""
    import json

    import numpy as np
    from typer.testing import CliRunner

    from privtext.cli import _mount, app
    from privtext.evaluate.diagnose import prompt_findings
    from privtext.testing.tinyrun import tiny_run, toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(3))
    leak = priv.texts[5]
    plant_in_first_prompt(monkeypatch, leak)
    root = tiny_run(tmp_path / "run", private=priv, public=pub, iterations=1)
    st = json.loads((root / "privacy.json").read_text())
    assert st["private"] is False and st["prompt_audit"]["passed"] is False
    d = prompt_findings(root)
    assert d["flagged"] == [1]
    f = next(f for f in d["findings"] if f["kind"] == "private_record")
    assert f["record_id"] == "5" and f["record_text"] == leak  # no data.id_column: the data row, from 0
    assert f["matched"] == " ".join(w.lower() for w in leak.rstrip(".").split())
    _mount()
    out = CliRunner().invoke(app, ["diagnose", str(root), "--prompts"])
    assert out.exit_code == 0, out.output
    assert "private record 5 " in out.output and "no public text holds it" in out.output
    assert "docs/privacy.md" in out.output
    # a clean run says so
    monkeypatch.undo()
    clean = tiny_run(tmp_path / "clean", private=priv, public=pub, iterations=1)
    assert prompt_findings(clean)["findings"] == [] and prompt_findings(clean)["clean"] is True


def test_a_resumed_runs_guard_knows_what_the_earlier_process_generators_wrote(tmp_path) -> None:
    """Provenance survives a resume (private/guard/: the salt and the keys of generated text with their line
    counts): the earlier process's prompts built from its own outputs are not flagged by the resumed run's audit,
    and order still holds across the two processes. Without the state folder the same prompts are flagged."""
    state = tmp_path / "guard"
    first = PrivateGuard(PRIVATE, PUBLIC, state_dir=state)
    first.note_generated([f"so the waiter {PIECE} us", "card not working"], lines=0)
    first.note_generated([f"late echo {PIECE}"], lines=5)
    first.close()
    assert (state / "salt").stat().st_mode & 0o777 == 0o600
    prompts = [_prompt(f"x {PIECE} y")]
    resumed = PrivateGuard(PRIVATE, PUBLIC, state_dir=state)
    assert resumed.scan(prompts).clean and resumed._generated == first._generated
    assert not PrivateGuard(PRIVATE, PUBLIC).scan(prompts).clean  # a fresh memory flags it
    (state / "generated").write_text((state / "generated").read_text() + "abc")  # a line cut by a kill
    assert PrivateGuard(PRIVATE, PUBLIC, state_dir=state).scan(prompts).clean
    # a lost salt invalidates the kept keys instead of misreading them
    (state / "salt").unlink()
    assert not PrivateGuard(PRIVATE, PUBLIC, state_dir=state).scan(prompts).clean


def test_the_training_check_refuses_private_text_but_never_the_public_corpus() -> None:
    """Issue 36 (a data-dependent abort): a public text equal to a private record is public by the run's
    assumption, so a generator's training check on the public corpus never stops the run (whether it would have
    said one bit about membership); private text that no public text holds is still refused."""
    from privtext.errors import PrivacyError

    public = [*PUBLIC, "Lost password"]
    guard = PrivateGuard(["lost password!", "my very private note"], public)
    guard.assert_public(public, what="ngram training corpus")
    with pytest.raises(PrivacyError, match="record 1 equals a private record"):
        guard.assert_public(["ok", "My very private note."], what="ngram training corpus")


def test_a_run_whose_prompt_audit_fails_exits_3_and_says_no_guarantee_holds(tmp_path, monkeypatch) -> None:
    """Issue 35: runs headlined NOT PRIVATE exited 0 and the headline went on to state the (ε, δ) guarantee. Now
    the headline says no guarantee holds, the summary names the diagnose command, and the exit code is 3; a clean
    run exits 0."""
    import json

    import numpy as np
    import yaml
    from typer.testing import CliRunner

    from privtext.cli import _mount, app
    from privtext.data import write_corpus
    from privtext.testing.tinyrun import toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(4))
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")
    words = sorted({w.strip(".").lower() for t in pub.texts for w in t.split()})

    def config(name: str) -> str:
        cfg = {"method": "augpe", "data": {"private": "private.csv", "public": "public.csv",
                                           "label_columns": ["category"]},
               "generator": {"backend": "scripted", "vocabulary": words},
               "embedder": {"backend": "hashing", "dim": 32, "cache": False},
               "privacy": {"epsilon": 4.0, "delta": 1e-5},
               "evolution": {"num_samples": 10, "iterations": 1, "variations": 2}, "output": name}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
        return str(tmp_path / f"{name}.yaml")

    _mount()
    monkeypatch.chdir(tmp_path)
    ok = CliRunner().invoke(app, ["-q", "run", config("clean")])
    assert ok.exit_code == 0, ok.output
    plant_in_first_prompt(monkeypatch, priv.texts[0])
    bad = CliRunner().invoke(app, ["-q", "run", config("leak")])
    assert bad.exit_code == 3, bad.output
    assert "diagnose" in bad.output and "--prompts" in bad.output
    st = json.loads((tmp_path / "leak" / "privacy.json").read_text())
    assert st["private"] is False and "No guarantee holds for this run" in st["headline"]
    assert st["headline"].index("No guarantee holds") < st["headline"].index("differential privacy")


def test_a_long_record_a_generator_wrote_from_public_ngrams_is_explained_one_with_a_private_ngram_is_not() -> None:
    """A long private record a generator wrote *before* the prompt is explained when every 8-gram of it is public
    (a chain of public n-grams, what a model trained on public text writes). Still flagged: the same record placed
    in a prompt without a generator writing it first (a bug), the record written only after the prompt, and a
    generated long record that holds an 8-gram no public text holds (treated as memorised)."""
    record = "why was i charged a fee for transferring money"
    public = ["why was i charged a fee for transferring the money to my friend",
              "so was i charged a fee for transferring money abroad or not"]
    memorised = "my landlord in leeds got the transfer but my fee was doubled"  # private-only 8-grams
    guard = PrivateGuard([record, memorised], public)
    assert guard.public_records == 0  # no public text holds either record whole
    guard.note_generated([record.capitalize() + "?", memorised], lines=1)  # written after prompt line 1
    prompts = ["write a support message", f"Better: {record}. Worse: ...", f"Better: {memorised}. Worse: ..."]
    res = guard.scan(prompts)
    assert res.flagged == [3], res.to_dict()                       # the memorised record only
    assert res.generated_record_hits == 1 and res.record_hits == 1
    why = next(f.why for f in res.findings if f.kind == "private_record")
    assert "treated as a memorised record" in why
    # without the generator having written it first, the public-chain record is flagged
    fresh = PrivateGuard([record], public)
    res = fresh.scan([_prompt(record)])
    assert res.flagged == [1] and "every 8 words of it occur in public text" in res.findings[0].why
    # written only after the prompt that holds it: an echo explains nothing
    fresh.note_generated([record], lines=1)
    assert fresh.scan([_prompt(record)]).flagged == [1]


def test_a_model_trained_on_checked_public_text_writes_nothing_private_however_long() -> None:
    """Corpus matrix (issue 35): the 4-gram trained on 600 public Banking77 messages wrote the 9-word private ticket
    "Why was I charged a fee for transferring money" (neither 8-gram of it in a public message) and WASP showed it
    in 50 of 2,000 prompts: NOT PRIVATE, a false alarm. Output of a model whose whole training text the guard
    checked (the n-gram and lm generators: PromptLog.generated(..., public_model=True)) explains a long record
    written before the prompt. The same output from another generator, or written after the prompt, does not."""
    from privtext.atomicio import PromptLog
    from privtext.generate.ngram import NgramGenerator

    record = "why was i charged a fee for transferring money"
    public = ["why was i charged a fee on my card", "i was charged a fee for a transfer", "transferring money abroad"]
    prompts = ["write a support message", f"Better: {record}. Worse: ..."]
    for model, after, flagged in ((True, 1, []), (False, 1, [2]), (True, 2, [2])):
        guard = PrivateGuard([record], public)
        log = PromptLog(None)
        log.observer = guard.note_generated
        for _ in range(after):
            log.log(backend="ngram", operation="random", prompt="x")
        log.generated([record], public_model=model)
        res = guard.scan(prompts)
        assert res.flagged == flagged, (model, after, res.to_dict())
    # the offline generators say so only when the run's guard checked their training text
    guard = PrivateGuard([record], public)
    assert NgramGenerator(public=public, guard=guard).trained_on_checked_public
    assert not NgramGenerator(public=public).trained_on_checked_public
