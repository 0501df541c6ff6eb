"""``memory-core serve``: one uvicorn process serving one store (a directory, or a PostgreSQL
database named by a ``postgresql://`` URI, its API keys then in the database unless
``--keys FILE`` names a file).

    memory-core serve --store ./mem [--host 127.0.0.1] [--port 8080]
    memory-core serve --store postgresql://USER@HOST/DB --port 8081

One uvicorn worker a process; its engine serves requests side by side in worker threads
(:class:`memory_core.service.shared.Gate`). A store directory is served by one process: the
vector index lives in its memory. Several processes (on one machine or several) may serve one
PostgreSQL database: each keeps its own index and caches and catches them up with the
database's space versions, so a write acknowledged by one process is read by the next request
to any other (docs/engine.md, "PostgreSQL as the store"). ``--engine-factory
module:callable`` builds the engine from the store path instead of
:meth:`MemoryEngine.open` (tests and the load benchmark inject a model-free embedder this way).
On SIGINT/SIGTERM uvicorn drains the requests in flight, then the engine is closed (vector
index flushed).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from memory_core.engine import MemoryEngine
from memory_core.service.keys import KeyStore
from memory_core.store.uri import redact_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080

EngineFactory = Callable[[str], MemoryEngine]


def resolve_factory(spec: str | None) -> EngineFactory:
    """``"package.module:callable"`` -> the callable (None: ``MemoryEngine.open``)."""
    if spec is None:
        return MemoryEngine.open
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--engine-factory must be module:callable, got {spec!r}")
    factory = getattr(importlib.import_module(module), name, None)
    if not callable(factory):
        raise ValueError(f"--engine-factory {spec!r} does not name a callable")
    return cast(EngineFactory, factory)


def _log_to_stderr() -> None:
    """The service's loggers (access log, errors) print to stderr, one line each."""
    logger = logging.getLogger("memory_core.service")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def serve(store: str | Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          engine_factory: str | None = None, max_body_bytes: int | None = None,
          keys_file: str | Path | None = None, cache_mb: float | None = None) -> None:
    """Open the store and serve it until interrupted (API keys from ``keys_file``, else the
    store directory's keys file; ``cache_mb``: the process's ``store.cache_mb``)."""
    import uvicorn

    from memory_core.service.app import create_app
    from memory_core.service.shared import ServiceSettings

    keys = KeyStore.for_store(store, keys_file)
    if not keys.records():  # also fails now, not per request, on a damaged keys file
        print(f"warning: no API keys in {keys.path}; every request will be 401 until one is "
              f"created with: memory-core keys create --store {redact_url(str(store))} "
              f"{'' if keys_file is None else f'--keys {keys_file} '}--principal NAME",
              file=sys.stderr)
    settings = ServiceSettings() if max_body_bytes is None else ServiceSettings(max_body_bytes)
    _log_to_stderr()
    engine = resolve_factory(engine_factory)(str(store))
    if cache_mb is not None:  # before any read: the store's budget resized (store.cache_mb)
        engine.store.budget.resize(int(cache_mb * 2**20))
    try:
        app = create_app(engine, keys, settings)
        uvicorn.run(app, host=host, port=port, access_log=False, log_level="info",
                    workers=1, timeout_graceful_shutdown=10)
    finally:
        engine.close()
