"""Secure aggregation of the parties' noisy histograms with Flower's SecAgg+ (WASP §4.7, Eq 9; Bell et al. 2020).

:func:`secure_sum` runs ONE SecAgg+ round in which every party is a separate operating-system process that
holds only its own records (started with ``multiprocessing``'s *spawn*: the party's data and the histogram
function reach it through a pipe, never through a file). The server side is Flower's own
``flwr.server.workflow.SecAggPlusWorkflow`` and each party runs a Flower ``ClientApp`` behind
``flwr.client.mod.secaggplus_mod``; the messages travel as Flower's protobuf ``Message`` over TCP on
127.0.0.1 through :class:`LoopbackGrid` (a minimal ``flwr`` ``Grid``), not through a SuperLink — the protocol,
its cryptography and its drop-out handling are Flower's, unchanged.

What each side holds:

* a party computes h_l (:func:`privtext.federated.noise.local_histogram`), adds N(0, τ²) from its own CSPRNG,
  rounds to the public grid and hands the result to ``secaggplus_mod``, which masks it with a private mask and
  pairwise masks (uniform modulo M) before it leaves the process. h_l and x_l exist only in the party's memory:
  nothing is written to disk (the public WASP code saves the per-party histograms; privtext does not —
  ``tests/test_federated_secagg.py`` scans the directories);
* the server receives, per party, public keys, encrypted key shares it cannot decrypt, the masked vector
  (uniform on Z_M, independent of h_l, to anyone without the masks) and, in the unmask stage, the shares that
  reconstruct the *sum of the survivors' masks* only. It never holds an individual vector.

**Mask generator.** Flower 1.41's ``pseudo_rand_gen`` folds the 32-byte mask seed (and every pairwise shared
key) to a 32-bit integer and expands it with MT19937 — a mask can then be found by trying 2³² seeds. Inside
:func:`secure_sum`, both the server and the parties use :func:`_chacha_masks` instead: ChaCha20 keyed by
BLAKE2b-256 of the whole seed, masks uniform on [0, M). The replacement is applied only for the duration of
the round in the server's process (and for the life of the party processes).

**Drop-outs.** A party that stops answering (its process dies, or it does not reply within ``timeout``) is
left out of the stage, exactly as SecAgg+ specifies: the round completes with the S survivors when every
party still has ≥ t live neighbours (t = ``min_survivors``; the workflow's ``_check_threshold``) and its
pairwise masks are removed with the reconstructed key, else the workflow halts and :func:`secure_sum` raises
:class:`privtext.errors.AggregationError` — nothing is released. Each party's noise std is σ/√t, so a
completed round carries noise std σ√(S/t) ≥ σ (derivation in :mod:`privtext.federated.noise`).

Privacy accounting is the caller's: describe and record ``GaussianDpEvent(σ/Δ)`` (``gaussian_event``) in the
ledger BEFORE calling :func:`secure_sum` (inside ``ReleaseKeeper.release``'s ``compute``), and return
``({"values": result.values}, gaussian_event(σ/Δ))``; see ``docs/federated.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import multiprocessing
import os
import secrets
import select
import socket
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AggregationError, ConfigError, optional_import
from .noise import (
    LocalFn,
    QuantisationPlan,
    _party_data,
    local_histogram,
    local_noisy_vector,
    party_rng,
    plan_quantisation,
    quantise,
)

#: the SecAgg+ stages at which a test can make a party crash (``drop``)
STAGES = ("setup", "share_keys", "collect_masked_vectors", "unmask")

_FRAME = struct.Struct(">Q")


def _require_flwr() -> None:
    optional_import("flwr", "flower", "secure aggregation (privtext.federated.secure_sum)")


# --- the mask generator -----------------------------------------------------------------------------------------

def _chacha_masks(seed: bytes, num_range: int, dimensions_list: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Masks uniform on [0, num_range) from ChaCha20 keyed by BLAKE2b-256(seed) (drop-in for Flower's
    ``pseudo_rand_gen``, which keeps only 32 bits of the seed)."""
    from randomgen import ChaCha

    key = int.from_bytes(hashlib.blake2b(bytes(seed), digest_size=32).digest(), "little")
    gen = np.random.Generator(ChaCha(key=key, counter=0, rounds=20))
    return [np.asarray(gen.integers(0, num_range, size=dim, dtype=np.int64)) for dim in dimensions_list]


_PRG_SITES = ("flwr.server.workflow.secure_aggregation.secaggplus_workflow",
              "flwr.client.mod.secure_aggregation.secaggplus_mod")


def _set_identity(node_id: int) -> tuple[Any, Any, Any]:
    """Flower 1.41 stamps every new Message with the process's task identity (set by SuperLink/SuperNode)."""
    from flwr.supercore.task_identity import TaskIdentity

    old = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 0, node_id
    return old


@contextmanager
def _secure_masks() -> Iterator[None]:
    mods = [importlib.import_module(m) for m in _PRG_SITES]
    saved = [m.pseudo_rand_gen for m in mods]
    try:
        for m in mods:
            m.pseudo_rand_gen = _chacha_masks
        yield
    finally:
        for m, f in zip(mods, saved, strict=True):
            m.pseudo_rand_gen = f


# --- framing ----------------------------------------------------------------------------------------------------

def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_FRAME.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 20, n - len(buf)))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> bytes | None:
    head = _recv_exact(sock, _FRAME.size)
    if head is None:
        return None
    return _recv_exact(sock, _FRAME.unpack(head)[0])


def _to_bytes(msg: Any) -> bytes:
    from flwr.common.serde import message_to_proto

    return message_to_proto(msg).SerializeToString()


def _from_bytes(b: bytes) -> Any:
    from flwr.common.serde import message_from_proto
    from flwr.proto.message_pb2 import Message as ProtoMessage

    return message_from_proto(ProtoMessage.FromString(b))


def _stage_of(msg: Any) -> str | None:
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key

    try:
        return str(msg.content.config_records[RECORD_KEY_CONFIGS][Key.STAGE])
    except (KeyError, AttributeError):
        return None


# --- the party process ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _PartySpec:
    index: int
    node_id: int
    address: tuple[str, int]
    data: Any
    local_fn: LocalFn
    plan: QuantisationPlan
    seed: int | None
    key: str
    reproducible: bool
    drop_at: str | None


def _party_main(spec: _PartySpec) -> None:  # runs in a spawned process
    logging.getLogger("flwr").setLevel(logging.ERROR)
    from flwr.client import ClientApp, NumPyClient
    from flwr.client.mod import secaggplus_mod
    from flwr.common import Context, RecordDict

    # importlib, not ``import … as``: the package re-exports a *function* named secaggplus_mod
    importlib.import_module(_PRG_SITES[1]).pseudo_rand_gen = _chacha_masks  # this process only
    _set_identity(spec.node_id)

    class _Party(NumPyClient):
        def fit(self, parameters: Any, config: Any) -> tuple[list[np.ndarray], int, dict]:
            h = local_histogram(spec.data, spec.local_fn, spec.plan)
            x = local_noisy_vector(h, spec.plan, party_rng(spec.index, seed=spec.seed, key=spec.key,
                                                            reproducible=spec.reproducible))
            del h
            # weight 1 with max_weight 1: Flower's weighting factor is exactly Q (noise.py)
            return [quantise(x, spec.plan)], 1, {}

    app = ClientApp(client_fn=lambda context: _Party().to_client(), mods=[secaggplus_mod])
    context = Context(run_id=0, node_id=spec.node_id, node_config={}, state=RecordDict(), run_config={})
    sock = socket.create_connection(spec.address)
    try:
        _send(sock, struct.pack(">Q", spec.node_id))
        while True:
            frame = _recv(sock)
            if frame is None:
                return
            msg = _from_bytes(frame)
            if spec.drop_at is not None and _stage_of(msg) == spec.drop_at:
                os._exit(0)  # a crash mid-round: no reply, the connection closes
            reply = app(msg, context)
            _send(sock, _to_bytes(reply))
    finally:
        sock.close()


# --- the server side --------------------------------------------------------------------------------------------

def _make_grid_class() -> type:
    from flwr.common import Message
    from flwr.serverapp.grid import Grid

    class LoopbackGrid(Grid):
        """Flower ``Grid`` over one TCP connection per party on 127.0.0.1 (see the module docstring)."""

        def __init__(self, conns: dict[int, socket.socket], observe: bool) -> None:
            self.conns = dict(conns)
            self.observe = observe
            self.received: list[tuple[str | None, int, bytes]] = []  # (stage, node, raw reply) when observing
            self._run: Any = None

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(self, content: Any, message_type: str, dst_node_id: int, group_id: str,
                           ttl: float | None = None) -> Any:
            return Message(content=content, dst_node_id=dst_node_id, message_type=message_type,
                           group_id=group_id, ttl=ttl)

        def get_node_ids(self) -> list[int]:
            return list(self.conns)

        def push_messages(self, messages: Any) -> Any:
            raise NotImplementedError("LoopbackGrid answers send_and_receive only")

        def pull_messages(self, message_ids: Any) -> Any:
            raise NotImplementedError("LoopbackGrid answers send_and_receive only")

        def _drop(self, nid: int) -> None:
            s = self.conns.pop(nid, None)
            if s is not None:
                s.close()

        def send_and_receive(self, messages: Any, *, timeout: float | None = None) -> list[Any]:
            waiting: dict[socket.socket, tuple[int, str | None]] = {}
            for m in messages:
                nid = m.metadata.dst_node_id
                s = self.conns.get(nid)
                if s is None:
                    continue
                try:
                    _send(s, _to_bytes(m))
                    waiting[s] = (nid, _stage_of(m))
                except OSError:
                    self._drop(nid)
            deadline = None if timeout is None else time.monotonic() + timeout
            replies = []
            while waiting:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select(list(waiting), [], [], left)
                if not ready:
                    break  # the others did not answer in time: left out of this stage (SecAgg+ drop-out)
                for s in ready:
                    nid, stage = waiting.pop(s)
                    try:
                        frame = _recv(s)
                    except OSError:
                        frame = None
                    if frame is None:
                        self._drop(nid)
                        continue
                    if self.observe:
                        self.received.append((stage, nid, frame))
                    replies.append(_from_bytes(frame))
            return replies

    return LoopbackGrid


def _workflow_class(base: type) -> type:
    class _SecAggPlus(base):  # type: ignore[misc,valid-type]
        """Flower's workflow with one fix: a party that drops out *before* it has distributed its key shares
        (setup or share-keys stage) is forgotten — nobody masked with it, so there is nothing to unmask.
        Flower 1.41 keeps it among the "dead" and asks the survivors for key shares they never received, which
        fails the whole round. After the share-keys stage the sampled set and the neighbour sets are cut down
        to the parties that completed it (the survivors' pairwise masks are exactly with those)."""

        def share_keys_stage(self, grid: Any, context: Any, state: Any) -> bool:
            ok = super().share_keys_stage(grid, context, state)
            alive = set(state.active_node_ids)
            state.sampled_node_ids = alive
            state.nid_to_neighbours = {n: nb & alive for n, nb in state.nid_to_neighbours.items() if n in alive}
            return bool(ok) and self._check_threshold(state)

    return _SecAggPlus


@dataclass
class SecureSumResult:
    """The aggregate and what is public about the round."""

    values: np.ndarray          # Σ over survivors of the quantised noisy vectors (exactly)
    survivors: list[int]        # party indices whose vectors are in the sum
    dropped: list[int]          # party indices left out
    plan: QuantisationPlan
    seconds: float              # wall time of the SecAgg+ round (after the parties connected)
    observed: list[tuple[str | None, int, bytes]] = field(default_factory=list, repr=False)
    node_index: dict[int, int] = field(default_factory=dict, repr=False)  # Flower node id → party index

    @property
    def noise_std(self) -> float:
        """Std of the noise in ``values``: τ·√S = σ·√(S/t) ≥ σ."""
        return self.plan.party_std * len(self.survivors) ** 0.5

    @property
    def max_error(self) -> float:
        """|values − Σ_survivors x_l| ≤ S·s/2 per coordinate (no clipping; prob ≥ 1 − clip_probability)."""
        return self.plan.max_error(len(self.survivors))


def secure_sum(
    parties: Sequence[Any],
    local_fn: LocalFn,
    *,
    dim: int,
    sigma: float,
    value_bound: float,
    min_survivors: int | None = None,
    num_shares: int | None = None,
    beta: float = 1e-12,
    timeout: float = 120.0,
    connect_timeout: float = 120.0,
    seed: int | None = None,
    key: str = "sum",
    reproducible: bool = False,
    drop: Mapping[int, str] | None = None,
    observe: bool = False,
    collusion: int = 0,
) -> SecureSumResult:
    """Σ_l (clip(local_fn(party_l), ±B) + N(0, σ²/t)) over the surviving parties, by one SecAgg+ round.

    ``parties`` — one entry per party (a :class:`~privtext.federated.parties.Party` or the party's data);
    ``local_fn(data) -> (dim,) array`` must be picklable (a module-level function or ``functools.partial``);
    ``sigma`` — the noise std of the sum (the central Gaussian mechanism's σ = z·Δ); ``value_bound`` — the public
    bound B on a coordinate of a local histogram; ``min_survivors`` — t, the SecAgg+ reconstruction threshold
    (2 ≤ t ≤ L; default L); ``num_shares`` — SecAgg+ neighbourhood size (default L: everyone shares with
    everyone); ``timeout`` — seconds the server waits for the replies of one stage; ``reproducible``/``seed`` —
    seeded noise (NOT private; tests); ``drop`` — {party index: stage} makes that party crash on receiving the
    stage (tests); ``observe`` — keep every raw reply the server received (tests); ``collusion`` — c: each party
    adds σ/√(t − c) (:mod:`privtext.federated.noise`, "Collusion").
    """
    _require_flwr()
    L = len(parties)
    t, shares = _check_round(L, min_survivors, num_shares, drop)
    plan = plan_quantisation(n_parties=L, dim=dim, sigma=sigma, value_bound=value_bound, min_survivors=t,
                             beta=beta, collusion=collusion)
    listener = socket.create_server(("127.0.0.1", 0))
    node_ids: list[int] = []
    while len(node_ids) < L:
        n = secrets.randbits(62) + 1
        if n not in node_ids:
            node_ids.append(n)
    index_of = {n: k for k, n in enumerate(node_ids)}
    procs: list[Any] = []
    conns: dict[int, socket.socket] = {}
    try:
        ctx = multiprocessing.get_context("spawn")
        address = listener.getsockname()[:2]
        for k, p in enumerate(parties):
            spec = _PartySpec(k, node_ids[k], address, _party_data(p), local_fn, plan, seed, key,
                              reproducible, (drop or {}).get(k))
            proc = ctx.Process(target=_party_main, args=(spec,), daemon=True, name=f"privtext-party-{k}")
            proc.start()
            procs.append(proc)
        conns = _accept_parties(listener, index_of, connect_timeout)
        if len(conns) < t:
            raise AggregationError(f"only {len(conns)} of {L} parties connected, fewer than min_survivors={t}")
        grid = _make_grid_class()(conns, observe)
        captured, seconds = _secagg_round(grid, conns, plan, t=t, shares=shares, timeout=timeout)
        if captured is None:
            alive = len(grid.conns)
            raise AggregationError(
                f"the SecAgg+ round did not complete: {alive} of {L} parties still answering, and SecAgg+ needs "
                f"every party to keep ≥ min_survivors={t} live neighbours; nothing was released"
            )
        mean, nids = captured
        S = len(nids)
        # Flower returns the mean of the survivors' vectors; the sum is on the grid exactly (noise.py)
        values = np.rint(mean * S / plan.step) * plan.step
        survivors = sorted(index_of[n] for n in nids)
        return SecureSumResult(values, survivors, sorted(set(range(L)) - set(survivors)), plan, seconds,
                               list(grid.received) if observe else [], index_of)
    finally:
        _close_round(conns, listener, procs)


def _check_round(L: int, min_survivors: int | None, num_shares: int | None,
                 drop: Mapping[int, str] | None) -> tuple[int, int]:
    """(t, shares) of a round of ``L`` parties, each checked: a :class:`ConfigError` names a bad value."""
    if L < 2:
        raise ConfigError(f"secure aggregation needs at least 2 parties, got {L}")
    t = L if min_survivors is None else min_survivors
    if not isinstance(t, int) or isinstance(t, bool) or not 2 <= t <= L:
        raise ConfigError(f"min_survivors must be an integer in [2, {L}] (SecAgg+ needs 2), got {min_survivors!r}")
    shares = L if num_shares is None else num_shares
    if not isinstance(shares, int) or isinstance(shares, bool) or not (t <= shares <= L):
        raise ConfigError(f"num_shares must be an integer in [min_survivors={t}, {L}], got {num_shares!r}")
    for k, stage in (drop or {}).items():
        if stage not in STAGES or not (0 <= k < L):
            raise ConfigError(f"drop: party {k!r} at stage {stage!r}; parties are 0..{L - 1}, stages {STAGES}")
    return t, shares


def _accept_parties(listener: socket.socket, index_of: Mapping[int, int],
                    connect_timeout: float) -> dict[int, socket.socket]:
    """The parties' connections by node id, as many as say a known node id within ``connect_timeout``."""
    conns: dict[int, socket.socket] = {}
    listener.settimeout(connect_timeout)
    deadline = time.monotonic() + connect_timeout
    while len(conns) < len(index_of):
        listener.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            s, _ = listener.accept()
        except TimeoutError:
            break
        s.settimeout(None)
        hello = _recv(s)
        if hello is None or len(hello) != 8 or struct.unpack(">Q", hello)[0] not in index_of:
            s.close()
            continue
        conns[struct.unpack(">Q", hello)[0]] = s
    return conns


def _secagg_round(grid: Any, conns: Mapping[int, socket.socket], plan: QuantisationPlan, *, t: int, shares: int,
                  timeout: float) -> tuple[tuple[np.ndarray, list[int]] | None, float]:
    """One SecAgg+ round of Flower's server workflow over ``grid``: the survivors' mean vector and node ids (None
    when the round did not complete), and the round's wall time."""
    from flwr.common import ConfigRecord, RecordDict, ndarrays_to_parameters, parameters_to_ndarrays
    from flwr.common import Context as FlwrContext
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.compat.common import recorddict_compat as compat
    from flwr.server import LegacyContext, ServerConfig
    from flwr.server.compat.grid_client_proxy import GridClientProxy
    from flwr.server.strategy import FedAvg
    from flwr.server.workflow import SecAggPlusWorkflow
    from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
    from flwr.server.workflow.constant import Key as WorkflowKey
    from flwr.supercore.task_identity import TaskIdentity

    class _Capture(FedAvg):
        captured: tuple[np.ndarray, list[int]] | None = None

        def aggregate_fit(self, server_round: int, results: list, failures: list) -> tuple[None, dict]:
            vec = parameters_to_ndarrays(results[0][1].parameters)[0]
            self.captured = (np.asarray(vec, dtype=np.float64), [int(p.node_id) for p, _ in results])
            return None, {}

    strategy = _Capture(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=len(conns),
                        min_available_clients=len(conns))
    base = FlwrContext(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={})
    context = LegacyContext(base, config=ServerConfig(num_rounds=1), strategy=strategy)
    for nid in conns:
        context.client_manager.register(GridClientProxy(nid, grid, 0))
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: 1})
    context.state.array_records[MAIN_PARAMS_RECORD] = compat.parameters_to_arrayrecord(
        ndarrays_to_parameters([np.zeros(1)]), True)
    workflow = _workflow_class(SecAggPlusWorkflow)(
        num_shares=shares / len(conns), reconstruction_threshold=t / shares, max_weight=1.0,
        clipping_range=plan.clip_range, quantization_range=plan.quantization_range,
        modulus_range=plan.modulus, timeout=timeout,
    )
    start = time.perf_counter()
    flwr_log = logging.getLogger("flwr")
    level = flwr_log.level
    flwr_log.setLevel(logging.ERROR)
    identity = _set_identity(SUPERLINK_NODE_ID)
    try:
        with _secure_masks():
            workflow(grid, context)
    finally:
        flwr_log.setLevel(level)
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = identity
    return strategy.captured, time.perf_counter() - start


def _close_round(conns: Mapping[int, socket.socket], listener: socket.socket, procs: Sequence[Any]) -> None:
    """Close every connection and the listener, and wait for the party processes (terminating stragglers)."""
    for s in conns.values():
        try:
            s.close()
        except OSError:
            pass
    listener.close()
    for proc in procs:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)


def masked_vectors(result: SecureSumResult) -> dict[int, np.ndarray]:
    """The masked vectors the server received (``observe=True``), by party index: what SecAgg+ lets it see."""
    from flwr.common import bytes_to_ndarray
    from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key

    out = {}
    for stage, nid, raw in result.observed:
        if stage != "collect_masked_vectors":
            continue
        msg = _from_bytes(raw)
        arrs = [bytes_to_ndarray(b) for b in msg.content.config_records[RECORD_KEY_CONFIGS][Key.MASKED_PARAMETERS]]
        out[result.node_index[nid]] = np.concatenate([a.ravel() for a in arrs[1:]])  # [0] is the weight factor
    return out

