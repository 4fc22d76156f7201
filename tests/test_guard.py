"""The run's guard: a prompt that holds a private record's whole text (any length), a private 8-gram that no public
text holds, or a detected secret value is flagged (issue 21: bug 3 and the two guard mutants)."""

from __future__ import annotations

import pytest

from privtext.guard import PrivateGuard

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
