"""Threads racing on one engine (issue 21): writers, readers and flushes together never index
a row twice, and a memory is found by its own words right after write + flush.
``MEMORY_CORE_RACE_RUNS`` sets the raced runs (CI: 2; the issue's figure: 20)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memory_core import MemoryEngine

sys.path.insert(0, str(Path(__file__).parent))
import crash_child

pytestmark = pytest.mark.reliability

RUNS = int(os.environ.get("MEMORY_CORE_RACE_RUNS", "2"))


@pytest.mark.parametrize("run", range(RUNS))
def test_threads_never_index_twice_and_always_read_after_flush(tmp_path, run):
    store = tmp_path / "store"
    eng = MemoryEngine.open(store, spec=crash_child.spec(), embedder=crash_child.HashEmbedder())
    eng.create_space("s")
    errors: list[BaseException] = []
    missed: list[str] = []
    duplicated: list[int] = []

    def writer(k: int) -> None:
        try:
            for i in range(20):
                items = [{"content": crash_child.text(f"r{run}w{k}", 10 * i + j)}
                         for j in range(1 + (i + k) % 5)]
                ids = eng.write_many("s", items)
                eng.flush()
                top = eng.retrieve(query=items[-1]["content"], space_id="s", channels="vector",
                                   limit=1, mode="fast")
                if not top.results or top.results[0].memory_id != ids[-1]:
                    missed.append(ids[-1])
        except BaseException as exc:  # noqa: BLE001 - collected, asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(40):
                res = eng.retrieve(query=f"memory topic {i % 7}", space_id="s",
                                   channels="vector", limit=50, mode="fast")
                ids = [r.memory_id for r in res.results]
                duplicated.append(len(ids) - len(set(ids)))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with ThreadPoolExecutor(max_workers=5) as pool:  # all five at once; exits when all end
        for k in range(3):
            pool.submit(writer, k)
        for _ in range(2):
            pool.submit(reader)
    assert errors == []
    assert missed == [] and sum(duplicated) == 0
    dense = eng._components.dense
    rows = set(eng.store.space_rowids("s").tolist())
    assert dense._indexes["s"].ntotal == len(rows) and dense._held["s"] == rows
    eng.close()
    with MemoryEngine.open(store, spec=crash_child.spec(),
                           embedder=crash_child.HashEmbedder()) as again:
        again.retrieve(query="memory", space_id="s", mode="fast")
        assert again._components.dense._indexes["s"].ntotal == len(rows)
        assert again._components.dense.rebuilt == []
