"""One logical OpenAI-compatible endpoint made of several servers (vLLM replicas, several OpenAI-compatible hosts).

:class:`FanOut` has the :class:`~privtext.backends.openai_client.OpenAIClient` surface that the generator uses
(``request``, ``retries``, ``calls``, token counters, ``close``), so a caller that runs requests on a thread pool
spreads them over the servers without knowing there are several:

* **bounded concurrency per server**: at most ``per_server`` requests in flight on each server; a request takes the
  least-loaded server that has a free slot (fewest in flight, then fewest sent, then list order);
* **failover**: a request that fails in a way another attempt may fix (timeout, connection refused or dropped, HTTP
  408/409/429/5xx, an empty or malformed reply) is retried on *another* server; the server that failed is benched
  for its ``Retry-After`` or an exponential backoff (doubling with its consecutive failures, with jitter) so other
  requests avoid it too, and it rejoins when the bench ends (a server that comes back is used again). Only when
  every server has failed this request does the request wait for a bench to end;
* **the same retry budget as one server**: ``max_retries`` retries per request, counted across servers, and every
  retry is counted once in ``retries``; a 4xx other than 408/409/429 fails at once (the request itself is wrong);
* results are the caller's to order (the generator keeps one future per prompt, in prompt order).

Nothing here sees a prompt log: the generator logs every prompt once, before the first request goes out, whatever
server ends up serving it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import BackendError, ConfigError
from .openai_client import AttemptFailed, OpenAIClient

log = logging.getLogger("privtext.openai")


@dataclass
class _Server:
    index: int
    client: OpenAIClient
    inflight: int = 0
    sent: int = 0
    ok: int = 0
    failed: int = 0
    consecutive: int = 0
    bench_until: float = 0.0


class FanOut:
    """Requests spread over ``clients`` (one per server), ``per_server`` at a time on each (see the module
    docstring). ``max_retries``, ``backoff_base``, ``backoff_max`` and ``max_retry_after`` have the meaning they
    have for one server."""

    def __init__(self, clients: Sequence[OpenAIClient], *, per_server: int, max_retries: int,
                 backoff_base: float, backoff_max: float, max_retry_after: float, what: str,
                 clock: Callable[[], float] = time.monotonic):
        if not clients:
            raise ConfigError(f"{what}: no servers to fan out to")
        if per_server < 1:
            raise ConfigError(f"{what}: per-server concurrency must be ≥ 1, got {per_server}")
        self.servers = [_Server(i, c) for i, c in enumerate(clients)]
        self.per_server = int(per_server)
        self.max_retries = int(max_retries)
        self.backoff_base, self.backoff_max = float(backoff_base), float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.what = what
        self._clock = clock
        self._cond = threading.Condition()
        self._jitter = random.Random()  # a private instance: never the global RNG, never the caller's rng
        self.retries = 0

    # ------------------------------------------------------------------------------------- aggregates
    @property
    def calls(self) -> int:
        return sum(s.client.calls for s in self.servers)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.client.prompt_tokens for s in self.servers)

    @property
    def completion_tokens(self) -> int:
        return sum(s.client.completion_tokens for s in self.servers)

    @property
    def workers(self) -> int:
        """Requests that can be in flight at once (size a caller's thread pool with it)."""
        return self.per_server * len(self.servers)

    @property
    def endpoint_id(self) -> str:
        return ", ".join(s.client.endpoint_id for s in self.servers)

    def server_stats(self) -> list[dict[str, Any]]:
        """Per server: requests sent, succeeded, failed (each failure was retried elsewhere or ended the
        request), and whether it is benched now."""
        now = self._clock()
        with self._cond:
            return [{"server": s.client.endpoint_id, "sent": s.sent, "ok": s.ok, "failed": s.failed,
                     "benched": s.bench_until > now} for s in self.servers]

    def scrub(self, text: str) -> str:
        return self.servers[0].client.scrub(text)

    # ------------------------------------------------------------------------------------- scheduling
    def _backoff(self, consecutive: int) -> float:
        cap = min(self.backoff_max, self.backoff_base * (2 ** max(0, consecutive - 1)))
        return cap * (0.5 + 0.5 * self._jitter.random())

    def _acquire(self, tried: set[int]) -> _Server:
        """A server with a free slot: preferably one this request has not failed on and that is not benched;
        when every such server is benched or already failed this request, whichever server's bench ends first."""
        with self._cond:
            while True:
                now = self._clock()
                fresh = [s for s in self.servers if s.index not in tried and s.bench_until <= now]
                pool = fresh or self.servers
                ready = [s for s in pool if s.bench_until <= now and s.inflight < self.per_server]
                if ready:
                    s = min(ready, key=lambda x: (x.inflight, x.sent, x.index))
                    s.inflight += 1
                    s.sent += 1
                    return s
                benched = [s.bench_until - now for s in pool if s.bench_until > now]
                wait = min(benched) if benched and len(benched) == len(pool) else None
                if wait is not None and not fresh and wait > self.max_retry_after:
                    raise BackendError(self.scrub(
                        f"{self.what}: every server is unavailable for {wait:.0f} s more (> max_retry_after) "
                        f"[{self.endpoint_id}]"))
                self._cond.wait(timeout=wait if wait is not None else 1.0)

    def _release(self, s: _Server, outcome: Literal["ok", "failed", "aborted"],
                 wait: float | None = None) -> float:
        """Free ``s``'s slot; after a failure bench it and return the bench's length (``aborted``: the caller
        stopped, e.g. an interrupt: nothing is counted)."""
        with self._cond:
            s.inflight -= 1
            bench = 0.0
            if outcome == "ok":
                s.ok += 1
                s.consecutive = 0
            elif outcome == "failed":
                s.failed += 1
                s.consecutive += 1
                bench = wait if wait is not None else self._backoff(s.consecutive)
                s.bench_until = max(s.bench_until, self._clock() + bench)
            self._cond.notify_all()
            return bench

    # ---------------------------------------------------------------------------------------- request
    def request(self, kind: Literal["chat", "completions", "embeddings"], payload: dict[str, Any],
                parse: Callable[[dict[str, Any]], Any]) -> Any:
        """Send ``payload`` to one server, failing over to the others (see the module docstring)."""
        attempts = self.max_retries + 1
        tried: set[int] = set()
        history: list[str] = []
        fatal: str | None = None
        for attempt in range(attempts):
            s = self._acquire(tried)
            try:
                result = s.client.attempt(kind, payload, parse)
            except AttemptFailed as e:
                failed = e
            except BaseException:
                self._release(s, "aborted")
                raise
            else:
                self._release(s, "ok")
                return result
            # handled outside the except blocks: no chained exception can carry an unscrubbed server message
            bench = self._release(s, "failed", failed.wait)
            where = s.client.endpoint_id
            history.append(f"{where}: {failed.message}")
            if failed.fatal:
                fatal = f"request to {where} failed, not retried: {failed.message}"
                break
            if attempt == attempts - 1:
                break
            tried.add(s.index)
            if len(tried) == len(self.servers):  # every server failed it: the next attempt waits for a bench
                tried.clear()
            with self._cond:
                self.retries += 1
            log.warning("%s: %s: %s; retry %d/%d elsewhere (this server benched for %.2f s)", self.what, where,
                        self.scrub(failed.message), attempt + 1, self.max_retries, bench)
        if fatal is not None:
            raise BackendError(self.scrub(f"{self.what}: {fatal}"))
        shown = "; ".join(history[-4:])
        raise BackendError(self.scrub(f"{self.what}: request failed after {attempts} attempt(s) over "
                                      f"{len(self.servers)} server(s): {shown}"))

    def close(self) -> None:
        for s in self.servers:
            s.client.close()


__all__ = ["FanOut"]
