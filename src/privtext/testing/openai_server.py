"""A real local HTTP server speaking the OpenAI wire format, with injectable faults.

Use it to test an OpenAI-compatible setup without a network or a key::

    from privtext.testing import OpenAIServer, Fault

    with OpenAIServer(api_key="sk-local") as srv:
        srv.inject(Fault.status(429, retry_after=1))       # the next request gets a 429 with Retry-After: 1
        cfg = {"backend": "openai", "base_url": srv.url, "model": "test-model", "api_key_env": "MY_KEY"}
        ...

Endpoints (under ``/v1``): ``POST /chat/completions``, ``POST /completions``, ``POST /embeddings``,
``GET /models``. Replies are deterministic functions of the request (prompt, ``seed``, ``model``), usage is
reported in the ``usage`` field, and every request is recorded in :attr:`OpenAIServer.requests` (the
``Authorization`` header is recorded only as whether it matched).

Faults are consumed first-in first-out, one per matching request: ``Fault.delay(s)`` (slow but valid reply),
``Fault.timeout(s)`` (no reply for ``s`` seconds, longer than the client's timeout), ``Fault.status(code,
retry_after=..., body=...)``, ``Fault.empty()`` (``choices: []`` / ``data: []``), ``Fault.empty_content()``
(a choice whose text is ``""``), ``Fault.malformed()`` (a 200 whose body is not JSON), ``Fault.drop()``
(the connection is closed without a reply). Only the standard library is used; the server binds 127.0.0.1 on
a free port and runs in a daemon thread.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORDS = (
    "the service was friendly and the food arrived quickly we enjoyed a quiet table near the window prices "
    "were fair portions generous staff attentive study patients results showed significant improvement in "
    "outcomes compared with the control group methods data analysis reviewers found the paper clear novel"
).split()


def _bare_fault(kind: str, doc: str) -> Any:
    """A ``Fault`` class method ``(*, path=None) -> Fault`` for a fault of ``kind`` with no other setting."""

    def make(cls: type[Fault], *, path: str | None = None) -> Fault:
        return cls(kind, path=path)

    make.__name__ = make.__qualname__ = kind
    make.__doc__ = doc
    return classmethod(make)


@dataclass
class Fault:
    """One injected fault: the next request (to ``path``, when set) consumes it and gets its reply late, no reply
    (a timeout, a dropped connection), an HTTP error, or an empty or malformed reply. Build one with the class
    methods and queue it with :meth:`OpenAIServer.inject`."""

    kind: str
    seconds: float = 0.0
    code: int = 200
    retry_after: str | None = None
    body: Any = None
    path: str | None = None  # only requests to this path ("/chat/completions", ...) consume the fault

    @classmethod
    def delay(cls, seconds: float, *, path: str | None = None) -> Fault:
        """Answer normally after waiting ``seconds`` (cut short, and the connection closed, when the server stops)."""
        return cls("delay", seconds=seconds, path=path)

    @classmethod
    def timeout(cls, seconds: float = 5.0, *, path: str | None = None) -> Fault:
        """Wait ``seconds``, then close the connection without a reply (a client-side timeout when it waits less)."""
        return cls("timeout", seconds=seconds, path=path)

    @classmethod
    def status(cls, code: int, *, retry_after: float | str | None = None, body: Any = None,
               path: str | None = None) -> Fault:
        """An HTTP error reply; ``retry_after`` (seconds or an HTTP date) becomes the Retry-After header."""
        ra = None if retry_after is None else (retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
        return cls("status", code=code, retry_after=ra, body=body, path=path)

    # the faults that take nothing but ``path``: one factory each, made by :func:`_bare_fault`
    empty = _bare_fault("empty", "A 200 reply with no choices (no embeddings on ``/embeddings``).")
    empty_content = _bare_fault("empty_content", "A 200 chat or completion reply whose choices have empty text.")
    malformed = _bare_fault("malformed", "A 200 reply whose JSON body is cut off mid-way.")
    drop = _bare_fault("drop", "Close the connection without any reply.")


def default_reply(prompt: str, *, seed: int | None, model: str, index: int = 0) -> str:
    """A deterministic reply: words drawn by a hash of (model, prompt, seed, index)."""
    h = hashlib.blake2b(f"{model}\x00{seed}\x00{index}\x00{prompt}".encode(), digest_size=32).digest()
    n = 8 + h[0] % 12
    words = [_WORDS[(h[(i % 31) + 1] + 7 * i) % len(_WORDS)] for i in range(n)]
    return " ".join(words).capitalize() + "."


def default_embedding(text: str, dim: int) -> list[float]:
    """A deterministic (unnormalised) vector per text."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        h = hashlib.blake2b(f"{counter}\x00{text}".encode(), digest_size=64).digest()
        out.extend((b - 127.5) / 64.0 for b in h)
        counter += 1
    return out[:dim]


def _b64(vec: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


@dataclass
class RecordedRequest:
    """One request the server received: method, path, parsed JSON body, whether its API key was accepted, the kind
    of fault it consumed (``None``: none) and its arrival time (``time.time()``)."""

    method: str
    path: str
    body: Any
    authorized: bool
    fault: str | None
    t: float = field(default_factory=time.time)


class OpenAIServer:
    """A local OpenAI-compatible server (see the module docstring)."""

    def __init__(self, *, api_key: str | None = None, models: tuple[str, ...] = ("test-model",),
                 embedding_dim: int = 16, reply: Callable[..., str] | None = None,
                 echo_key_in_errors: bool = False, host: str = "127.0.0.1"):
        self.api_key = api_key
        self.models = models
        self.embedding_dim = embedding_dim
        self.reply = reply or default_reply
        self.echo_key_in_errors = echo_key_in_errors
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._host = host
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------------------- control
    @property
    def port(self) -> int:
        """The TCP port the started server listens on; raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL to give a client (``http://127.0.0.1:PORT/v1``)."""
        return f"http://{self._host}:{self.port}/v1"

    def start(self) -> OpenAIServer:
        """Start serving on a free port of the host in a daemon thread (nothing when already started) and return the
        server."""
        if self._httpd is not None:
            return self
        server = self

        class Handler(_Handler):
            owner = server

        self._stop.clear()
        self._httpd = ThreadingHTTPServer((self._host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="privtext-openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake delayed requests, shut the HTTP server down and join its thread (5 s at most). Safe to
        call twice."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def inject(self, *faults: Fault, times: int = 1) -> None:
        """Queue faults; each is used by one request (``times`` repeats the whole group)."""
        with self._lock:
            for _ in range(times):
                self._faults.extend(faults)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self._lock:
            self._faults.clear()

    @property
    def pending_faults(self) -> int:
        """How many queued faults no request has consumed yet."""
        with self._lock:
            return len(self._faults)

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for i, f in enumerate(self._faults):
                if f.path is None or path.endswith(f.path):
                    del self._faults[i]
                    return f
        return None

    def count(self, path_suffix: str = "") -> int:
        """How many recorded requests have a path ending in ``path_suffix`` (all of them for ``""``)."""
        return sum(1 for r in self.requests if r.path.endswith(path_suffix))

    # ------------------------------------------------------------------------------------------- replies
    def _chat(self, body: dict[str, Any], fault: Fault | None) -> dict[str, Any]:
        messages = body.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        return self._choices(prompt, body, fault, chat=True)

    def _completions(self, body: dict[str, Any], fault: Fault | None) -> dict[str, Any]:
        prompt = body.get("prompt", "")
        prompts = prompt if isinstance(prompt, list) else [prompt]
        choices: list[dict[str, Any]] = []
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        for i, p in enumerate(prompts):
            r = self._choices(str(p), body, fault, chat=False)
            for c in r["choices"]:
                c["index"] = len(choices)
                choices.append(c)
            usage["prompt_tokens"] += r["usage"]["prompt_tokens"]
            usage["completion_tokens"] += r["usage"]["completion_tokens"]
            del i
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if fault is not None and fault.kind == "empty":
            choices = []
        return {"id": "cmpl-local", "object": "text_completion", "created": int(time.time()),
                "model": body.get("model", self.models[0]), "choices": choices, "usage": usage}

    def _choices(self, prompt: str, body: dict[str, Any], fault: Fault | None, *, chat: bool) -> dict[str, Any]:
        n = int(body.get("n") or 1)
        model = str(body.get("model", self.models[0]))
        seed = body.get("seed")
        texts = [self.reply(prompt, seed=seed, model=model, index=i) for i in range(n)]
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if max_tokens:
            texts = [" ".join(t.split()[: int(max_tokens)]) for t in texts]
        if fault is not None and fault.kind == "empty_content":
            texts = ["" for _ in texts]
        if chat:
            choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop",
                        "logprobs": None} for i, t in enumerate(texts)]
        else:
            choices = [{"index": i, "text": t, "finish_reason": "stop", "logprobs": None}
                       for i, t in enumerate(texts)]
        if fault is not None and fault.kind == "empty":
            choices = []
        pt = _count_tokens(prompt)
        ct = sum(_count_tokens(t) if t else 0 for t in texts)
        return {"id": "chatcmpl-local" if chat else "cmpl-local",
                "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": model, "choices": choices,
                "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}}

    def _embeddings(self, body: dict[str, Any], fault: Fault | None) -> dict[str, Any]:
        inp = body.get("input", "")
        items = inp if isinstance(inp, list) else [inp]
        dim = int(body.get("dimensions") or self.embedding_dim)
        b64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": _b64(default_embedding(str(t), dim)) if b64 else default_embedding(str(t), dim)}
                for i, t in enumerate(items)]
        if fault is not None and fault.kind == "empty":
            data = []
        tokens = sum(_count_tokens(str(t)) for t in items)
        return {"object": "list", "data": data, "model": body.get("model", "test-embedding"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        """Silence the standard library's per-request log lines on stderr."""
        return

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode("utf-8")
        self._send_raw(status, data, "application/json", headers)

    def _send_raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            pass

    def _error(self, status: int, message: str, *, etype: str = "invalid_request_error",
               headers: dict[str, str] | None = None, code: str | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": etype, "param": None, "code": code}},
                        headers)

    def _authorized(self) -> tuple[bool, str]:
        key = self.owner.api_key
        got = self.headers.get("Authorization", "")
        token = got[7:] if got.lower().startswith("bearer ") else (self.headers.get("api-key") or "")
        return (key is None or token == key), token

    def _read_body(self) -> tuple[Any, bool]:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}, True
        try:
            return json.loads(raw.decode("utf-8")), True
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None, False

    def do_GET(self) -> None:
        """``GET .../models``: the served model ids (401 without the key); 404 for any other path."""
        path = self.path.split("?")[0]
        ok, _ = self._authorized()
        self.owner.requests.append(RecordedRequest("GET", path, None, ok, None))
        if path.rstrip("/").endswith("/models"):
            if not ok:
                self._error(401, "invalid API key", code="invalid_api_key")
                return
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "privtext"} for m in self.owner.models]})
            return
        self._error(404, f"no route for GET {path}")

    def do_POST(self) -> None:
        """Chat completions, completions and embeddings: consume a queued fault for the path first, then check the
        JSON body, the API key, the model, the required field and the temperature (400/401/404 errors worded as
        OpenAI's) and send the deterministic reply."""
        owner = self.owner
        path = self.path.split("?")[0].rstrip("/")
        body, parsed = self._read_body()
        ok, token = self._authorized()
        routes = {"/chat/completions": owner._chat, "/completions": owner._completions,
                  "/embeddings": owner._embeddings}
        handler = next((h for suffix, h in routes.items() if path.endswith(suffix)), None)
        fault = owner._take_fault(path) if handler is not None else None
        owner.requests.append(RecordedRequest("POST", path, body, ok, fault.kind if fault else None))
        if fault is not None:
            if fault.kind in ("delay", "timeout"):
                owner._stop.wait(fault.seconds)
                if fault.kind == "timeout" or owner._stop.is_set():
                    self.close_connection = True
                    return
            elif fault.kind == "status":
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
                body_obj = fault.body if fault.body is not None else {
                    "error": {"message": f"injected fault: HTTP {fault.code}", "type": "server_error",
                              "param": None, "code": None}}
                self._send_json(fault.code, body_obj, headers)
                return
            elif fault.kind == "malformed":
                self._send_raw(200, b'{"id": "chatcmpl-local", "choices": [{"index": 0, "mess', "application/json")
                return
            elif fault.kind == "drop":
                self.close_connection = True
                return
        if handler is None:
            self._error(404, f"no route for POST {path}")
            return
        if not parsed or not isinstance(body, dict):
            self._error(400, "request body is not a JSON object")
            return
        if not ok:
            msg = "Incorrect API key provided"
            if owner.echo_key_in_errors:
                msg += f": {token}"
            self._error(401, msg, code="invalid_api_key")
            return
        if handler != owner._embeddings and owner.models and body.get("model") not in owner.models:
            self._error(404, f"The model {body.get('model')!r} does not exist", code="model_not_found")
            return
        if handler == owner._chat and not isinstance(body.get("messages"), list):
            self._error(400, "'messages' is a required property")
            return
        if handler == owner._completions and "prompt" not in body:
            self._error(400, "'prompt' is a required property")
            return
        if handler == owner._embeddings and "input" not in body:
            self._error(400, "'input' is a required property")
            return
        temp = body.get("temperature")
        if temp is not None and (not isinstance(temp, (int, float)) or not 0 <= temp <= 2 or math.isnan(temp)):
            self._error(400, f"temperature must be in [0, 2], got {temp!r}")
            return
        self._send_json(200, handler(body, fault))


__all__ = ["Fault", "OpenAIServer", "RecordedRequest", "default_embedding", "default_reply"]
