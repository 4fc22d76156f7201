"""The OpenAI-compatible backend against a real local server (127.0.0.1): faults, retries, Retry-After, no retry
on client errors, concurrency, token usage, and the API key kept out of logs, errors and the prompt log."""

from __future__ import annotations

import email.utils
import logging
import threading
import time
import traceback

import numpy as np
import pytest

pytest.importorskip("openai")

from privtext.atomicio import PromptLog
from privtext.backends.openai_client import parse_retry_after
from privtext.errors import BackendError, ConfigError
from privtext.generate import GeneratorContext, LabelInfo, VariationSpec, build_generator
from privtext.testing import Fault, OpenAIServer
from privtext.testing.openai_server import default_reply

KEY = "sk-privtext-test-0123456789abcdef"
ENV = "PRIVTEXT_OPENAI_TEST_KEY"


@pytest.fixture(scope="module")
def server():
    with OpenAIServer(api_key=KEY, echo_key_in_errors=True) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer):
    monkeypatch.setenv(ENV, KEY)
    server.clear_faults()
    yield
    server.clear_faults()


def make(server: OpenAIServer, log: PromptLog | None = None, **opts):
    cfg = {"backend": "openai", "model": "test-model", "base_url": server.url, "api_key_env": ENV,
           "backoff_base": 0.01, "backoff_max": 0.05, "timeout": 5, **opts}
    return build_generator(cfg, GeneratorContext(prompt_log=log))


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------------------ faults


@pytest.mark.parametrize("mode,fault", [
    ("chat", Fault.status(500)),
    ("chat", Fault.status(502)),
    ("chat", Fault.status(429)),
    ("chat", Fault.status(408)),
    ("chat", Fault.empty()),
    ("chat", Fault.empty_content()),
    ("chat", Fault.malformed()),
    ("chat", Fault.drop()),
    ("completions", Fault.status(503)),
    ("completions", Fault.empty()),
    ("completions", Fault.empty_content()),
    ("completions", Fault.malformed()),
], ids=lambda x: x if isinstance(x, str) else f"{x.kind}-{x.code}")
def test_transient_faults_are_retried(server: OpenAIServer, fault: Fault, mode: str) -> None:
    g = make(server, mode=mode, max_concurrency=1)
    server.inject(fault, fault)  # two consecutive failures on the first request
    before = server.count()
    out = g.random(None, 3, rng=rng())
    assert len(out) == 3 and all(out)
    assert g.stats.retries == 2
    assert server.count() - before == 3 + 2
    assert server.pending_faults == 0
    assert g.stats.calls == 3
    g.close()


def _recording_sleep(g) -> list[float]:
    """Replace the client's sleep with a recorder (the waits it asked for, without waiting)."""
    waits: list[float] = []
    g.client._sleep = waits.append
    return waits


def test_timeout_is_retried(server: OpenAIServer) -> None:
    g = make(server, timeout=0.3, max_concurrency=1)
    server.inject(Fault.timeout(2.0))
    out = g.random(None, 2, rng=rng())
    assert len(out) == 2 and g.stats.retries == 1
    g.close()


@pytest.mark.timing
def test_timeout_is_retried_promptly(server: OpenAIServer) -> None:
    g = make(server, timeout=0.3, max_concurrency=1)
    server.inject(Fault.timeout(2.0))
    t0 = time.perf_counter()
    g.random(None, 2, rng=rng())
    assert 0.3 <= time.perf_counter() - t0 < 2.0
    g.close()


def test_retry_after_seconds_is_honoured(server: OpenAIServer) -> None:
    g = make(server, backoff_base=0.001, backoff_max=0.001)
    waits = _recording_sleep(g)
    server.inject(Fault.status(429, retry_after=1))
    out = g.random(None, 1, rng=rng())
    assert len(out) == 1 and g.stats.retries == 1
    assert waits == [1.0]  # the server's Retry-After, not the 1 ms backoff


def test_retry_after_http_date_is_honoured(server: OpenAIServer) -> None:
    g = make(server, backoff_base=0.001, backoff_max=0.001)
    waits = _recording_sleep(g)
    t_before = time.time()
    when_ts = int(t_before + 2)  # the header names whole seconds: 1-2 s from now
    server.inject(Fault.status(503, retry_after=email.utils.formatdate(when_ts, usegmt=True)))
    assert len(g.random(None, 1, rng=rng())) == 1
    t_after = time.time()
    # the wait is the header's time minus the client's "now", which lies between t_before and t_after: bounds
    # from the clock readings themselves, so a slow machine cannot make this fail
    assert len(waits) == 1 and g.stats.retries == 1
    assert max(0.0, when_ts - t_after) - 1e-6 <= waits[0] <= when_ts - t_before + 1e-6


@pytest.mark.timing
def test_retry_after_is_really_waited(server: OpenAIServer) -> None:
    g = make(server, backoff_base=0.001, backoff_max=0.001)
    server.inject(Fault.status(429, retry_after=1))
    t0 = time.perf_counter()
    g.random(None, 1, rng=rng())
    assert time.perf_counter() - t0 >= 0.95


def test_retry_after_beyond_the_limit_gives_up(server: OpenAIServer) -> None:
    g = make(server, max_retry_after=5)
    waits = _recording_sleep(g)
    server.inject(Fault.status(429, retry_after=3600))
    with pytest.raises(BackendError, match="retry after 3600 s"):
        g.random(None, 1, rng=rng())
    assert waits == []  # gave up at once, without waiting


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"Retry-After": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(server: OpenAIServer, status: int) -> None:
    g = make(server)
    server.inject(Fault.status(status))
    before = server.count()
    with pytest.raises(BackendError, match=f"not retried: HTTP {status}"):
        g.random(None, 1, rng=rng())
    assert server.count() - before == 1
    assert g.stats.retries == 0


def test_unknown_model_is_a_404_not_retried(server: OpenAIServer) -> None:
    g = make(server, model="no-such-model")
    before = server.count()
    with pytest.raises(BackendError, match="HTTP 404"):
        g.random(None, 1, rng=rng())
    assert server.count() - before == 1


def test_retries_exhausted_is_a_clear_error(server: OpenAIServer) -> None:
    g = make(server, max_retries=2, max_concurrency=1)
    server.inject(Fault.status(500), times=3)
    with pytest.raises(BackendError, match=r"failed after 3 attempt\(s\): HTTP 500"):
        g.random(None, 1, rng=rng())
    assert g.stats.retries == 2
    server.inject(Fault.malformed(), times=3)
    with pytest.raises(BackendError, match="malformed reply: reply is not valid JSON"):
        g.random(None, 1, rng=rng())
    server.inject(Fault.empty(), times=3)
    with pytest.raises(BackendError, match="no choices"):
        g.random(None, 1, rng=rng())


# ----------------------------------------------------------------------------------------------- the key


def test_api_key_never_leaks(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
                             caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = PromptLog(None)
    g = make(server, log)
    server.inject(Fault.status(500))
    assert len(g.random(None, 2, rng=rng())) == 2
    assert server.requests[-1].authorized  # the key was sent, in the header
    # a wrong key: the server echoes it in its 401 message; privtext scrubs it
    wrong = "sk-wrong-key-that-must-not-leak-42"
    monkeypatch.setenv(ENV, wrong)
    g2 = make(server, log)
    with pytest.raises(BackendError) as ei:
        g2.random(None, 1, rng=rng())
    err = ei.value
    text = str(err) + repr(err) + "".join(traceback.format_exception(err))
    assert "HTTP 401" in str(err) and "***" in str(err)
    for secret in (KEY, wrong):
        assert secret not in text
        assert secret not in caplog.text
        assert all(secret not in str(r) for r in log.memory)
    assert err.__cause__ is None and err.__context__ is None


def test_missing_key_for_the_openai_service_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ConfigError, match="NO_SUCH_KEY_VAR"):
        build_generator({"backend": "openai", "model": "gpt-4o-mini", "api_key_env": "NO_SUCH_KEY_VAR"},
                        GeneratorContext())


def test_local_server_without_key(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with OpenAIServer() as srv:
        g = build_generator({"backend": "openai", "model": "test-model", "base_url": srv.url,
                             "api_key_env": "NO_SUCH_KEY_VAR"}, GeneratorContext())
        assert len(g.random(None, 1, rng=rng())) == 1
        g.close()
    # a server that wants a key says so, and the error says which variable was empty
    g = make(server, api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(BackendError, match=r"HTTP 401.*'NO_SUCH_KEY_VAR' is empty"):
        g.random(None, 1, rng=rng())


def test_unknown_option_suggests_the_right_one(server: OpenAIServer) -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'temprature' \(did you mean 'temperature'\?\)"):
        make(server, temprature=0.7)
    with pytest.raises(ConfigError, match="max_concurrency"):
        make(server, max_concurrency=0)
    with pytest.raises(ConfigError, match="mode"):
        make(server, mode="responses")


# ------------------------------------------------------------------------------------- wire and ordering


def test_prompts_are_logged_before_any_request(server: OpenAIServer) -> None:
    log = PromptLog(None)
    seen: list[int] = []

    def reply(prompt: str, *, seed, model: str, index: int = 0) -> str:
        seen.append(log.count)
        return default_reply(prompt, seed=seed, model=model, index=index)

    old = server.reply
    server.reply = reply
    try:
        g = make(server, log)
        g.variation(["a b c d e f", "g h i j", "k l m n o"], None, VariationSpec(kind="blank"), rng=rng())
    finally:
        server.reply = old
    assert seen and min(seen) == 3  # all three prompts were in the log when the first request arrived


def test_concurrency_keeps_order(server: OpenAIServer) -> None:
    texts = [f"text number {i} about soup and bread" for i in range(6)]
    serial = make(server, max_concurrency=1)
    ref = serial.variation(texts, None, VariationSpec(kind="paraphrase"), rng=rng(5))
    par = make(server, max_concurrency=6)
    server.inject(*[Fault.delay(0.2) for _ in range(6)])
    before = len(server.requests)
    out = par.variation(texts, None, VariationSpec(kind="paraphrase"), rng=rng(5))
    assert out == ref  # answers arrive out of order; the outputs keep the inputs' order
    assert len(server.requests) - before == 6


@pytest.mark.timing
def test_concurrency_saves_time(server: OpenAIServer) -> None:
    texts = [f"text number {i} about soup and bread" for i in range(6)]
    par = make(server, max_concurrency=6)
    server.inject(*[Fault.delay(0.4) for _ in range(6)])
    t0 = time.perf_counter()
    par.variation(texts, None, VariationSpec(kind="paraphrase"), rng=rng(5))
    assert time.perf_counter() - t0 < 6 * 0.4 * 0.6  # the six delayed requests overlapped


def test_each_request_carries_its_own_seed(server: OpenAIServer) -> None:
    g = make(server, max_concurrency=1)
    before = len(server.requests)
    g.random(None, 4, rng=rng(1))
    seeds = [r.body["seed"] for r in server.requests[before:]]
    assert len(set(seeds)) == 4 and all(isinstance(s, int) for s in seeds)
    g2 = make(server, send_seed=False)
    before = len(server.requests)
    g2.random(None, 1, rng=rng(1))
    assert "seed" not in server.requests[before].body


def test_payload_maps_the_options(server: OpenAIServer) -> None:
    g = make(server, temperature=0.3, top_p=0.9, max_tokens=7, stop=["\n\n"], presence_penalty=0.5,
             system_prompt="Be brief.", extra_body={"top_k": 20})
    before = len(server.requests)
    g.random(LabelInfo(("c",), ("Topic: X",)), 1, rng=rng())
    body = server.requests[before].body
    assert body["temperature"] == 0.3 and body["top_p"] == 0.9 and body["max_tokens"] == 7
    assert body["stop"] == ["\n\n"] and body["presence_penalty"] == 0.5 and body["top_k"] == 20
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "Topic: X" in body["messages"][1]["content"]
    c = make(server, mode="completions")
    before = len(server.requests)
    c.random(None, 1, rng=rng())
    assert server.requests[before].path.endswith("/completions") and isinstance(
        server.requests[before].body["prompt"], str)


def test_token_usage_is_counted(server: OpenAIServer) -> None:
    g = make(server)
    out = g.random(None, 3, rng=rng(2))
    assert g.stats.completion_tokens == sum(len(t.split()) for t in out)
    assert g.stats.prompt_tokens > 0 and g.stats.calls == 3 and g.stats.prompts == 3


def test_a_failed_request_in_a_batch_fails_the_call(server: OpenAIServer) -> None:
    g = make(server, max_concurrency=4)
    before = threading.active_count()  # other tests in the session may have left daemon threads behind
    server.inject(Fault.status(401))
    with pytest.raises(BackendError, match="HTTP 401"):
        g.random(None, 4, rng=rng())
    # no leak: what remains is bounded by the concurrency — the generator's reusable pool of 4 workers and at
    # most one server handler per kept-alive connection (4) — whatever else the session has running
    assert threading.active_count() <= before + 2 * 4
