"""A DPO round in its own process(es): ``accelerate launch --num_processes K -m privtext.learn.worker``.

A privtext run is one process; trl's DPOTrainer spreads a round over K GPUs only when accelerate starts it (one
process per GPU, data-parallel, gradients averaged). With ``evolution.learn.dpo.devices: K`` > 1 (a
``transformers`` or ``vllm`` generator; the ``vllm`` learner uses this path for every round, K = 1 included, so the
training copy of the weights leaves the GPU when the round ends), :func:`train_launched` writes the round's inputs
to ``<step folder>/launch/``:

* ``records.jsonl`` — :func:`~privtext.learn.pairs.pair_records` of the round's pairs (the generator's rendered
  RANDOM_API prompt and two generated texts: nothing private, the pairs are built from released values only);
* ``options.json`` — the :class:`~privtext.learn.options.DPOOptions` (``batch_size`` is per GPU);
* ``start/`` — the adapter the round continues (:mod:`.adapter`): the generator's current one, so the launched round
  starts where the in-process round would;

runs :func:`worker_command` as a subprocess (its output in ``launch/worker.log``; the progress bar on the terminal
when stderr is one) and reads the trained adapter back from ``launch/adapter/``. The round's seed is the one the
in-process trl round draws (``derive(seed, "learn", name, "train", t)``), so on one device the two give the same
adapter (``tests/test_learn_multigpu.py``).

:func:`check_devices` refuses K greater than the CUDA devices visible here (``CUDA_VISIBLE_DEVICES`` counts) with a
:class:`~privtext.errors.ConfigError` naming ``evolution.learn.dpo.devices``; ``check_learn_config`` calls it
before any run folder exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..atomicio import atomic_path, dumps
from ..errors import BackendError, ConfigError
from ..rng import spawn_seed
from .devices import KEY, check_devices, visible_cuda_devices

LAUNCH = "launch"


def worker_command(*, model: str, records: Path, options: Path, adapter_out: Path, seed: int, processes: int,
                   adapter_in: Path | None = None, peft_out: Path | None = None, merged_out: Path | None = None,
                   cpu: bool = False, python: str | None = None) -> list[str]:
    """The command line that trains one round: ``accelerate launch`` (as ``python -m accelerate.commands.launch``,
    the venv's own) with ``processes`` processes of ``privtext.learn.worker`` and its arguments.

    ``processes`` > 1 takes ``--multi_gpu`` (torchrun, one process per device), on the CPU too: accelerate refuses
    ``--cpu`` beside ``--multi_gpu``, and its ``--cpu`` alone starts one process whatever ``--num_processes`` says.
    A CPU round hides every CUDA device from the worker (:func:`worker_env`), so accelerate joins its K processes
    with gloo; ``tests/test_learn_multigpu.py`` runs K = 2 that way. One CPU process takes ``--cpu``."""
    if processes < 1:
        raise ConfigError(f"{KEY} must be at least 1, got {processes}")
    launch = [python or sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes),
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    if processes > 1:
        launch.append("--multi_gpu")
    elif cpu:
        launch.append("--cpu")
    args = ["--model", str(model), "--records", str(records), "--options", str(options), "--adapter-out",
            str(adapter_out), "--seed", str(int(seed))]
    for flag, p in (("--adapter-in", adapter_in), ("--peft-out", peft_out), ("--merged-out", merged_out)):
        if p is not None:
            args += [flag, str(p)]
    return [*launch, "-m", "privtext.learn.worker", *args]


def worker_env(*, cpu: bool) -> dict[str, str]:
    """The subprocess's environment: this one, privtext importable (its source folder first on PYTHONPATH) and,
    for a CPU round, no CUDA device visible."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_worker(cmd: Sequence[str], *, log: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd``; its stdout (and its stderr unless this process's stderr is a terminal, where the round's
    progress bar shows) go to ``log``. A failure is a :class:`BackendError` with the log's last lines."""
    log.parent.mkdir(parents=True, exist_ok=True)
    tty = sys.stderr.isatty()
    with open(log, "wb") as out:
        rc = subprocess.run(list(cmd), stdout=out, stderr=None if tty else subprocess.STDOUT, env=env,
                            check=False).returncode
    if rc != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-15:]
        raise BackendError(f"the DPO worker failed (exit status {rc}; {log}):\n" + "\n".join(tail))


def write_inputs(work: Path, records: Sequence[dict[str, str]], options: Any) -> tuple[Path, Path]:
    """``records.jsonl`` and ``options.json`` in ``work`` (atomic); returns their paths."""
    work.mkdir(parents=True, exist_ok=True)
    rec, opt = work / "records.jsonl", work / "options.json"
    with atomic_path(rec) as tmp:
        tmp.write_text("".join(dumps(dict(r)) + "\n" for r in records), encoding="utf-8")
    with atomic_path(opt) as tmp:
        tmp.write_text(options.model_dump_json(), encoding="utf-8")
    return rec, opt


def round_seed(learner: Any, iteration: int) -> int:
    """The seed the in-process trl round of ``learner`` draws for ``iteration`` (:meth:`DPOLearner.train`)."""
    return int(spawn_seed(learner._rng("train", iteration)))


def launch_round(learner: Any, iteration: int, pairs: Sequence[Any], work: Path, *, model: str,
                 adapter_out: Path, adapter_in: Path | None, processes: int, cpu: bool,
                 peft_out: Path | None = None, merged_out: Path | None = None) -> None:
    """Write the round's inputs into ``work`` and run the worker on them (module docstring): the pairs as
    :func:`~privtext.learn.pairs.pair_records` with the learner's rendered prompts, its DPO options, and the seed
    the in-process round would draw."""
    from .pairs import pair_records

    rec, opt = write_inputs(work, pair_records(list(pairs), lambda p: learner.prompt_text(p.group)),
                            learner.options.dpo)
    cmd = worker_command(model=model, records=rec, options=opt, adapter_out=adapter_out, adapter_in=adapter_in,
                         peft_out=peft_out, merged_out=merged_out, seed=round_seed(learner, iteration),
                         processes=processes, cpu=cpu)
    run_worker(cmd, log=work / "worker.log", env=worker_env(cpu=cpu))


def round_result(meta: dict[str, Any], processes: int) -> dict[str, Any]:
    """The trainer's figures of a launched round, from the adapter's metadata the worker wrote."""
    return {**dict(meta.get("result") or {}), "processes": int(meta.get("processes", processes)), "launched": True}


def train_launched(learner: Any, iteration: int, pairs: Sequence[Any], folder: Path, *,
                   processes: int | None = None, cpu: bool | None = None) -> dict[str, Any]:
    """One round of a ``transformers`` generator's :class:`~privtext.learn.step.DPOLearner` on
    ``dpo.devices`` GPUs (module docstring): the worker continues the generator's current adapter, and the trained
    one is loaded back into the generator's model. Returns the trainer's figures (``processes``, ``launched``)."""
    from .adapter import load_adapter, save_adapter

    k = int(processes if processes is not None else learner.options.dpo.devices)
    if learner.trainer != "trl":
        raise ConfigError(f"{KEY}: {k} trains through trl under accelerate; learn.dpo.trainer is {learner.trainer}")
    work = Path(folder) / LAUNCH
    start = save_adapter(learner.model, work / "start", meta={"iteration": iteration, "role": "start"})
    device = next(learner.model.parameters()).device.type
    on_cpu = (device == "cpu") if cpu is None else cpu
    launch_round(learner, iteration, pairs, work, model=str(learner.generator.options.model),
                 adapter_out=work / "adapter", adapter_in=start, processes=k, cpu=on_cpu)
    return round_result(load_adapter(learner.model, work / "adapter"), k)


__all__ = ["LAUNCH", "check_devices", "launch_round", "round_result", "round_seed", "run_worker", "train_launched",
           "visible_cuda_devices",
           "worker_command", "worker_env", "write_inputs"]
