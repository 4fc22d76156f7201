"""The OpenAI-compatible generator fanned out over several local servers (127.0.0.1, the OpenAI wire format):
prompt order kept, load spread with at most ``max_concurrency`` requests in flight per server, a server that
fails (HTTP 500, a dropped connection, a Retry-After) or is down has its prompts served by the others, with exact
retry counts, and a whole run logs every prompt once and passes the prompt audit."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")

from privtext.atomicio import PromptLog
from privtext.errors import BackendError, ConfigError
from privtext.generate import GeneratorContext, VariationSpec, build_generator
from privtext.testing import Fault, OpenAIServer
from privtext.testing.openai_server import default_reply

KEY = "sk-privtext-fanout-0123456789abcdef"
ENV = "PRIVTEXT_FANOUT_TEST_KEY"
DELAY = 0.03  # seconds every reply takes, so requests overlap


class Counting:
    """A server reply that takes DELAY seconds and records how many requests were in the server at once."""

    def __init__(self) -> None:
        self.active = self.peak = self.served = 0
        self.lock = threading.Lock()

    def __call__(self, prompt: str, *, seed, model: str, index: int = 0) -> str:
        with self.lock:
            self.active += 1
            self.served += 1
            self.peak = max(self.peak, self.active)
        time.sleep(DELAY)
        with self.lock:
            self.active -= 1
        return default_reply(prompt, seed=seed, model=model, index=index)


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[OpenAIServer]]:
    monkeypatch.setenv(ENV, KEY)
    srvs = [OpenAIServer(api_key=KEY, reply=Counting()).start() for _ in range(3)]
    yield srvs
    for s in srvs:
        s.stop()


def make(urls: list[str], log: PromptLog | None = None, **opts):
    cfg = {"backend": "openai", "model": "test-model", "base_urls": urls, "api_key_env": ENV,
           "backoff_base": 0.001, "backoff_max": 0.002, "timeout": 5, **opts}
    return build_generator(cfg, GeneratorContext(prompt_log=log))


def reference(server: OpenAIServer, texts: list[str], seed: int) -> list[str]:
    """What one server answers, one request at a time."""
    g = build_generator({"backend": "openai", "model": "test-model", "base_url": server.url, "api_key_env": ENV,
                         "max_concurrency": 1}, GeneratorContext())
    try:
        return g.variation(texts, None, VariationSpec(kind="paraphrase"), rng=np.random.default_rng(seed))
    finally:
        g.close()


def texts(n: int) -> list[str]:
    return [f"text number {i} about soup and bread" for i in range(n)]


def run(g, n: int, seed: int = 5) -> list[str]:
    return g.variation(texts(n), None, VariationSpec(kind="paraphrase"), rng=np.random.default_rng(seed))


def served(s: OpenAIServer) -> int:
    return s.reply.served  # type: ignore[attr-defined,no-any-return]


# ------------------------------------------------------------------------------------------ spreading


def test_order_is_kept_and_the_load_is_spread(servers: list[OpenAIServer]) -> None:
    want = reference(servers[0], texts(36), 5)
    base = [served(s) for s in servers]
    log = PromptLog(None)
    g = make([s.url for s in servers], log, max_concurrency=2)
    got = run(g, 36)
    assert got == want  # replies arrive out of order on three servers; outputs keep the prompts' order
    per = [served(s) - b for s, b in zip(servers, base, strict=True)]
    assert sum(per) == 36 and min(per) >= 6, per  # every server took a share
    assert max(s.reply.peak for s in servers) <= 2  # never more than max_concurrency in flight per server
    assert log.count == 36 and g.stats.prompts == 36 and g.stats.calls == 36 and g.stats.retries == 0
    assert [d["sent"] for d in g.client.server_stats()] == per
    g.close()


@pytest.mark.timing
def test_fan_out_saves_time(servers: list[OpenAIServer]) -> None:
    one = make([servers[0].url], max_concurrency=2)
    t0 = time.perf_counter()
    run(one, 24)
    t_one = time.perf_counter() - t0
    three = make([s.url for s in servers], max_concurrency=2)
    t0 = time.perf_counter()
    run(three, 24)
    assert time.perf_counter() - t0 < 0.6 * t_one


# ------------------------------------------------------------------------------------------- failover


def test_http_500s_are_served_by_the_other_servers_with_exact_retry_counts(servers: list[OpenAIServer]) -> None:
    want = reference(servers[0], texts(24), 5)
    servers[1].inject(Fault.status(500), times=3)
    before = [s.count("/chat/completions") for s in servers]
    log = PromptLog(None)
    g = make([s.url for s in servers], log, max_concurrency=2)
    assert run(g, 24) == want
    assert servers[1].pending_faults == 0
    assert g.stats.retries == 3 and g.stats.calls == 24
    sent = [s.count("/chat/completions") - b for s, b in zip(servers, before, strict=True)]
    assert sum(sent) == 24 + 3
    st = g.client.server_stats()
    assert [d["failed"] for d in st] == [0, 3, 0] and sum(d["ok"] for d in st) == 24
    assert log.count == 24  # retried prompts are not logged again


def test_a_server_that_is_down_has_its_prompts_served_by_the_others(servers: list[OpenAIServer]) -> None:
    dead = servers[2].url
    servers[2].stop()  # connection refused from now on
    want = reference(servers[0], texts(12), 5)
    # one request per server at a time; a failed server is benched for ≥ 5 s: the dead one is tried exactly once
    g = make([s.url for s in servers[:2]] + [dead], max_concurrency=1, backoff_base=10, backoff_max=10)
    assert run(g, 12) == want
    st = g.client.server_stats()
    assert g.stats.retries == 1 and st[2]["failed"] == 1 and st[2]["ok"] == 0 and st[2]["benched"]
    assert st[0]["ok"] + st[1]["ok"] == 12 and g.stats.calls == 12
    g.close()


def test_a_server_that_goes_down_mid_run(servers: list[OpenAIServer]) -> None:
    g = make([s.url for s in servers], max_concurrency=1, backoff_base=10, backoff_max=10)
    run(g, 9)
    assert [d["ok"] for d in g.client.server_stats()] == [3, 3, 3] and g.stats.retries == 0
    servers[0].inject(Fault.drop(), times=50)  # from now on it closes every connection without a reply
    assert run(g, 9, seed=6) == reference(servers[1], texts(9), 6)
    st = g.client.server_stats()
    assert g.stats.retries == 1 and st[0]["failed"] == 1 and st[0]["ok"] == 3
    assert st[1]["ok"] + st[2]["ok"] == 6 + 9


def _retry_after_on_one_server(servers: list[OpenAIServer]) -> float:
    """A 429 with Retry-After 30 s from one of two servers: the other serves the batch. Returns the wall time."""
    servers[0].inject(Fault.status(429, retry_after=30))
    g = make([s.url for s in servers[:2]], max_concurrency=1)
    t0 = time.perf_counter()
    assert len(g.random(None, 4, rng=np.random.default_rng(0))) == 4
    dt = time.perf_counter() - t0
    st = g.client.server_stats()
    # the failed server is benched (its 30 s are still running) and served nothing; the other served all four
    assert g.stats.retries == 1 and st[0] == {**st[0], "failed": 1, "ok": 0, "benched": True} and st[1]["ok"] == 4
    return dt


def test_retry_after_on_one_server_does_not_stall_the_batch(servers: list[OpenAIServer]) -> None:
    _retry_after_on_one_server(servers)


@pytest.mark.timing
def test_retry_after_on_one_server_does_not_stall_the_batch_promptly(servers: list[OpenAIServer]) -> None:
    assert _retry_after_on_one_server(servers) < 10  # nobody waited the 30 s


def test_every_server_failing_exhausts_the_retries(servers: list[OpenAIServer]) -> None:
    for s in servers[:2]:
        s.inject(Fault.status(503), times=10)
    g = make([s.url for s in servers[:2]], max_retries=3)
    with pytest.raises(BackendError, match=r"failed after 4 attempt\(s\) over 2 server\(s\).*HTTP 503"):
        g.random(None, 1, rng=np.random.default_rng(0))
    assert g.stats.retries == 3
    assert [d["failed"] for d in g.client.server_stats()] == [2, 2]  # alternating servers


def test_a_client_error_is_not_retried_elsewhere(servers: list[OpenAIServer]) -> None:
    servers[0].inject(Fault.status(400))
    before = servers[1].count()
    g = make([s.url for s in servers[:2]])
    with pytest.raises(BackendError, match="not retried: HTTP 400"):
        g.random(None, 1, rng=np.random.default_rng(0))
    assert g.stats.retries == 0 and servers[1].count() == before


def test_the_api_key_never_leaks_from_a_fanned_out_error(monkeypatch: pytest.MonkeyPatch,
                                                        servers: list[OpenAIServer]) -> None:
    monkeypatch.setenv(ENV, KEY)
    for s in servers[:2]:
        s.inject(Fault.status(503, body={"error": {"message": f"overloaded, key {KEY}"}}), times=5)
    g = make([s.url for s in servers[:2]], max_retries=1)
    with pytest.raises(BackendError) as e:
        g.random(None, 1, rng=np.random.default_rng(0))
    assert KEY not in str(e.value) and "***" in str(e.value)


# ------------------------------------------------------------------------------------------ config


@pytest.mark.parametrize("urls,match", [
    ([], "base_urls is empty"),
    (["localhost:8000/v1"], "'localhost:8000/v1' is not an http"),
    (["http://127.0.0.1:1/v1", "ftp://x/v1"], "'ftp://x/v1' is not an http"),
    (["http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"], "more than once"),
    ("http://127.0.0.1:1/v1", "base_urls"),
])
def test_bad_base_urls_are_config_errors(urls, match: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    with pytest.raises(ConfigError, match=match):
        make(urls)


def test_base_url_and_base_urls_together_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, KEY)
    with pytest.raises(ConfigError, match=r"base_url .* or base_urls, not both"):
        make(["http://127.0.0.1:1/v1"], base_url="http://127.0.0.1:2/v1")


# ------------------------------------------------------------------------------------------ whole run


def test_a_whole_run_over_two_servers_logs_every_prompt_once(servers: list[OpenAIServer], tmp_path: Path) -> None:
    from privtext.config import config_from_dict
    from privtext.data import write_corpus
    from privtext.runner import run_config
    from privtext.testing.tinyrun import toy_corpora

    priv, pub, _ = toy_corpora(rng=np.random.default_rng(0), n_private=30, n_pool=80)
    write_corpus(priv, tmp_path / "private.csv")
    write_corpus(pub, tmp_path / "public.csv")

    def cfg(out: str, **gen) -> dict:
        return {"method": "augpe", "seed": 0, "name": out,
                "data": {"private": str(tmp_path / "private.csv"), "public": str(tmp_path / "public.csv"),
                         "label_columns": list(priv.label_columns)},
                "generator": {"backend": "openai", "model": "test-model", "api_key_env": ENV, "max_tokens": 24,
                              "backoff_base": 0.001, "backoff_max": 0.002, **gen},
                "embedder": {"backend": "hashing", "dim": 64, "cache": False},
                "privacy": {"mu": 1.0, "reproducible_noise": True},
                "evolution": {"num_samples": 12, "iterations": 2, "variations": 2},
                "output": str(tmp_path / out)}

    one = run_config(config_from_dict(cfg("one", base_url=servers[0].url)))
    servers[1].inject(Fault.status(500), Fault.drop(), Fault.empty())
    two = run_config(config_from_dict(cfg("two", base_urls=[servers[0].url, servers[1].url],
                                          max_concurrency=2)))
    assert (one / "synthetic.jsonl").read_bytes() == (two / "synthetic.jsonl").read_bytes()
    def logged(run: Path) -> list[dict]:
        recs = [json.loads(line) for line in (run / "prompts.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "t"} for r in recs]

    prompts = logged(two)
    assert prompts == logged(one)  # the same prompts, in the same order, each logged once
    counters = json.loads((two / "private" / "metrics.json").read_text())["counters"]
    assert counters["llm_prompts"] == counters["llm_calls"] == len(prompts)
    assert counters["llm_retries"] == 3 - servers[1].pending_faults == 3
    assert json.loads((two / "privacy.json").read_text())["prompt_audit"]["passed"]
