"""DP-SGD's per-record gradients on several devices (``dpft.devices``): one process per device, the noise once.

The expensive part of a DP-SGD step is step 2–3 of :mod:`privtext.mechanisms.dpsgd`: a gradient per record,
clipped. It splits over records: S_t = Σᵢ clip(gᵢ, C) = Σ_r Σ_{i ∈ batch_r} clip(gᵢ, C) for any partition of the
batch. So with W devices the driver (the run's own process, rank 0, on ``devices[0]``) and W − 1 worker
processes (ranks 1…W−1, spawned, one per further device) each clip the records of their share, the shares are
summed (``torch.distributed.reduce`` to rank 0: gloo for CPUs, NCCL for GPUs), and only then does the driver
add the noise, on the total, exactly as a single process does:

* **the sensitivity is unchanged** — a record is in one share, its clipped gradient is in S_t once, so adding or
  removing it moves S_t by at most C in L2 (the Δ of :func:`~privtext.mechanisms.dpsgd.dpsgd_contribution`);
* **the noise is drawn once**, by the driver, from the release's privacy randomness, after the sum: no worker
  draws noise, so the noise in S_t + N(0, (σC)²I) is that of the ledger's event whatever W is (Opacus'
  ``DistributedDPOptimizer`` instead adds the noise on rank 0 before its all-reduce: the same sum);
* **the sampling is unchanged** — the driver draws the Poisson batch (from the same privacy randomness) and sends
  its indices to the workers; rank r takes every W-th index starting at r;
* **the workers keep no state** — every step the driver sends the trainable parameters (the optimiser, its
  state, the checkpoints and resume stay in the driver's process), so a worker is a pure function from
  (parameters, indices) to a clipped gradient sum. With reproducible noise a W-device run reaches the
  parameters of a one-process run up to float summation order (``tests/test_dpft.py``).

Workers hold a copy of the model (sent once, when they start: on CPUs its frozen weights stay in memory shared with
the driver, the trainable ones are copied) and of the private training sequences (the same machine's memory;
nothing is written to disk). Without ``threads`` each of the W processes, the driver included, uses 1/W of the
driver's torch threads during training. Communication per step: the batch's indices and the d trainable
parameters out, d + 1 floats back (the clipped sum and the chunk losses, the latter for the driver's private
diagnostics).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ..errors import BackendError, ConfigError, MissingDependencyError
from ..privacy.release import _fault
from .dpsgd import accumulate

_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")
STOP = -1


def check_devices(devices: Sequence[str]) -> list[str]:
    """The device list of ``dpft.devices`` checked without torch: non-empty, each ``cpu`` or ``cuda[:i]``, all of
    one kind, no GPU twice (NCCL refuses two ranks on one GPU)."""
    out = [str(d).strip() for d in devices]
    if not out:
        raise ConfigError("dpft.devices is empty: list one device per process, e.g. [cuda:0, cuda:1] or [cpu, cpu]")
    bad = [d for d in out if not _DEVICE.match(d)]
    if bad:
        raise ConfigError(f"dpft.devices: {bad[0]!r} is not a device (cpu, cuda or cuda:<index>)")
    kinds = {d.split(":")[0] for d in out}
    if len(kinds) > 1:
        raise ConfigError(f"dpft.devices {out}: mixes CPUs and GPUs (one collective backend serves one kind)")
    if kinds == {"cuda"}:
        norm = [d if ":" in d else "cuda:0" for d in out]
        dup = sorted({d for d in norm if norm.count(d) > 1})
        if dup:
            raise ConfigError(f"dpft.devices {out}: {dup[0]} is listed twice (one process per GPU)")
    return out


def check_devices_available(devices: Sequence[str]) -> None:
    """Refuse GPUs the machine does not have and a missing ``torch.distributed`` (before a run directory)."""
    import torch

    if len(devices) > 1 and not torch.distributed.is_available():
        raise MissingDependencyError("torch.distributed", "dpft", "DP-SGD on several devices (dpft.devices)")
    for d in devices:
        if d.startswith("cuda"):
            if not torch.cuda.is_available():
                raise ConfigError(f"dpft.devices: {d!r} but CUDA is not available on this machine")
            i = int(d.split(":")[1]) if ":" in d else 0
            if i >= torch.cuda.device_count():
                raise ConfigError(f"dpft.devices: {d!r} but this machine has {torch.cuda.device_count()} GPU(s)")


class StepLoss(Protocol):
    """What the driver and every worker compute: ``make(model, device)(indices)`` is the mean over those records of
    each record's own loss (Opacus' ``loss_reduction="mean"``). A picklable value (it travels to the workers), e.g.
    :class:`privtext.methods.dpft.models.SequenceLoss`."""

    def make(self, model: Any, device: Any) -> Callable[[np.ndarray], Any]: ...


@contextlib.contextmanager
def _loopback_gloo(backend: str) -> Any:
    """All ranks are on this machine: gloo talks over the loopback interface (``GLOO_SOCKET_IFNAME``, unless set),
    instead of the address the host name resolves to (which a container may not resolve). Spawned workers
    inherit the variable; it is restored once the group is up."""
    import socket

    if backend != "gloo" or "GLOO_SOCKET_IFNAME" in os.environ:
        yield
        return
    lo = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)
    if lo is None:
        yield
        return
    os.environ["GLOO_SOCKET_IFNAME"] = lo
    try:
        yield
    finally:
        os.environ.pop("GLOO_SOCKET_IFNAME", None)


def share(idx: np.ndarray, rank: int, world: int) -> np.ndarray:
    """Rank ``rank``'s records of a batch: every ``world``-th index from position ``rank`` (a partition)."""
    return idx[rank::world]


class GradientWorkers:
    """W − 1 worker processes and the driver as rank 0 of one process group (module docstring). Use as a context
    manager around the DP-SGD steps; ``module`` must be the plain model (before Opacus wraps it), ``names`` its
    trainable parameters in the optimiser's order."""

    def __init__(self, module: Any, names: Sequence[str], loss: StepLoss, *, devices: Sequence[str],
                 max_grad_norm: float, physical_batch_size: int, threads: int | None = None,
                 timeout_s: float = 900.0):
        self.devices = check_devices(devices)
        self.world = len(self.devices)
        self.module, self.names, self.loss = module, list(names), loss
        self.max_grad_norm, self.physical = float(max_grad_norm), int(physical_batch_size)
        self.threads = threads
        self.timeout_s = float(timeout_s)
        self.backend = "nccl" if self.devices[0].startswith("cuda") else "gloo"
        self._procs: list[Any] = []
        self._driver_threads: int | None = None
        self._dir: str | None = None
        self._group = False

    # -------------------------------------------------------------- lifecycle
    def __enter__(self) -> GradientWorkers:
        try:
            self.start()
        except BaseException:
            self.close(failed=True)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(failed=exc_type is not None)

    def start(self) -> None:
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        if dist.is_initialized():
            raise ConfigError("dpft.devices: this process already belongs to a torch.distributed group (started "
                              "by torchrun?); run privtext as one process, it starts its own workers")
        self._dir = tempfile.mkdtemp(prefix="privtext-dpsgd-")
        init = "file://" + os.path.join(self._dir, "rendezvous")
        ctx = mp.get_context("spawn")
        threads = self.threads or max(1, torch.get_num_threads() // self.world)
        self._driver_threads = torch.get_num_threads()
        torch.set_num_threads(threads)  # the driver computes a share too: W processes × threads each
        conns = []
        with _loopback_gloo(self.backend):
            self._spawn(ctx, init, threads, conns)
            self._await_ready(conns)
            dist.init_process_group(self.backend, init_method=init, rank=0, world_size=self.world,
                                    timeout=datetime.timedelta(seconds=self.timeout_s))
        self._group = True
        self._comm = torch.device(self.devices[0] if self.backend == "nccl" else "cpu")

    def _spawn(self, ctx: Any, init: str, threads: int, conns: list[Any]) -> None:
        for rank in range(1, self.world):
            ours, theirs = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker, daemon=True, name=f"privtext-dpsgd-{rank}",
                            args=(rank, self.world, init, self.backend, self.devices[rank], self.module,
                                  self.names, self.loss, self.max_grad_norm, self.physical, threads,
                                  self.timeout_s, theirs))
            p.start()
            theirs.close()
            self._procs.append(p)
            conns.append(ours)

    def _await_ready(self, conns: list[Any]) -> None:
        """Wait until every worker has loaded its model copy, or fail with the reason one did not (a worker that
        dies before joining the process group would otherwise leave the driver waiting for the timeout)."""
        import time
        from multiprocessing.connection import wait

        pending = dict(enumerate(conns, start=1))
        deadline = time.monotonic() + self.timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"DP-SGD workers {sorted(pending)} did not start within {self.timeout_s:g} s")
            sentinels = {self._procs[r - 1].sentinel: r for r in pending}
            for ready in wait([*pending.values(), *sentinels], timeout=min(left, 5.0)):
                r = sentinels.get(ready) or next(k for k, c in pending.items() if c is ready)
                if r not in pending:
                    continue
                conn = pending[r]
                msg: Any = None
                with contextlib.suppress(EOFError, OSError):
                    if conn.poll():
                        msg = conn.recv()
                if msg == "ready":
                    del pending[r]
                    conn.close()
                    continue
                p = self._procs[r - 1]
                p.join(timeout=5)
                if isinstance(msg, tuple):
                    why = msg[1]
                else:  # ended without a word: killed, or its interpreter failed before the worker's code ran
                    why = (f"exit code {p.exitcode}, no error reported (workers are spawned processes: a script "
                           "that calls privtext must guard its entry point with if __name__ == '__main__')")
                for c in pending.values():
                    c.close()
                raise BackendError(f"DP-SGD worker {r} (device {self.devices[r]}) failed before training: "
                                   f"{why}") from None

    def close(self, failed: bool = False) -> None:
        import torch.distributed as dist

        try:
            if self._group and not failed:
                with contextlib.suppress(Exception):
                    self._header(STOP)
            for p in self._procs:
                p.join(timeout=30 if not failed else 1)
            for p in self._procs:
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=10)
        finally:
            if self._group:
                with contextlib.suppress(Exception):
                    dist.destroy_process_group()
                self._group = False
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            if self._driver_threads is not None:
                import torch

                torch.set_num_threads(self._driver_threads)
                self._driver_threads = None
        bad = [p.exitcode for p in self._procs if p.exitcode not in (0, None)]
        self._procs = []
        if bad and not failed:
            raise BackendError(f"a DP-SGD worker process ended with exit code {bad[0]}")

    @contextlib.contextmanager
    def _collective(self) -> Any:
        """A collective with the workers: a worker that stopped (killed, out of memory) makes it fail at once
        (gloo/NCCL see the closed connection); say which, and that the run can be resumed."""
        try:
            yield
        except RuntimeError as e:
            gone = [f"worker {i} (exit code {p.exitcode})" for i, p in enumerate(self._procs, start=1)
                    if not p.is_alive()]
            raise BackendError(
                f"DP-SGD on {self.world} devices stopped: {', '.join(gone) or 'a collective failed'} ({e}). The "
                "epoch under way was recorded in the ledger before it ran; `privtext resume` continues from the "
                "last kept epoch") from e

    # -------------------------------------------------------------- one step (driver side)
    def _header(self, n: int) -> None:
        import torch
        import torch.distributed as dist

        dist.broadcast(torch.tensor([n], dtype=torch.int64, device=self._comm), src=0)

    def scatter(self, idx: np.ndarray, params: Sequence[Any]) -> np.ndarray:
        """Send the batch's indices and the current trainable parameters to the workers; the driver's share."""
        import torch
        import torch.distributed as dist

        flat = torch.cat([p.detach().reshape(-1) for p in params]).to(self._comm)
        with self._collective():
            self._header(len(idx))
            if len(idx):
                dist.broadcast(torch.as_tensor(np.asarray(idx, dtype=np.int64), device=self._comm), src=0)
            dist.broadcast(flat, src=0)
        return share(idx, 0, self.world)

    def gather(self, params: Sequence[Any], loss_total: float) -> float:
        """Sum every rank's clipped gradient sum into the driver's ``p.summed_grad``; the batch's total loss."""
        import torch.distributed as dist

        out = _packed_sums(params, loss_total, self._comm)
        with self._collective():
            dist.reduce(out, dst=0, op=dist.ReduceOp.SUM)
        at = _unpack_into([p.summed_grad for p in params], out)
        return float(out[at])


def _packed_sums(params: Sequence[Any], loss_total: float, comm: Any) -> Any:
    """One flat tensor on the collective's device: every ``p.summed_grad``, then the share's total loss."""
    import torch

    return torch.cat([*(p.summed_grad.detach().reshape(-1) for p in params),
                      torch.tensor([loss_total], dtype=params[0].summed_grad.dtype,
                                   device=params[0].summed_grad.device)]).to(comm)


def _unpack_into(targets: Sequence[Any], flat: Any) -> int:
    """Copy consecutive slices of ``flat`` into ``targets`` (in place); the offset after the last one."""
    import torch

    at = 0
    with torch.no_grad():
        for t in targets:
            t.copy_(flat[at:at + t.numel()].view_as(t))
            at += t.numel()
    return at


def _worker(rank: int, world: int, init: str, backend: str, device: str, module: Any, names: Sequence[str],
            loss: StepLoss, max_grad_norm: float, physical: int, threads: int, timeout_s: float,
            conn: Any) -> None:
    """A worker's loop: receive (indices, parameters), clip its share's gradients, send the sum; until STOP."""
    import traceback

    import torch
    import torch.distributed as dist

    try:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        torch.set_num_threads(threads)
        dev = torch.device(device)
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        comm = dev if backend == "nccl" else torch.device("cpu")
        module = module.to(dev)
        module.train()
        named = dict(module.named_parameters())
        params = [named[n] for n in names]
        for p in params:  # on a CPU the module arrived in the driver's shared memory: frozen weights stay shared,
            p.data = p.data.clone()  # the trainable ones become this worker's own (it overwrites them every step)
        gs = GradSampleModule(module, loss_reduction="mean")
        # clipping only: this optimiser never steps and never adds noise (the driver adds it, once, to the sum)
        opt = DPOptimizer(torch.optim.SGD(params, lr=0.0), noise_multiplier=0.0, max_grad_norm=max_grad_norm,
                          expected_batch_size=1, loss_reduction="mean")
        loss_of = loss.make(gs, dev)
    except BaseException as e:
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"))
        raise
    conn.send("ready")
    conn.close()
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        flat = torch.empty(sum(p.numel() for p in params), dtype=params[0].dtype, device=comm)
        header = torch.zeros(1, dtype=torch.int64, device=comm)
        for step in itertools.count():
            dist.broadcast(header, src=0)
            n = int(header.item())
            if n == STOP:
                break
            idx = torch.empty(n, dtype=torch.int64, device=comm)
            if n:
                dist.broadcast(idx, src=0)
            dist.broadcast(flat, src=0)
            _unpack_into(params, flat)
            _fault(f"dpsgd_worker:{rank}:step_{step:03d}")
            opt.zero_grad(set_to_none=True)
            total = accumulate(opt, share(idx.cpu().numpy(), rank, world), loss_of, physical)
            dist.reduce(_packed_sums(params, total, comm), dst=0, op=dist.ReduceOp.SUM)
            opt.zero_grad(set_to_none=True)
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


__all__ = ["GradientWorkers", "StepLoss", "check_devices", "check_devices_available", "share"]
