"""OpenAI-compatible HTTP plumbing shared by the ``openai`` generator and embedder.

The official ``openai`` client sends the requests (``max_retries=0``); retries are done here so they can be
counted and so that they follow one policy:

* retried: timeouts, connection errors, HTTP 408/409/429 and 5xx, and replies that are empty or malformed
  (not JSON, no choices, empty text); the wait is the server's ``Retry-After`` (seconds or an HTTP date; also
  ``retry-after-ms``) when it sends one, else exponential backoff ``min(backoff_max, backoff_base * 2**attempt)``
  with jitter in [50%, 100%];
* not retried: every other 4xx (400, 401, 403, 404, 422, ...): the request itself is wrong;
* the API key is read from the environment variable named by ``api_key_env`` and never appears in logs,
  errors or the prompt log (server messages that echo it are scrubbed).
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import urlparse

from pydantic import Field

from ..errors import BackendError, ConfigError, optional_import
from . import BackendOptions

log = logging.getLogger("privtext.openai")

RETRY_STATUS = frozenset({408, 409, 429})


class MalformedReply(Exception):
    """A reply that parsed as HTTP 200 but cannot be used (retried)."""


class AttemptFailed(Exception):
    """One attempt failed. ``fatal``: the request itself is wrong (a 4xx other than 408/409/429), no other
    attempt can succeed; ``wait``: the seconds the server asked for (Retry-After), if it did."""

    def __init__(self, message: str, *, fatal: bool = False, wait: float | None = None):
        super().__init__(message)
        self.message, self.fatal, self.wait = message, fatal, wait


class ClientOptions(BackendOptions):
    """Connection options common to the OpenAI-compatible generator and embedder."""

    model: str = Field(description="model name (Azure: the deployment name)")
    base_url: str | None = Field(default=None, description="e.g. http://localhost:8000/v1 for a vLLM server")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="name of the environment variable with the key")
    api_type: Literal["openai", "azure"] = "openai"
    api_version: str | None = Field(default=None, description="Azure API version, e.g. 2024-10-21")
    organization: str | None = None
    timeout: float = Field(default=120.0, gt=0, description="seconds per request")
    max_retries: int = Field(default=6, ge=0)
    backoff_base: float = Field(default=1.0, gt=0, description="first backoff in seconds (doubles per retry)")
    backoff_max: float = Field(default=60.0, gt=0)
    max_retry_after: float = Field(default=600.0, gt=0, description="give up when Retry-After asks for longer")
    max_concurrency: int = Field(default=8, ge=1, description="requests in flight at once")
    extra_headers: dict[str, str] | None = None


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or an HTTP date)."""
    if not headers:
        return None
    get = headers.get
    ms = get("retry-after-ms") or get("Retry-After-Ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = get("retry-after") or get("Retry-After")
    if not ra:
        return None
    ra = ra.strip()
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, dt.timestamp() - now)


class OpenAIClient:
    """One configured client: request, validate, retry; counts retries and token usage (thread-safe)."""

    def __init__(self, opts: ClientOptions, *, what: str, sleep: Callable[[float], None] = time.sleep):
        self.opts = opts
        self.what = what
        self._sleep = sleep
        key = os.environ.get(opts.api_key_env, "")
        if not key:
            local = opts.base_url is not None and opts.api_type == "openai"
            if not local:
                raise ConfigError(
                    f"{what}: no API key: set the environment variable {opts.api_key_env!r} "
                    "(or name another one with api_key_env)"
                )
            key = "EMPTY"  # local servers (vLLM, Ollama) accept any key
            log.info("%s: environment variable %r is empty; sending no real API key to %s", what,
                     opts.api_key_env, opts.base_url)
        self._secret = key
        openai = self._openai = optional_import("openai", "openai", what)
        common: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": opts.timeout,
                                  "default_headers": dict(opts.extra_headers or {}) or None}
        if opts.organization:
            common["organization"] = opts.organization
        if opts.api_type == "azure":
            if not opts.base_url or not opts.api_version:
                raise ConfigError(f"{what}: api_type 'azure' needs base_url (the resource endpoint) and api_version")
            self._client = openai.AzureOpenAI(azure_endpoint=opts.base_url, api_version=opts.api_version, **common)
        else:
            self._client = openai.OpenAI(base_url=opts.base_url, **common)
        self._lock = threading.Lock()
        self._jitter = random.Random()  # a private instance: never the global RNG, never the caller's rng
        self.retries = 0
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    # ------------------------------------------------------------------------------------------ helpers
    def scrub(self, text: str) -> str:
        if self._secret and self._secret != "EMPTY":
            text = text.replace(self._secret, "***")
        return text

    @property
    def endpoint_id(self) -> str:
        if not self.opts.base_url:
            return "api.openai.com"
        u = urlparse(self.opts.base_url)
        return (u.netloc + u.path).rstrip("/") or self.opts.base_url

    def backoff(self, attempt: int) -> float:
        cap = min(self.opts.backoff_max, self.opts.backoff_base * (2**attempt))
        return cap * (0.5 + 0.5 * self._jitter.random())

    def _resource(self, kind: str) -> Any:
        if kind == "chat":
            return self._client.chat.completions.with_raw_response
        if kind == "completions":
            return self._client.completions.with_raw_response
        if kind == "embeddings":
            return self._client.embeddings.with_raw_response
        raise ValueError(kind)

    # ---------------------------------------------------------------------------------------------- call
    def attempt(self, kind: Literal["chat", "completions", "embeddings"], payload: dict[str, Any],
                parse: Callable[[dict[str, Any]], Any]) -> Any:
        """Send ``payload`` once: the parsed result, or :class:`AttemptFailed` saying whether another attempt may
        succeed (and after how long the server asked to wait). Successful calls and token usage are counted."""
        openai = self._openai
        resource = self._resource(kind)
        try:
            raw = resource.create(**payload)
            try:
                data = json.loads(raw.http_response.content)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise MalformedReply(f"reply is not valid JSON ({e.msg if hasattr(e, 'msg') else e})") from None
            if not isinstance(data, dict):
                raise MalformedReply(f"reply is a JSON {type(data).__name__}, not an object")
            result = parse(data)
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            with self._lock:
                self.calls += 1
                self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                self.completion_tokens += int(usage.get("completion_tokens") or 0)
            return result
        except MalformedReply as e:
            failed = AttemptFailed(f"malformed reply: {e}")
        except openai.APIStatusError as e:
            status = int(e.status_code)
            last = f"HTTP {status}: {_error_detail(e)}"
            if not (status in RETRY_STATUS or status >= 500):
                if status == 401 and self._secret == "EMPTY":
                    last += f" (no API key was sent: the environment variable {self.opts.api_key_env!r} is empty)"
                failed = AttemptFailed(last, fatal=True)
            else:
                failed = AttemptFailed(last, wait=parse_retry_after(getattr(e.response, "headers", None)))
        except openai.APITimeoutError:
            failed = AttemptFailed(f"timed out after {self.opts.timeout:g} s")
        except openai.APIConnectionError as e:
            failed = AttemptFailed(f"connection error ({type(e.__cause__).__name__ if e.__cause__ else 'no reply'})")
        # raised outside the except blocks: no chained client exception can carry a server message
        raise failed

    def request(self, kind: Literal["chat", "completions", "embeddings"], payload: dict[str, Any],
                parse: Callable[[dict[str, Any]], Any]) -> Any:
        """Send ``payload``; ``parse(json)`` returns the result or raises :class:`MalformedReply`."""
        last = ""
        fatal: str | None = None
        attempts = self.opts.max_retries + 1
        for attempt in range(attempts):
            try:
                return self.attempt(kind, payload, parse)
            except AttemptFailed as e:
                last, wait = e.message, e.wait
                if e.fatal:
                    fatal = last
                elif wait is not None and wait > self.opts.max_retry_after:
                    fatal = f"{last} (server asks to retry after {wait:.0f} s > max_retry_after)"
            if fatal is not None or attempt == attempts - 1:
                break
            delay = wait if wait is not None else self.backoff(attempt)
            with self._lock:
                self.retries += 1
            log.warning("%s: %s; retry %d/%d in %.2f s", self.what, self.scrub(last), attempt + 1,
                        self.opts.max_retries, delay)
            self._sleep(delay)
        if fatal is not None:
            raise BackendError(self.scrub(f"{self.what}: request to {self.endpoint_id} failed, not retried: {fatal}"))
        raise BackendError(self.scrub(
            f"{self.what}: request to {self.endpoint_id} failed after {attempts} attempt(s): {last}"))

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # pragma: no cover - best effort
            pass


def _error_detail(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:500]
        if isinstance(err, str):
            return err[:500]
    msg = str(getattr(e, "message", "") or e)
    return msg[:500]
