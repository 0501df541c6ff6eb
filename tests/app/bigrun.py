"""A LoCoMo-sized experiment run, generated cheaply for the dashboard's browser test.

A real LoCoMo fast-mode run (1,986 questions over 10 conversations, ~5,900 turns and their
observations) takes minutes and needs the data directory; this builds a run directory of the
same shape and size in seconds: ``metrics.json`` (the config of a real run, so the app opens
the store with real settings), ``per_query.parquet`` (one row per question) and ``store/``
with 10 conversation spaces, facts carrying dataset keys, observations built from them, and
one receipt per question written through the store's receipt API.

Each receipt is what a fast-mode retrieve at ``limit=10`` leaves: dense and keyword lists
(50 rows each), the fused list (RRF over the two, ``FUSED_POOL`` candidates), near-duplicate
and ``prefer_observations`` drops (with the score and rank they had), the page of 10 with
position scores, and the rest as ``limit`` drops (position 0.0 beyond the page). Seeded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl

from experiments.report import aggregate
from memory_core import MemoryEngine
from memory_core.rerank.identity import rank_scores
from memory_core.receipts import KeptEntry, Receipt
from memory_core.types import Drop, DropReason, frozen_map

CONVERSATIONS = 10
FACTS_PER_CONVERSATION = 60
OBSERVATIONS_PER_CONVERSATION = 6
QUESTIONS = 1600
LIMIT = 10
FUSED_POOL = 60
CHANNEL_DEPTH = 50
RRF_K = 60
METRICS = ["recall@1", "recall@5", "recall@10", "mrr"]
WORDS = ("Caroline Melanie painting camping adoption support group pottery beach museum "
         "festival guitar violin concert hiking lake mountains workshop marathon sunrise "
         "garden book club counselling charity bakery recipe kids school trip family").split()


def _sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def build(run_dir: Path, config: dict[str, Any], seed: int = 0) -> Path:
    """Write the run into ``run_dir`` (``config``: a real run's resolved config)."""
    rng = random.Random(seed)
    store_dir = run_dir / "store"
    facts: dict[str, list[tuple[str, str]]] = {}      # space -> [(memory id, key)]
    notes: dict[str, dict[str, str]] = {}             # space -> {fact id: note id}
    with MemoryEngine.open(store_dir) as eng:
        for c in range(CONVERSATIONS):
            space = f"conv-{c}"
            eng.create_space(space, description=f"LoCoMo-sized conversation {c}")
            items = [{"content": _sentence(rng), "timestamp": f"2023-05-{1 + i % 28:02d}T10:00:00Z",
                      "tags": [f"session:{1 + i // 20}", f"speaker:{rng.choice(WORDS[:2])}"],
                      "metadata": {"key": f"D{c}:{i}"}}
                     for i in range(FACTS_PER_CONVERSATION)]
            ids = eng.write_many(space, items)
            facts[space] = [(mid, f"D{c}:{i}") for i, mid in enumerate(ids)]
            notes[space] = {}
            for j in range(OBSERVATIONS_PER_CONVERSATION):
                sources = [ids[3 * j], ids[3 * j + 1]]
                note = eng.observe(space, "Observation: " + _sentence(rng, 10), sources)
                for s in sources:
                    notes[space][s] = note
        rows = [_question(eng, rng, q, facts, notes) for q in range(QUESTIONS)]
    pq = pl.DataFrame(rows)
    pq.write_parquet(run_dir / "per_query.parquet")
    summary = aggregate(rows, METRICS, n_resamples=200, seed=seed,
                        groups={"cat1-4": ["1", "2", "3", "4"]})
    meta = {"task_name": "locomo_sized", "config": config,
            "dataset": {"name": "locomo-sized (generated)", "sha256": {"generated.json": "0" * 64}},
            "models": {"embedder": {"model": "generated"}},
            "denominators": {"queries": QUESTIONS, "scored": QUESTIONS},
            "headline": {"cat1-4": ["1", "2", "3", "4"]}, "metrics": summary, "notes": []}
    (run_dir / "metrics.json").write_text(json.dumps(meta, indent=2, default=str))
    return run_dir


def _question(eng: MemoryEngine, rng: random.Random, q: int,
              facts: dict[str, list[tuple[str, str]]], notes: dict[str, dict[str, str]]
              ) -> dict[str, Any]:
    space = f"conv-{q % CONVERSATIONS}"
    pool = facts[space]
    key_of = dict(pool)
    gold_pairs = rng.sample(pool, rng.choice((1, 1, 2, 3)))
    gold = [k for _, k in gold_pairs]
    order = rng.sample(pool, FUSED_POOL)
    if rng.random() < 0.6:  # most questions find a gold turn near the top
        first = gold_pairs[0]
        order = [p for p in order if p != first]
        order.insert(rng.randrange(0, 8), first)
    dense = order[:CHANNEL_DEPTH]
    keyword = rng.sample(order, CHANNEL_DEPTH)
    d_rank = {m: i for i, (m, _) in enumerate(dense, start=1)}
    k_rank = {m: i for i, (m, _) in enumerate(keyword, start=1)}
    fused = sorted(((m, sum(1.0 / (RRF_K + r[m]) for r in (d_rank, k_rank) if m in r))
                    for m, _ in order), key=lambda t: (-t[1], t[0]))
    drops: list[Drop] = []
    survivors: list[tuple[str, float, int]] = []
    placed: set[str] = set()
    for rank, (m, score) in enumerate(fused, start=1):
        if rank in (7, 19):  # two near-duplicates of the candidate just above
            drops.append(Drop(m, DropReason.DEDUP, "dedup", score, rank,
                              f"near_duplicate_of:{fused[rank - 2][0]}", space))
            continue
        note = notes[space].get(m)
        if note is not None:
            drops.append(Drop(m, DropReason.DEDUP, "prefer_observations", score, rank,
                              f"replaced_by_observation:{note}", space))
            if note in placed:
                continue
            m = note
        placed.add(m)
        survivors.append((m, score, rank))
    positions = rank_scores(len(survivors), LIMIT)
    kept: list[KeptEntry] = []
    for i, ((m, _, _), pos) in enumerate(zip(survivors, positions, strict=True), start=1):
        ranks = {c: r[m] for c, r in (("dense", d_rank), ("keyword", k_rank)) if m in r}
        if i <= LIMIT:
            kept.append(KeptEntry(m, space, i, pos, frozen_map(ranks)))
        else:
            drops.append(Drop(m, DropReason.LIMIT, "limit", pos, i, f"limit={LIMIT}", space))
    rid = f"rcpt_big_{q:05d}"
    text = f"Question {q}: what did they say about {rng.choice(WORDS)}?"
    stages = {"tier": "hybrid", "returned": [k.memory_id for k in kept],
              "channels": {space: {"dense": len(dense), "keyword": len(keyword),
                                   "fused": len(fused)}},
              "candidates": {space: {
                  "dense": [[m, round(0.9 - 0.01 * i, 6), i + 1] for i, (m, _) in enumerate(dense)],
                  "keyword": [[m, round(12.0 - 0.2 * i, 6), i + 1]
                              for i, (m, _) in enumerate(keyword)],
                  "fused": [[m, round(s, 6), i + 1] for i, (m, s) in enumerate(fused[:50])]}}}
    eng.store.save_receipt(Receipt(
        rid, "2026-01-01T00:00:00Z", frozen_map({"query": text, "space_id": space,
                                                   "limit": LIMIT, "mode": "fast",
                                                   "channels": "hybrid", "receipt": True}),
        tuple(kept), tuple(drops), None, frozen_map(stages)))
    ranked_ids = [k.memory_id for k in kept]
    ranked_keys = [key_of.get(m, m) for m in ranked_ids]
    hits = [k in gold for k in ranked_keys]
    curve = [sum(hits[:k]) / len(gold) for k in range(1, LIMIT + 1)]
    first = next((i for i, h in enumerate(hits, start=1) if h), None)
    category = str(1 + q % 5)
    return {"query_id": f"q{q:05d}", "kind": category, "category": category,
            "conversation": space, "mode": "fast", "view": "raw_turns", "text": text,
            "space_id": space, "gold_keys": gold, "ranked_keys": ranked_keys,
            "ranked_ids": ranked_ids, "scores": [k.score for k in kept],
            "receipt_id": rid, "latency_ms": round(rng.uniform(8.0, 40.0), 3),
            "recall@1": curve[0], "recall@5": curve[4],
            "recall@10": curve[9], "mrr": 1.0 / first if first else 0.0,
            "recall_curve": curve}
