"""Any OpenAI-compatible endpoint as a generator: OpenAI, Azure OpenAI, a vLLM server, Ollama, LM Studio...

``mode: chat`` sends the family's system + user messages to ``/chat/completions``; ``mode: completions`` sends
the plain-text prompt to ``/completions`` (base models served by vLLM). Requests run ``max_concurrency`` at a
time in a thread pool, results keep the input order; every prompt is logged before any is sent. Each request
carries a ``seed`` drawn from the caller's ``rng`` (``send_seed: false`` to omit it) so servers that honour
seeds are reproducible. Retries, backoff and key handling: :mod:`privtext.backends.openai_client`.

``base_urls: [...]`` (instead of ``base_url``) fans the requests out over several servers of the same model —
``max_concurrency`` in flight on each, a failed request retried on another server, results still in prompt order
and every prompt still logged once before anything is sent (:mod:`privtext.backends.fanout`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal
from urllib.parse import urlparse

import numpy as np
from pydantic import Field, field_validator, model_validator

from ..backends.fanout import FanOut
from ..backends.openai_client import ClientOptions, MalformedReply, OpenAIClient
from ..rng import spawn_seed
from .base import PromptedGenerator
from .prompts import Prompt


class OpenAIGeneratorOptions(ClientOptions):
    mode: Literal["chat", "completions"] = "chat"
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=512, ge=1)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    stop: list[str] | None = None
    send_seed: bool = Field(default=True, description="send a per-request seed drawn from the caller's rng")
    system_prompt: str | None = Field(default=None, description="replaces the prompt family's system message")
    extra_body: dict[str, Any] | None = Field(default=None, description="extra JSON fields, e.g. {top_k: 50}")
    base_urls: list[str] | None = Field(
        default=None, description="several servers of the same model (vLLM replicas): requests are spread over "
        "them, max_concurrency at a time on each, and a failed request is retried on another one")

    @field_validator("base_urls")
    @classmethod
    def _urls(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("base_urls is empty: list one or more server URLs (http://host:port/v1), or omit it")
        for u in v:
            p = urlparse(u) if isinstance(u, str) else None
            if p is None or p.scheme not in ("http", "https") or not p.netloc:
                raise ValueError(f"base_urls: {u!r} is not an http(s) URL (e.g. http://10.0.0.5:8000/v1)")
        dup = sorted({u for u in v if v.count(u) > 1})
        if dup:
            raise ValueError(f"base_urls lists {dup} more than once")
        return list(v)

    @model_validator(mode="after")
    def _one_url_form(self) -> OpenAIGeneratorOptions:
        if self.base_urls is not None and self.base_url is not None:
            raise ValueError(f"give base_url ({self.base_url!r}) or base_urls, not both")
        return self


def _parse_chat(data: dict[str, Any]) -> str:
    """The reply text of a chat completion (``choices[0].message.content``)."""
    c0 = _first_choice(data)
    msg = c0.get("message") if isinstance(c0, dict) else None
    return _reply_text(msg.get("content") if isinstance(msg, dict) else None, "message content")


def _parse_completion(data: dict[str, Any]) -> str:
    """The reply text of a plain completion (``choices[0].text``)."""
    c0 = _first_choice(data)
    return _reply_text(c0.get("text") if isinstance(c0, dict) else None, "text")


def _first_choice(data: dict[str, Any]) -> Any:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedReply("no choices in the reply")
    return choices[0]


def _reply_text(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise MalformedReply(f"the first choice has no {what}")
    if not text.strip():
        raise MalformedReply("the reply text is empty")
    return text.strip()


class OpenAIGenerator(PromptedGenerator):
    backend = "openai"
    Options = OpenAIGeneratorOptions

    def __init__(self, *, options: OpenAIGeneratorOptions, **kw: Any):
        super().__init__(options=options, **kw)
        what = f"generator {self.name!r}"
        self.client: OpenAIClient | FanOut
        if options.base_urls:
            clients = [OpenAIClient(options.model_copy(update={"base_url": u, "base_urls": None}), what=what)
                       for u in options.base_urls]
            self.client = FanOut(clients, per_server=options.max_concurrency, max_retries=options.max_retries,
                                 backoff_base=options.backoff_base, backoff_max=options.backoff_max,
                                 max_retry_after=options.max_retry_after, what=what)
            self.workers = self.client.workers
        else:
            self.client = OpenAIClient(options, what=what)
            self.workers = options.max_concurrency
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------------------------------ sending
    def _payload(self, prompt: Prompt, seed: int | None) -> tuple[str, dict[str, Any]]:
        o = self.options
        payload: dict[str, Any] = {"model": o.model, "temperature": o.temperature, "top_p": o.top_p,
                                   "max_tokens": o.max_tokens}
        if o.frequency_penalty:
            payload["frequency_penalty"] = o.frequency_penalty
        if o.presence_penalty:
            payload["presence_penalty"] = o.presence_penalty
        if o.stop:
            payload["stop"] = list(o.stop)
        if seed is not None:
            payload["seed"] = seed
        if o.extra_body:
            payload["extra_body"] = dict(o.extra_body)
        if o.mode == "chat":
            system = o.system_prompt if o.system_prompt is not None else prompt.system
            payload["messages"] = Prompt(user=prompt.user, system=system).messages()
            return "chat", payload
        text = Prompt(user=prompt.user, system=o.system_prompt if o.system_prompt is not None else prompt.system)
        payload["prompt"] = text.text()
        return "completions", payload

    def _complete(self, operation: str, prompts: list[Prompt], rng: np.random.Generator) -> list[str]:
        requests = []
        for p in prompts:  # seeds and log records in input order, all before the first request goes out
            seed = spawn_seed(rng) % (2**31 - 1) if self.options.send_seed else None
            kind, payload = self._payload(p, seed)
            logged = payload["messages"] if kind == "chat" else payload["prompt"]
            self._log(operation, logged, {**p.meta, "model": self.options.model, "seed": seed})
            requests.append((kind, payload))
        self.stats.prompts += len(prompts)
        parse = _parse_chat if self.options.mode == "chat" else _parse_completion
        before = (self.client.retries, self.client.calls, self.client.prompt_tokens, self.client.completion_tokens)
        try:
            if len(requests) == 1 or self.workers == 1:
                out = [self.client.request(k, pl, parse) for k, pl in requests]
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.workers,
                                                    thread_name_prefix="privtext-openai")
                futures = [self._pool.submit(self.client.request, k, pl, parse) for k, pl in requests]
                try:
                    out = [f.result() for f in futures]
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
        finally:
            c = self.client
            self.stats.retries += c.retries - before[0]
            self.stats.calls += c.calls - before[1]
            self.stats.prompt_tokens += c.prompt_tokens - before[2]
            self.stats.completion_tokens += c.completion_tokens - before[3]
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.client.close()
        super().close()
