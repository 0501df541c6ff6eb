"""``system=dense``: the embedder and an exact faiss inner-product index, nothing else.

Each item's content is embedded by the run's embedder (the ``embed`` group: all-MiniLM-L6-v2
from the wheel, through memory_core's on-disk embedding cache, so a vector memory_core
computed is read, never computed twice); vectors are L2-normalised, so the inner product is
the cosine. One ``faiss.IndexFlatIP`` per space; a question is embedded the same way and
the ``k`` nearest items are returned, score = cosine.

memory_core's ``channels=dense_only`` ranks by the same cosine over the same vectors; what
can still differ is named in docs/workbench.md, "Systems" (its dense index above 50,000
memories is HNSW, its query adapter when configured, its dedup of near duplicates and its
``prefer_observations``).

    >>> import numpy as np
    >>> class Toy:  # a two-word embedder
    ...     dim = 2
    ...     def embed(self, texts):
    ...         v = np.array([[t.count("pay"), t.count("call")] for t in texts], np.float32) + 1e-3
    ...         return v / np.linalg.norm(v, axis=1, keepdims=True)
    ...     def identity(self): return {"model": "toy"}
    >>> s = Dense(DenseSpec(), Toy())
    >>> s.index("n", [Item("m1", "pay pay"), Item("m2", "call")])
    >>> [h.key for h in s.search("n", Query("q", "on call?"), 2)]
    ['m2', 'm1']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.systems.base import Hit, Item, Query
from memory_core.embed import Embedder


@dataclass(frozen=True)
class DenseSpec:
    """``system=dense`` (``conf/system/dense.yaml``)."""

    name: str = "dense"
    batch: int = 256  # texts embedded per call while indexing


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), float32, contiguous."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.where(norms == 0, 1, norms))


def embed_all(embedder: Embedder, texts: Sequence[str], batch: int) -> np.ndarray:
    """``texts`` embedded ``batch`` at a time (the cache answers what it holds)."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate([embedder.embed(list(texts[i:i + batch]))
                           for i in range(0, len(texts), batch)])


class Dense:
    """One exact inner-product faiss index per space (module docstring)."""

    name = "dense"

    def __init__(self, spec: DenseSpec, embedder: Embedder):
        import faiss

        self.spec, self.embedder, self._faiss = spec, embedder, faiss
        self._indexes: dict[str, tuple[Any, list[str]]] = {}

    def index(self, space: str, items: Sequence[Item]) -> None:
        vectors = normalised(embed_all(self.embedder, [i.content for i in items],
                                       self.spec.batch))
        index = self._faiss.IndexFlatIP(self.embedder.dim)
        index.add(vectors)
        self._indexes[space] = (index, [i.key for i in items])

    def search(self, space: str, query: Query, k: int) -> list[Hit]:
        index, keys = self._indexes[space]
        if not keys:
            return []
        vec = normalised(self.embedder.embed([query.text]))
        scores, rows = index.search(vec, min(k, len(keys)))
        return [Hit(keys[int(r)], float(s)) for r, s in zip(rows[0], scores[0], strict=True)
                if r >= 0]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for n, (space, (index, keys)) in enumerate(self._indexes.items()):
            self._faiss.write_index(index, str(directory / f"space{n:05d}.faiss"))
            (directory / f"space{n:05d}.keys.json").write_text(
                json.dumps({"space": space, "keys": keys}))

    def identity(self) -> Mapping[str, Any]:
        import importlib.metadata as md

        return {"system": "dense", "library": {"faiss-cpu": md.version("faiss-cpu"),
                                               "sentence-transformers":
                                                   md.version("sentence-transformers")},
                "embedder": dict(self.embedder.identity()), "index": "faiss.IndexFlatIP",
                "settings": asdict(self.spec)}

    def close(self) -> None:
        self._indexes.clear()
