"""A Hydra multirun on Ray: the work of ``hydra/launcher=ray``.

The launcher class lives in ``hydra_plugins/memory_core_ray_launcher`` (Hydra finds plugins only
there); this module connects to Ray and runs each job as one Ray task:

    python -m experiments.run -m hydra/launcher=ray experiment=smoke channels=hybrid,keyword_only
    python -m experiments.run -m hydra/launcher=ray hydra.launcher.address=HEAD:6379 ...

Each job is composed on the driver (``load_sweep_config``, as the joblib launcher does) and run
by :func:`hydra.core.utils.run_job` inside a task, so it writes the same run directory
(``<sweep dir>/<job num>/``) as under joblib. Ray does the scheduling (as many jobs at once as
the cluster has CPUs for ``remote.num_cpus``), the retries of a job whose worker died
(``remote.max_retries``) and the transfer of the task and its result; nothing here pools or
queues work. A job that raises is a failed :class:`~hydra.core.utils.JobReturn`, as under any
Hydra launcher.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


def _plain(node: Any) -> dict[str, Any]:
    """A config node (or None) as a plain dict, interpolations resolved."""
    if node is None:
        return {}
    if isinstance(node, DictConfig):
        return dict(OmegaConf.to_container(node, resolve=True))  # type: ignore[arg-type]
    return dict(node)


def init_kwargs(address: str | None, init: Mapping[str, Any], env_names: Sequence[str],
                environ: Mapping[str, str]) -> dict[str, Any]:
    """The keywords of ``ray.init``: ``init`` plus the address and, in the runtime
    environment's ``env_vars``, the forwarded variables that are set in ``environ`` (an
    explicit ``init.runtime_env.env_vars`` entry wins).

    Example:
        >>> init_kwargs("127.0.0.1:6379", {"runtime_env": {"env_vars": {"A": "x"}}},
        ...             ["A", "B", "C"], {"A": "driver", "B": "b"})
        {'runtime_env': {'env_vars': {'A': 'x', 'B': 'b'}}, 'address': '127.0.0.1:6379'}
    """
    out = dict(init)
    if address is not None:
        out["address"] = address
    forwarded = {name: environ[name] for name in env_names if name in environ}
    if forwarded:
        runtime_env = dict(out.get("runtime_env") or {})
        runtime_env["env_vars"] = {**forwarded, **(runtime_env.get("env_vars") or {})}
        out["runtime_env"] = runtime_env
    return out


def execute_job(hydra_context: HydraContext, sweep_config: DictConfig,
                task_function: TaskFunction, singleton_state: dict[Any, Any],
                cwd: str | None) -> JobReturn:
    """One job, inside its Ray task (the body of the joblib launcher's ``execute_job``)."""
    setup_globals()
    Singleton.set_state(singleton_state)
    if cwd is not None and os.path.isdir(cwd):
        os.chdir(cwd)
    HydraConfig.instance().set_config(sweep_config)
    return run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                   job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]],
           initial_job_idx: int) -> Sequence[JobReturn]:
    """Run every job of one batch as a Ray task; the JobReturns in the jobs' order."""
    import ray  # pyright: ignore[reportMissingImports]  # the optional `ray` extra

    setup_globals()
    config, context, task = launcher.config, launcher.hydra_context, launcher.task_function
    assert config is not None and context is not None and task is not None
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)

    if ray.is_initialized():
        log.info("Ray is already initialized in this process; using that connection")
    else:
        kwargs = init_kwargs(launcher.address, _plain(launcher.init), launcher.env, os.environ)
        log.info("ray.init(%s)", ", ".join(f"{k}={v!r}" for k, v in kwargs.items()
                                           if k != "runtime_env"))
        ray.init(**kwargs)
    if getattr(launcher, "n_jobs", None) is not None:
        log.info("hydra.launcher.n_jobs=%s (a joblib setting) is not applied: Ray runs as many "
                 "jobs at once as the cluster has CPUs for remote.num_cpus", launcher.n_jobs)
    remote = _plain(launcher.remote)
    cwd = None
    if launcher.chdir_driver_cwd and "working_dir" not in (_plain(launcher.init)
                                                           .get("runtime_env") or {}):
        cwd = os.getcwd()
    job = ray.remote(**remote)(execute_job) if remote else ray.remote(execute_job)
    log.info("Ray launcher: %d jobs on %s (cluster CPUs: %s), sweep output dir: %s",
             len(job_overrides), launcher.address or "the default Ray address",
             ray.cluster_resources().get("CPU"), sweep_dir)
    state = Singleton.get_state()
    refs = []
    for offset, overrides in enumerate(job_overrides):
        idx = initial_job_idx + offset
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
        sweep_config = context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        refs.append(job.remote(context, sweep_config, task, state, cwd))
    return list(ray.get(refs))
