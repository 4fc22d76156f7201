"""Ray plumbing shared by distributed embedding (:mod:`privtext.embed.distributed`) and distributed vote counting
(:mod:`privtext.mechanisms.distributed`): the lazy import with an install hint, and joining (or starting) the data
holder's cluster once per process.

Ray is an optional dependency (``pip install -c constraints.txt -e '.[ray]'``); nothing here imports it at module
level, so privtext works without it until a ``cluster: {backend: ray}`` run asks for it.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigError, MissingDependencyError, optional_import

_BLAS_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def ray_module(purpose: str) -> Any:
    """``import ray``, or a :class:`MissingDependencyError` naming ``purpose`` and the ``[ray]`` extra."""
    return optional_import("ray", "ray", purpose)


def ray_data_module(purpose: str) -> Any:
    """``import ray.data`` (Ray Data needs pyarrow, pandas and fsspec besides Ray), quietened: no progress bars,
    no per-dataset log banner on the driver's console."""
    ray_module(purpose)
    try:
        import ray.data
    except ImportError as e:
        raise MissingDependencyError(getattr(e, "name", None) or "ray[data]", "ray", purpose) from None
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-dataset INFO banners
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.enable_auto_log_stats = False
    return ray.data


def connect(*, address: str | None = None, num_cpus: int | None = None, worker_threads: int | None = 1,
            purpose: str) -> tuple[Any, bool]:
    """Join the cluster at ``address`` (``"auto"``, ``"ray://host:10001"``), or start a local one with
    ``num_cpus`` CPUs; a no-op when this process is already connected. Returns ``(ray, started)``: ``started``
    says whether this call started the connection (its caller may then shut it down).

    ``worker_threads``: BLAS threads per worker process (default 1: the cluster's parallelism is its tasks, and
    ``num_cpus`` tasks each running all cores' worth of BLAS threads would oversubscribe the machine)."""
    if num_cpus is not None and (isinstance(num_cpus, bool) or int(num_cpus) < 1):
        raise ConfigError(f"cluster.num_cpus must be a positive integer, got {num_cpus!r}")
    ray = ray_module(purpose)
    if ray.is_initialized():
        return ray, False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address is not None:
        kw["address"] = address
    elif num_cpus is not None:
        kw["num_cpus"] = int(num_cpus)
    if worker_threads:
        kw["runtime_env"] = {"env_vars": {v: str(worker_threads) for v in _BLAS_VARS}}
    ray.init(**kw)
    return ray, True


def cluster_cpus(ray: Any) -> int:
    """The connected cluster's CPU count (at least 1)."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


__all__ = ["cluster_cpus", "connect", "ray_data_module", "ray_module"]
