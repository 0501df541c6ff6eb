"""``hydra/launcher=ray``: the launcher class and its typed config (``hydra/launcher/base_ray``).

Why not the published ``hydra-ray-launcher`` 1.2.2: it requires ``boto3`` (whose ``botocore``
pins ``python-dateutil<3``, against this project's ``python-dateutil==4.0.0``) and
``cloudpickle<3`` (``joblib`` 1.6, which scikit-learn and the joblib launcher use, requires
``cloudpickle>=3``), even for a local cluster: pip finds no install of it beside the pinned
set. This plugin does what its local launcher does, over Ray's public API only (``ray.init``,
``ray.remote``, ``ray.get``); Ray schedules the jobs.

Importing this module imports no ray (Hydra imports every plugin module at start-up, for every
Hydra command run where this directory is importable). No ``from __future__ import
annotations`` here: Hydra's plugin scan runs the module before it is in ``sys.modules``, where
a dataclass with string annotations cannot be built.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

# Variables the jobs read from the environment (conf/paths/default.yaml, the offline flags).
# A worker started by `ray start` has the environment of that command, not the driver's, so
# the launcher forwards these (the ones set) to every job through the runtime environment.
FORWARDED_ENV = ("MEMORY_CORE_DATA_DIR", "MEMORY_CORE_CACHE", "MEMORY_CORE_OUTPUTS",
                 "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAGAS_DO_NOT_TRACK",
                 "TOKENIZERS_PARALLELISM")


@dataclass
class RayLauncherConf:
    """``hydra.launcher`` for ``hydra/launcher=ray`` (conf/hydra/launcher/ray.yaml)."""

    _target_: str = "hydra_plugins.memory_core_ray_launcher.ray_launcher.RayLauncher"
    # The cluster: null = $RAY_ADDRESS, else the cluster `ray start` runs on this machine, else
    # a new local Ray instance for this sweep; or "HOST:PORT" (a node of the cluster),
    # "ray://HOST:10001" (Ray Client, from outside the cluster), "auto".
    address: str | None = None
    # More ray.init keywords (num_cpus, object_store_memory, include_dashboard, runtime_env,
    # ...); runtime_env.env_vars is merged with the forwarded variables below.
    init: dict[str, Any] = field(default_factory=dict)
    # ray.remote options of each job's task: num_cpus (1: as many jobs at once as the cluster
    # has CPUs), memory, resources, max_retries (a job whose worker dies is run again).
    remote: dict[str, Any] = field(default_factory=lambda: {"num_cpus": 1})
    # Names of environment variables copied from the driver to every job (when set).
    env: list[str] = field(default_factory=lambda: list(FORWARDED_ENV))
    # Run each job in the driver's working directory when that directory exists on the node
    # (one machine or a shared file system), as the joblib launcher's workers do.
    chdir_driver_cwd: bool = True
    # The joblib launcher's key, accepted so presets written for joblib compose under Ray
    # (experiment=ablation sets 2); not applied: Ray runs as many jobs at once as the cluster
    # has CPUs for remote.num_cpus (a value is logged as not applied).
    n_jobs: int | None = None


ConfigStore.instance().store(group="hydra/launcher", name="base_ray", node=RayLauncherConf,
                             provider="memory_core")


class RayLauncher(Launcher):
    """Each job of a multirun is one Ray task; results come back in the jobs' order."""

    def __init__(self, address: str | None = None, init: DictConfig | None = None,
                 remote: DictConfig | None = None, env: Sequence[str] = FORWARDED_ENV,
                 chdir_driver_cwd: bool = True, n_jobs: int | None = None) -> None:
        self.address = address
        self.init = init
        self.remote = remote
        self.env = list(env)
        self.chdir_driver_cwd = chdir_driver_cwd
        self.n_jobs = n_jobs
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        from experiments import ray_launcher  # ray is imported only when a sweep runs

        return ray_launcher.launch(self, job_overrides, initial_job_idx)
