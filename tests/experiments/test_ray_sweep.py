"""A Hydra multirun on a local Ray head (issue 36's bar): ``ray start --head`` on 127.0.0.1 (a
free port, its own temp dir, started and stopped by the test, bounded in time), 2 configs x the
smoke preset run by ``hydra/launcher=ray`` with the head's address, then the sweep's
``experiments.sweep_report`` table checked. Skipped where ray is not installed (the ``ray``
extra)."""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_sweep_report import check_smoke_report, smoke_multirun

from experiments.ray_launcher import init_kwargs

START_TIMEOUT_S = 120   # the head answering `ray status` (2 shared cores: ~10-30 s)
SWEEP_TIMEOUT_S = 420   # the two jobs (~40 s) plus workers starting
STOP_TIMEOUT_S = 45     # SIGTERM to the head's process group (it drains ~30 s), then SIGKILL
# Ray 2.60's token authentication with a token of this test run (its GCS port listens on every
# interface): the head, `ray status` and the sweep's driver read it from the environment, and
# nothing is written to ~/.ray.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ray_cli() -> list[str]:
    script = Path(sys.executable).parent / "ray"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


def _session(sid: int) -> list[int]:
    """Live pids of the session ``sid`` (the head was started as its leader, so every process
    it started is there, whatever its process group: Ray's workers have their own); zombies,
    dead and waiting for their parent to reap them, are left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if os.getsid(int(entry.name)) == sid and state != "Z":
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def _stop(head: subprocess.Popen) -> list[int]:
    """Stop the head this test started: SIGTERM to its process group (the head drains, then
    stops what it started), then SIGKILL to whatever of its session is left after
    ``STOP_TIMEOUT_S``. Never ``ray stop``, which stops every Ray process of the machine.
    Returns the pids that needed SIGKILL."""
    try:
        os.killpg(head.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _session(head.pid) and time.monotonic() < deadline:
        time.sleep(1)
        head.poll()
    left = _session(head.pid)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    head.wait(timeout=10)
    return left


@contextmanager
def local_head(log_path: Path):
    """``ray start --head --block`` on 127.0.0.1 in its own session; yields its address once
    ``ray status`` answers; stopped (and its temp dir removed) on the way out, failure or not."""
    port, client_port, agent_port, metrics_port, env_port = _free_ports(5)
    # a short root: Ray's Unix sockets live under it (107-byte path limit)
    temp_dir = tempfile.mkdtemp(prefix="mcray", dir="/tmp")
    address = f"127.0.0.1:{port}"
    env = {**os.environ, **RAY_ENV}
    with open(log_path, "w") as log:
        head = subprocess.Popen(
            [*_ray_cli(), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
             "--port", str(port), "--ray-client-server-port", str(client_port),
             "--dashboard-agent-listen-port", str(agent_port),
             "--metrics-export-port", str(metrics_port), "--runtime-env-agent-port",
             str(env_port), "--num-cpus", "2", "--object-store-memory", "100000000",
             "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", temp_dir],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if head.poll() is not None:
                pytest.fail(f"ray start exited {head.returncode}:\n{log_path.read_text()[-3000:]}")
            status = subprocess.run([*_ray_cli(), "status", "--address", address], env=env,
                                    capture_output=True, text=True, timeout=60)
            if status.returncode == 0 and "CPU" in status.stdout:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not answer within {START_TIMEOUT_S} s:\n"
                            f"{status.stdout[-1500:]}{status.stderr[-1500:]}")
            time.sleep(2)
        yield address
    finally:
        killed = _stop(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not _session(head.pid), f"Ray processes left after SIGKILL to {killed}"


def test_init_kwargs_forwards_the_environment_the_jobs_read():
    got = init_kwargs(None, {"num_cpus": 2}, ["MEMORY_CORE_CACHE", "UNSET"],
                      {"MEMORY_CORE_CACHE": "/c"})
    assert got == {"num_cpus": 2, "runtime_env": {"env_vars": {"MEMORY_CORE_CACHE": "/c"}}}
    assert init_kwargs("auto", {}, [], {}) == {"address": "auto"}


@pytest.mark.model
@pytest.mark.slow
def test_multirun_on_a_local_ray_head_and_its_sweep_report(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (the `ray` extra: "
                                      "pip install -e '.[dev,ray]')")
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    sweep = tmp_path / "multiruns" / "sweep"
    with local_head(tmp_path / "ray_head.log") as address:
        done = smoke_multirun(sweep, "hydra/launcher=ray", f"hydra.launcher.address={address}",
                              timeout=SWEEP_TIMEOUT_S)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    log = done.stdout + done.stderr
    assert f"Ray launcher: 2 jobs on {address}" in log
    assert "(execute_job pid=" in log  # the jobs' output came back from Ray workers
    check_smoke_report(sweep)


def _compose(overrides):
    from hydra import compose, initialize_config_dir

    import experiments.config  # noqa: F401  (registers the structured configs)

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "conf"),
                               version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


def test_launcher_config_is_typed_and_joblib_stays_the_default():
    """Composes without ray: the plugin module imports none."""
    cfg = _compose(["hydra/launcher=ray", "hydra.launcher.address=127.0.0.1:6379"])
    launcher = cfg.hydra.launcher
    assert launcher._target_ == ("hydra_plugins.memory_core_ray_launcher.ray_launcher."
                                 "RayLauncher")
    assert launcher.address == "127.0.0.1:6379" and launcher.remote == {"num_cpus": 1}
    assert "MEMORY_CORE_CACHE" in launcher.env
    with pytest.raises(Exception, match="adress"):
        _compose(["hydra/launcher=ray", "hydra.launcher.adress=x"])
    # a preset written for joblib composes under Ray (its n_jobs is accepted, not applied)
    ablation = _compose(["experiment=ablation", "hydra/launcher=ray"])
    assert ablation.hydra.launcher.n_jobs == 2
    assert _compose(["experiment=ablation"]).hydra.launcher._target_.endswith("JoblibLauncher")
    assert "Ray" not in _compose([]).hydra.launcher._target_
