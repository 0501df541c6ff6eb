"""Shared fixtures. Offline model use only; caches go to a per-session temp dir."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class HashEmbedder:
    """A deterministic bag-of-words embedder for logic tests that need no model.

    Each lowercase word is hashed to one of ``dim`` buckets; rows are L2-normalised.
    """

    dim = 64

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts):
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def identity(self):
        return {"model": "hash-bow-64", "weights_sha256": "none"}


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    path = tmp_path_factory.mktemp("mc-cache")
    old = os.environ.get("MEMORY_CORE_CACHE")
    os.environ["MEMORY_CORE_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("MEMORY_CORE_CACHE", None)
    else:
        os.environ["MEMORY_CORE_CACHE"] = old


@pytest.fixture
def hash_embedder():
    return HashEmbedder()


@pytest.fixture
def engine(hash_embedder):
    """An in-memory engine on the hash embedder (no model)."""
    from memory_core import MemoryEngine

    eng = MemoryEngine.open(":memory:", embedder=hash_embedder)
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def minilm():
    """The packaged MiniLM, loaded once per session (cached embeddings on disk)."""
    from memory_core.config import EmbedSpec
    from memory_core.embed import build_embedder

    return build_embedder(EmbedSpec())


@pytest.fixture(scope="session", autouse=True)
def _tiny_reranker_recipe():
    """Accurate mode in tests uses the ``tiny`` cross-encoder (conf/rerank/recipe/tiny.yaml):
    ``rerank.trained`` reads ``MEMORY_CORE_RERANKER``, and a run that needs the model trains it
    once, in seconds, into the session's cache. Nothing is trained unless a test needs it."""
    old = os.environ.get("MEMORY_CORE_RERANKER")
    os.environ["MEMORY_CORE_RERANKER"] = "tiny"
    yield "tiny"
    if old is None:
        os.environ.pop("MEMORY_CORE_RERANKER", None)
    else:
        os.environ["MEMORY_CORE_RERANKER"] = old


# -- PostgreSQL (issue 35): one real server per session, a fresh database per test ------------
class PgServer:
    """A PostgreSQL 16 server started by ``pgserver`` (as a non-root child, in a temporary
    directory) for the whole session; :meth:`fresh_database` hands each test its own."""

    def __init__(self, server):
        self.server = server
        self.uri = server.get_uri()  # postgresql://postgres:@/postgres?host=DIR
        self._n = 0

    def fresh_database(self) -> str:
        import psycopg

        self._n += 1
        name = f"mc_test_{os.getpid()}_{self._n}"
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.uri.replace("@/postgres?", f"@/{name}?")

    def drop_database(self, uri: str) -> None:
        import psycopg

        name = uri.split("@/", 1)[1].split("?", 1)[0]
        with psycopg.connect(self.uri, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_server():
    """The session's PostgreSQL. Without the ``postgres`` extra the PostgreSQL tests are
    skipped, except in CI (``CI`` set), where a missing install is a failure."""
    import tempfile
    import warnings

    with warnings.catch_warnings():  # platformdirs: no XDG_RUNTIME_DIR on CI machines
        warnings.simplefilter("ignore")
        try:
            import pgserver
            import psycopg  # noqa: F401
        except ImportError as exc:
            if os.environ.get("CI"):
                raise
            pytest.skip(f"PostgreSQL tests need the postgres extra ({exc})")
        # under /tmp itself: the server runs as a non-root user, which must reach its directory
        server = pgserver.get_server(tempfile.mkdtemp(prefix="memory_core-pg-"),
                                     cleanup_mode="delete")
    yield PgServer(server)
    server.cleanup()


@pytest.fixture
def pg_uri(pg_server):
    """A fresh, empty database on the session's server (dropped after the test)."""
    uri = pg_server.fresh_database()
    yield uri
    pg_server.drop_database(uri)


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def store_location(request, tmp_path):
    """A store location on each backend: a directory, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "store")
    return request.getfixturevalue("pg_uri")


@pytest.fixture
def backend_engine(store_location, hash_embedder):
    """An engine on the hash embedder on each backend (``store_location``); a test module
    runs its ``engine`` tests on both with ``engine = backend_engine`` as its fixture."""
    from memory_core import MemoryEngine

    eng = MemoryEngine.open(store_location, embedder=hash_embedder)
    yield eng
    eng.close()


@pytest.fixture
def llm_server():
    """A scripted OpenAI-compatible chat server on 127.0.0.1 (tests/llm_server.py)."""
    from llm_server import ScriptedLLM

    with ScriptedLLM() as server:
        yield server
