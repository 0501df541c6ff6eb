"""``system=txtai``: txtai's hybrid index (dense + its BM25 scoring), one per space.

``txtai.Embeddings`` (NeuML txtai, Apache-2.0) with ``hybrid: true``: a faiss vector index
(``backend``) and txtai's own term index scored by BM25 (``scoring``), combined by txtai's
convex fusion of the normalised scores. The vectors are the run's embedder's (MiniLM through
memory_core's on-disk cache: txtai's ``method: external`` with the embedder as its
``transform``), so the model and its vectors are the same as every other system's and
nothing is embedded twice; txtai itself would load the same weights through
sentence-transformers. ``hybrid: false`` is txtai's dense search alone.

    >>> import numpy as np
    >>> class Toy:
    ...     dim = 2
    ...     def embed(self, texts):
    ...         v = np.array([[t.count("pay"), t.count("call")] for t in texts], np.float32) + 1e-3
    ...         return v / np.linalg.norm(v, axis=1, keepdims=True)
    ...     def identity(self): return {"model": "toy"}
    >>> s = Txtai(TxtaiSpec(), Toy())
    >>> s.index("n", [Item("m1", "pay pay"), Item("m2", "call the on-call lead")])
    >>> [h.key for h in s.search("n", Query("q", "who is on call?"), 2)]
    ['m2', 'm1']
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.systems.base import Hit, Item, Query, require
from experiments.systems.dense import embed_all, normalised
from memory_core.embed import Embedder


@dataclass(frozen=True)
class TxtaiSpec:
    """``system=txtai`` (``conf/system/txtai.yaml``): txtai's index settings."""

    name: str = "txtai"
    hybrid: bool = True      # dense + BM25 term scoring (false: dense alone)
    backend: str = "faiss"   # txtai's ANN backend (faiss chooses Flat or IVF by size itself)
    scoring: str = "bm25"    # txtai's term scoring method when hybrid
    batch: int = 256


class Txtai:
    """One ``txtai.Embeddings`` per space (module docstring)."""

    name = "txtai"

    def __init__(self, spec: TxtaiSpec, embedder: Embedder):
        self.spec, self.embedder = spec, embedder
        self._txtai = require("txtai", "txtai")
        self._indexes: dict[str, Any] = {}

    def _config(self) -> dict[str, Any]:
        embedder, batch = self.embedder, self.spec.batch

        def transform(texts: Sequence[str]):  # a plain function: txtai does not bind methods
            return normalised(embed_all(embedder, list(texts), batch))

        config: dict[str, Any] = {"method": "external", "transform": transform,
                                  "content": False, "backend": self.spec.backend}
        if self.spec.hybrid:
            config.update(hybrid=True, scoring={"method": self.spec.scoring, "terms": True,
                                                "normalize": True})
        return config

    def index(self, space: str, items: Sequence[Item]) -> None:
        embeddings = self._txtai.Embeddings(self._config())
        if items:
            embeddings.index([(i.key, i.content, None) for i in items])
        self._indexes[space] = embeddings

    def search(self, space: str, query: Query, k: int) -> list[Hit]:
        embeddings = self._indexes[space]
        if not embeddings.count():
            return []
        return [Hit(str(key), float(score)) for key, score in embeddings.search(query.text, k)]

    def save(self, directory: Path) -> None:
        for n, (space, embeddings) in enumerate(self._indexes.items()):
            where = directory / f"space{n:05d}"
            if embeddings.count():
                embeddings.save(str(where))
                (where / "space.json").write_text(json.dumps({"space": space}))

    def identity(self) -> Mapping[str, Any]:
        import importlib.metadata as md

        return {"system": "txtai", "library": {"txtai": md.version("txtai"),
                                               "faiss-cpu": md.version("faiss-cpu")},
                "embedder": dict(self.embedder.identity()), "settings": asdict(self.spec),
                "vectors": "method external: the run's embedder through memory_core's cache"}

    def close(self) -> None:
        for embeddings in self._indexes.values():
            embeddings.close()
        self._indexes.clear()
