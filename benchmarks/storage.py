"""``python -m benchmarks.storage``: bytes on disk per short memory.

A fresh store gets ``--n`` short memories (about 45 bytes of text each, one tag, the default
write path: entities, MinHash, dates) in one space through ``write_many``; the engine is
flushed and closed (SQLite checkpoints its WAL on close), then every file under the store
directory is summed. A seeded 384-dimensional stand-in embedder (MiniLM's width) keeps the run
model-free; the vector bytes are the same as with MiniLM.

Printed as JSON: ``bytes_per_memory``, the total and each file, and SQLite's per-table bytes
(``dbstat``) when the build offers it. To compare with an older checkout, run the same module
with ``PYTHONPATH`` pointing at it (it uses only the public engine API).

    python -m benchmarks.storage --n 5000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

DIM = 384


class StandInEmbedder:
    """Deterministic unit vectors seeded by each text's hash (no model)."""

    dim = DIM

    def embed(self, texts):
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def identity(self):
        return {"model": "stand-in-384", "weights_sha256": "none"}


def short_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct sentences of about 45 characters."""
    rng = random.Random(seed)
    people = ["Alice", "Bob", "Chen", "Dana", "Eve", "Farid", "Gita", "Hugo"]
    verbs = ["moved", "paid", "shipped", "fixed", "booked", "sent"]
    things = ["the invoice", "a refund", "the release", "the demo", "a ticket", "the report"]
    teams = ["billing", "growth", "mobile", "support"]
    return [f"{rng.choice(people)} {rng.choice(verbs)} {rng.choice(things)} for "
            f"{rng.choice(teams)} on day {i}." for i in range(n)]


def measure(n: int, root: Path) -> dict:
    from memory_core import MemoryEngine

    texts = short_texts(n)
    with MemoryEngine.open(root, embedder=StandInEmbedder()) as eng:
        eng.create_space("s")
        for i in range(0, n, 500):
            eng.write_many("s", [{"content": t, "tags": ["team:ops"]} for t in texts[i:i + 500]])
        eng.flush()
    files = {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
             if p.is_file()}
    total = sum(files.values())
    tables: dict[str, int] = {}
    try:
        conn = sqlite3.connect(root / "memory.sqlite")
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name "
                                       "ORDER BY 2 DESC"):
            tables[name] = int(size)
        conn.close()
    except sqlite3.Error:
        tables = {}
    return {"n": n, "mean_text_bytes": round(sum(len(t) for t in texts) / n, 1),
            "bytes_per_memory": round(total / n, 1), "total_bytes": total, "files": files,
            "sqlite_tables": tables}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(args.n, Path(tmp) / "store"), indent=1))


if __name__ == "__main__":
    main()
