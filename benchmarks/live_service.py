"""A real ``memory-core serve`` process on a free loopback port (127.0.0.1 only), for the
service tests (``tests/service/``) and the load benchmark (:mod:`benchmarks.serve_load`).

By default the served engine hashes words instead of running a model
(``benchmarks.hash_engine:open_engine``), so a server starts in about two seconds;
``engine_factory=None`` serves ``MemoryEngine.open`` (the packaged MiniLM).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from memory_core.service.keys import KeyStore

ROOT = Path(__file__).resolve().parents[1]
HASH_ENGINE = "benchmarks.hash_engine:open_engine"
START_TIMEOUT_S = 120.0


def free_port() -> int:
    """A port nothing listens on now (127.0.0.1 only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveService:
    url: str
    store: str  # the store directory, or a postgresql:// URI
    log: Path
    keys: dict[str, str] = field(default_factory=dict)
    pid: int = 0  # the serving process (a fault test kills it)

    def client(self, principal: str | None = None) -> httpx.Client:
        headers = {} if principal is None else {
            "Authorization": f"Bearer {self.keys[principal]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0)

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def start_service(tmp: Path, principals: Sequence[str], engine_factory: str | None = HASH_ENGINE,
                  extra: Sequence[str] = (), store: str | None = None,
                  keys_file: Path | None = None) -> Iterator[LiveService]:
    """Keys for ``principals``, then ``python -m memory_core.cli serve`` until /healthz
    answers; stopped (SIGTERM, then kill) on exit. ``store``: ``tmp/store`` unless given (a
    ``postgresql://`` URI: keys in its ``api_keys`` table); ``keys_file``: keys in that file
    instead (``--keys``); keys already there are kept (a second process serving the same
    store)."""
    served = str(tmp / "store") if store is None else store
    keys = KeyStore.for_store(served, keys_file)
    try:
        made = {p: keys.create(p) for p in principals}
    finally:
        keys.close()
    port = free_port()
    argv = [sys.executable, "-m", "memory_core.cli", "serve", "--store", served,
            "--host", "127.0.0.1", "--port", str(port), *extra]
    if keys_file is not None:
        argv += ["--keys", str(keys_file)]
    if engine_factory is not None:
        argv += ["--engine-factory", engine_factory]
    log = tmp / f"server-{port}.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield LiveService(url, served, log, made, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()




@contextlib.asynccontextmanager
async def mcp_client(service: LiveService, principal: str, mode: str = "auto"
                     ) -> AsyncIterator[Any]:
    """The MCP SDK's own client on the service's ``/mcp`` (streamable HTTP) with
    ``principal``'s bearer key (``mode="legacy"``: the 2025 handshake era, a session id)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {service.keys[principal]}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(f"{service.url}/mcp", http_client=http),
                          cache=None, mode=mode) as client:
            yield client


def mcp_stdio(store: str | Path, principal: str | None = None,
              engine_factory: str | None = HASH_ENGINE) -> Any:
    """The parameters that start ``memory-core mcp`` on ``store`` as a subprocess (stdio)."""
    from mcp.client.stdio import StdioServerParameters

    argv = ["-m", "memory_core.cli", "mcp", "--store", str(store)]
    if principal is not None:
        argv += ["--principal", principal]
    if engine_factory is not None:
        argv += ["--engine-factory", engine_factory]
    return StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT),
                                 env={**os.environ, "OMP_NUM_THREADS": "1"})
