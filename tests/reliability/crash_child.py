"""A writer process for the crash and race checks (run by tests/reliability, killed with -9).

    python crash_child.py STORE MODE SEED [ROUNDS]

MODE ``write``: write_many batches back to back; ``flush``: each batch followed by flush();
``close``: each batch in its own open/write/close. After every acknowledged batch it prints
one line ``ACK <memory ids...>`` and flushes stdout, so the parent knows exactly which
memories were acknowledged before the kill. A model-free hash embedder keeps it fast.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

# run as a script (python crash_child.py ...) the repository root is not on sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.hash_engine import HashEmbedder  # the model-free embedder
from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec

__all__ = ["HashEmbedder", "spec", "text"]


def spec() -> EngineSpec:
    base = EngineSpec()
    return dataclasses.replace(base, channels=dataclasses.replace(base.channels,
                                                                  dense_persist=True))


def text(tag: str, i: int) -> str:
    return f"memory {tag} {i} token{tag}x{i} about topic {i % 7}"


def main() -> None:
    store, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 10_000
    rng = random.Random(seed)
    tag = f"p{seed}"
    eng = MemoryEngine.open(store, spec=spec(), embedder=HashEmbedder())
    for space in ("s", f"warm{seed}"):
        if not any(s.space_id == space for s in eng.store.list_spaces()):
            try:
                eng.create_space(space)
            except MemoryCoreError as exc:  # another process created it first
                if exc.reason != "space_exists":
                    raise
    # warm-up (lazy imports: dates, entities, MinHash) so the kill window covers real writes
    eng.write(f"warm{seed}", "warm-up on June 3, 2024 with Alice")
    print("READY", flush=True)
    n = 0
    for _ in range(rounds):
        size = rng.randint(1, 40)
        items = [{"content": text(tag, n + k)} for k in range(size)]
        ids = eng.write_many("s", items)
        n += size
        print("ACK " + " ".join(ids), flush=True)
        if mode in ("flush", "race"):
            eng.flush()
        if mode == "close":
            eng.close()
            eng = MemoryEngine.open(store, spec=spec(), embedder=HashEmbedder())
        if mode == "race":  # read-after-flush: the new memory is found by its own words
            probe = items[-1]["content"]
            top = eng.retrieve(query=probe, space_id="s", channels="vector", limit=1)
            got = top.results[0].memory_id if top.results else None
            print(("READ_OK " if got == ids[-1] else "READ_MISS ") + ids[-1], flush=True)
    eng.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
