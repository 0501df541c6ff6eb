"""``python -m benchmarks.hostile``: the cost of hostile input (issue 21, item 7).

Each case is one call on a store of ``--memories`` MiniLM-embedded memories carrying 10,000
distinct, deliberately similar tags (``topic:tag00000`` ...); its wall seconds and outcome
(``answered`` or the 422 reason) are printed as JSON, per mode (fast; accurate when a
cross-encoder is available: ``--reranker tiny``, the default, trains the small recipe once,
in seconds, into the cache). The
goal is every case under 1 s, answered or refused. Cases:

- ``query_16000_dates``: a query naming 16,000 dates (refused: ``max_query_chars``);
- ``query_max_legal_dates``: the longest legal query, all dates (about 660 mentions);
- ``write_4000_dates``: one write naming 4,000 dates;
- ``query_1mb`` / ``query_1mb_expand``: a 1 MB query, plain and with ``expand_query``;
- ``query_max_legal_expand``: the longest legal query with ``expand_query``;
- ``fuzzy_2x500``: the largest legal fuzzy filter (2 leaves x 500 names) against the
  10,000-tag space (the vocabulary is its 5,000 most used tags);
- ``content_too_long``: a 1 MB write (refused: ``max_content_chars``);
- ``query_max_legal``: the longest legal plain query, and ``baseline_short_query`` for scale
  (in accurate mode the cross-encoder's cost grows with the pair length up to its
  ``max_length`` of 256 tokens: a long legal query costs what a long document does).

Timing goals live here, never in unit tests.

    python -m benchmarks.hostile --reranker tiny
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.config import EngineSpec, LimitsSpec

MONTHS = ["January", "February", "March", "April", "June", "July", "August", "September",
          "October", "November", "December"]


def dates_text(n: int, rng: random.Random) -> str:
    return " ".join(f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.randint(1950, 2030)}"
                    for _ in range(n))


def build(root: Path, memories: int, reranker: str | None) -> MemoryEngine:
    spec = EngineSpec()
    if reranker is not None:  # train the named recipe once (seconds for "tiny"), then use it
        from experiments.train_reranker import ensure_trained

        spec = dataclasses.replace(spec, rerank=dataclasses.replace(spec.rerank,
                                                                    trained=reranker))
        ensure_trained(spec.rerank, data_dir=None, progress=False)
    eng = MemoryEngine.open(root, spec=spec)
    eng.create_space("s")
    per = 10_000 // memories
    items = [{"content": f"Note {i}: the team discussed release {i} and the budget.",
              "tags": [f"topic:tag{i * per + k:05d}" for k in range(per)]}
             for i in range(memories)]
    for i in range(0, memories, 50):
        eng.write_many("s", items[i:i + 50])
    return eng


def timed(fn) -> dict[str, object]:
    t0 = time.perf_counter()
    try:
        fn()
        outcome = "answered"
    except MemoryCoreError as exc:
        outcome = f"{exc.status} {exc.reason}"
    return {"seconds": round(time.perf_counter() - t0, 3), "outcome": outcome}


def cases(eng: MemoryEngine, mode: str, rng: random.Random) -> dict[str, dict[str, object]]:
    limits = LimitsSpec()
    legal_dates = dates_text(10_000, rng)[:limits.max_query_chars].rsplit(" ", 1)[0]
    big = ("where did the team discuss the budget " * 30_000)[:1_000_000]
    legal_long = big[:limits.max_query_chars]  # the longest legal query
    fuzzy = [{"tags": [f"topic:tagx{i:04d}" for i in range(500)], "resolve": "fuzzy"},
             {"tags": [f"topic:tga{i:05d}" for i in range(500)], "resolve": "fuzzy"}]
    ask = {"space_id": "s", "mode": mode}
    out = {
        "baseline_short_query": timed(lambda: eng.retrieve(query="who discussed the budget?",
                                                           **ask)),
        "query_16000_dates": timed(lambda: eng.retrieve(query=dates_text(16_000, rng), **ask)),
        "query_max_legal_dates": timed(lambda: eng.retrieve(query=legal_dates, **ask)),
        "query_1mb": timed(lambda: eng.retrieve(query=big, **ask)),
        "query_1mb_expand": timed(lambda: eng.retrieve(query=big, expand_query=True, **ask)),
        "query_max_legal_expand": timed(lambda: eng.retrieve(
            query=big.replace("budget", "budget and the release")[:limits.max_query_chars],
            expand_query=True, **ask)),
        "query_max_legal": timed(lambda: eng.retrieve(query=legal_long, **ask)),
        "fuzzy_2x500": timed(lambda: eng.retrieve(query="budget", tag_groups=fuzzy, **ask)),
    }
    if mode == "fast":  # writes do not depend on the mode
        out["write_4000_dates"] = timed(lambda: eng.write("s", dates_text(4_000, rng)))
        out["content_too_long"] = timed(lambda: eng.write("s", big))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reranker", default="tiny",
                        help="trained cross-encoder recipe for accurate mode ('' for none)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        eng = build(Path(tmp) / "store", args.memories, args.reranker or None)
        eng.retrieve(query="warm up the models", space_id="s", mode="fast")
        report: dict[str, object] = {"memories": args.memories,
                                     "distinct_tags": len(eng.store.tag_vocabulary(
                                         "s", 100_000)),
                                     "modes": sorted(m.value for m in eng.available_modes)}
        for mode in report["modes"]:  # type: ignore[union-attr]
            if mode == "accurate":
                eng.retrieve(query="warm up the reranker", space_id="s", mode="accurate")
            report[mode] = cases(eng, mode, rng)
        eng.close()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
