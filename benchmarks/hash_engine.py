"""A model-free engine for service tests and the load benchmark.

``memory-core serve --store DIR --engine-factory benchmarks.hash_engine:open_engine`` serves a
store whose embedder hashes words into 64 buckets (no model load, ~µs per text), in fast mode by
default. Retrieval quality is meaningless with it; the HTTP layer, the engine's SQLite, FTS5,
faiss and fusion work are real, which is what a service test or a load test measures.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence

import numpy as np

from memory_core.config import EngineSpec
from memory_core.engine import MemoryEngine
from memory_core.types import Mode

DIM = 64
_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Each lowercase word is hashed (md5) to one of :data:`DIM` buckets; rows L2-normalised.

    Example:
        >>> v = HashEmbedder().embed(["pnpm over npm", ""])
        >>> v.shape, round(float(np.linalg.norm(v[0])), 6), float(v[1].sum())
        ((2, 64), 1.0, 0.0)
    """

    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def identity(self) -> dict[str, str]:
        return {"model": f"hash-bow-{DIM}", "weights_sha256": "none"}


class SlowHashEmbedder(HashEmbedder):
    """:class:`HashEmbedder` that also sleeps :data:`SLOW_EMBED_S` a text, releasing the GIL as
    a model's forward pass does: a 5,000-item write then embeds for over 5 s, long enough for a
    test to see whether reads wait behind it (``tests/service/test_http_concurrency.py``)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(SLOW_EMBED_S * len(texts))
        return super().embed(texts)


SLOW_EMBED_S = 0.001


class OverlapReranker:
    """A model-free cross-encoder stand-in: the share of query words (split on spaces) a text
    holds, so accurate mode runs without a model in tests.

    Example:
        >>> OverlapReranker().score("berlin flight", ["the berlin flight", "a locker"])
        [0.6666666666666666, 0.0]
    """

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        q = set(query.lower().split())
        return [len(q & set(t.lower().split())) / (1 + len(q)) for t in texts]

    def identity(self) -> dict[str, str]:
        return {"model": "overlap", "weights_sha256": "none"}


def open_engine(store: str) -> MemoryEngine:
    """The engine ``--engine-factory benchmarks.hash_engine:open_engine`` serves."""
    return MemoryEngine.open(store, spec=EngineSpec(default_mode=Mode.FAST),
                             embedder=HashEmbedder())


def open_slow_engine(store: str) -> MemoryEngine:
    """``--engine-factory benchmarks.hash_engine:open_slow_engine``: :func:`open_engine` with
    :class:`SlowHashEmbedder`."""
    return MemoryEngine.open(store, spec=EngineSpec(default_mode=Mode.FAST),
                             embedder=SlowHashEmbedder())
