"""One run sharded over Ray: the units of ``eval.executor=ray`` (issue 36, items 2 and 4).

The retrieval runner (:func:`experiments.run.run_retrieval`) cuts a data set into independent
*units* (one space each: a LongMemEval question's haystack, a LoCoMo conversation, a synthetic
space; every question is an addressed read of its gold space, so no unit reads another's
memories) and hands them here with the function that builds or asks one unit's store
(:mod:`experiments.units`; with the keyword channel on, twice: a phase that builds every
space and reads its BM25 statistics, then one that asks the questions with the data set's).
:func:`run_units` runs each unit as one Ray task, its store under
``<run dir>/shards/<unit>/store``, and gives the results back in the units' order:

    python -m experiments.run experiment=longmemeval eval.executor=ray eval.ray.num_cpus=2
    python -m experiments.run experiment=locomo eval.executor=ray eval.ray.address=HEAD:6379

Ray does the scheduling (as many units at once as the cluster has CPUs for
``eval.ray.unit_cpus``), the transfer of each unit's work and rows, and the retry of a unit
whose worker died (``ray.remote(max_retries=eval.ray.max_retries)``, 1 by default); nothing
here pools or queues work. A unit that still fails, or that raises, fails the run with a
:class:`UnitFailedError` naming it (the units still running are cancelled). Progress: units
done / total (tqdm).

Test hook (the fault tests, ``tests/experiments/test_ray_shard.py``): with
``MEMORY_CORE_SHARD_EXIT=UNIT=N`` in the environment (forwarded to the workers), the first
``N`` attempts of unit ``UNIT`` end their worker process with ``os._exit`` before any work, as
a killed worker would; the attempts are counted in files under the unit's directory.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from tqdm.auto import tqdm

from experiments.ray_launcher import init_kwargs
from experiments.specs import RayExecSpec

log = logging.getLogger(__name__)

SHARD_DIR = "shards"  # <run dir>/shards/<unit>/: each unit's store (and the test hook's marks)
EXIT_ENV = "MEMORY_CORE_SHARD_EXIT"  # test hook: "UNIT=N" (module docstring)
# variables a unit reads from the environment, forwarded to the workers of a new local
# instance and of an existing cluster (whose workers have the environment of `ray start`)
FORWARDED_ENV = ("MEMORY_CORE_DATA_DIR", "MEMORY_CORE_CACHE", "MEMORY_CORE_OUTPUTS",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAGAS_DO_NOT_TRACK",
                 "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", EXIT_ENV)

W = TypeVar("W")
R = TypeVar("R")


class UnitFailedError(RuntimeError):
    """A unit failed (its worker died more than ``eval.ray.max_retries`` times, or it raised):
    the run fails, naming it."""

    def __init__(self, unit_id: str, cause: BaseException):
        self.unit_id = unit_id
        super().__init__(f"unit {unit_id!r} failed: {type(cause).__name__}: {cause}")


class IncompleteRunError(RuntimeError):
    """The joined rows are not the rows the run asked for (a question missing or repeated)."""


@dataclass(frozen=True)
class Unit(Generic[W]):
    """One independent piece of a run: its id (a space id) and what its task is given."""

    unit_id: str
    work: W


def unit_dir(shard_root: Path, unit_id: str) -> Path:
    """Where unit ``unit_id`` keeps its store: ``<shard_root>/<unit id, made a safe name>``.

    Example:
        >>> unit_dir(Path("run/shards"), "conv-26").as_posix(), unit_dir(Path("s"), "a/b").name
        ('run/shards/conv-26', 'a_b')
    """
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in unit_id)
    return shard_root / safe


def exit_hook(unit_id: str, directory: Path, environ: Mapping[str, str]) -> None:
    """The test hook (module docstring): end this process for the first ``N`` attempts of the
    unit named in ``environ[EXIT_ENV]``; each such attempt leaves a mark in ``directory``."""
    value = environ.get(EXIT_ENV)
    if not value:
        return
    name, sep, times = value.rpartition("=")
    if not sep or not times.isdigit():
        raise ValueError(f"{EXIT_ENV} must read UNIT=N, got {value!r}")
    if name != unit_id:
        return
    marks = directory / "exit_hook"
    marks.mkdir(parents=True, exist_ok=True)
    done = len(list(marks.iterdir()))
    if done < int(times):
        (marks / f"attempt-{done + 1}").touch()
        log.warning("%s: ending the worker of unit %r (attempt %d)", EXIT_ENV, unit_id, done + 1)
        os._exit(17)


def _run_unit(fn: Callable[[W, Path], R], unit_id: str, work: W, directory: str) -> R:
    """One unit inside its Ray task: the test hook, the unit's directory, then ``fn``, which
    finds there what an earlier attempt or phase left (a retried unit starts its store over:
    :func:`experiments.units.build_unit`, :func:`~experiments.units.evaluate_unit`)."""
    path = Path(directory)
    exit_hook(unit_id, path, os.environ)
    path.mkdir(parents=True, exist_ok=True)
    return fn(work, path)


def ray_init_kwargs(spec: RayExecSpec, environ: Mapping[str, str]) -> dict[str, Any]:
    """``ray.init``'s keywords for ``eval.ray``: an existing cluster's address, or a new local
    instance (``address="local"``) bounded by ``num_cpus`` and ``object_store_memory``; the
    :data:`FORWARDED_ENV` variables that are set go to the workers.

    Example:
        >>> ray_init_kwargs(RayExecSpec(num_cpus=2), {"MEMORY_CORE_CACHE": "/c", "HOME": "/h"})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'address': 'local', 'num_cpus': 2, 'object_store_memory': 200000000,
         'include_dashboard': False, 'runtime_env': {'env_vars': {'MEMORY_CORE_CACHE': '/c'}}}
        >>> ray_init_kwargs(RayExecSpec(address="127.0.0.1:6379"), {})
        {'address': '127.0.0.1:6379'}
    """
    if spec.address is not None:
        return init_kwargs(spec.address, {}, FORWARDED_ENV, environ)
    local: dict[str, Any] = {"address": "local", "num_cpus": spec.num_cpus,
                             "object_store_memory": spec.object_store_memory,
                             "include_dashboard": False}
    local = {k: v for k, v in local.items() if v is not None}
    return init_kwargs(None, local, FORWARDED_ENV, environ)


def run_units(units: Sequence[Unit[W]], fn: Callable[[W, Path], R], shard_root: Path,
              spec: RayExecSpec, progress: bool = True, desc: str = "units"
              ) -> tuple[list[R], dict[str, Any]]:
    """Run ``fn(unit.work, unit directory)`` for every unit as a Ray task; the results in the
    units' order, and the record of where they ran (``metrics.json`` ``executor``).

    Runs in :func:`connected`'s connection. ``fn`` must be importable (a module-level
    function): Ray sends it by reference.
    """
    import ray  # pyright: ignore[reportMissingImports]  # the optional `ray` extra
    from ray.exceptions import RayError  # pyright: ignore[reportMissingImports]

    ids = [u.unit_id for u in units]
    if len(set(ids)) != len(ids):
        raise ValueError("unit ids must be unique")
    with connected(spec):
        t0 = time.perf_counter()
        cpus = ray.cluster_resources().get("CPU")
        task = ray.remote(num_cpus=spec.unit_cpus, max_retries=spec.max_retries)(_run_unit)
        refs = {task.remote(fn, u.unit_id, u.work, str(unit_dir(shard_root, u.unit_id))): i
                for i, u in enumerate(units)}
        results: list[Any] = [None] * len(units)
        pending = list(refs)
        with tqdm(total=len(units), desc=desc, unit="unit", disable=not progress) as bar:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    i = refs[ref]
                    try:
                        results[i] = ray.get(ref)
                    except RayError as err:
                        for other in pending:
                            ray.cancel(other, force=True)
                        raise UnitFailedError(units[i].unit_id, err) from err
                    bar.update(1)
        record = {"name": "ray", "units": len(units), "cluster_cpus": cpus,
                  "address": spec.address or "new local instance",
                  "unit_cpus": spec.unit_cpus, "max_retries": spec.max_retries,
                  "wall_s": round(time.perf_counter() - t0, 3), "shard_dir": SHARD_DIR}
        return results, record


@contextmanager
def connected(spec: RayExecSpec) -> Iterator[None]:
    """This process connected to Ray for the block: as :func:`ray_init_kwargs` says, shut
    down at its end, unless it is connected already (an enclosing block, or a job of
    ``hydra/launcher=ray``: its cluster), whose connection is used and left open."""
    import ray  # pyright: ignore[reportMissingImports]  # the optional `ray` extra

    started = not ray.is_initialized()
    if started:
        kwargs = ray_init_kwargs(spec, os.environ)
        log.info("ray.init(%s)", ", ".join(f"{k}={v!r}" for k, v in kwargs.items()
                                           if k != "runtime_env"))
        ray.init(**kwargs)
    try:
        yield
    finally:
        if started:
            ray.shutdown()
