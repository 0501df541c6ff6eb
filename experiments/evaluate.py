"""One engine asked every question: what :func:`experiments.run.run_retrieval` does per store.

The per-question evaluation, shared by the in-process run and each unit of a sharded one
(:func:`experiments.units.evaluate_unit`): which questions can be scored (:func:`scorable`),
how many memories each asks for (:func:`retrieve_limit`), the untimed warm-up
(:func:`warm_up`) and the timed retrieves with their scores (:func:`evaluate`), one
:class:`~experiments.query_row.QueryRow` per question, mode and view.

Per query and mode/view the runner records ``eval.metrics`` on memory keys (turns), the
``eval.session_metrics`` on sessions as ``session_<metric>`` (ranked keys mapped to sessions with
:func:`experiments.metrics.to_sessions`, k counting unique sessions, as LongMemEval's
turn-to-session evaluation does), the recall@1..limit curve, and with ``eval.ragas`` the ragas
ID-based context recall/precision (:mod:`experiments.ragas_metrics`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Container
from typing import Any

from tqdm.auto import tqdm

from experiments import metrics as M
from experiments import plots, report
from experiments.common import percentile
from experiments.data.schema import Dataset, QueryDef
from experiments.ingest import IdMap
from experiments.query_row import QueryRow, Ranked
from experiments.scoring import score
from experiments.specs import EvalSpec
from memory_core import MemoryEngine
from memory_core.embed import CachedEmbedder

# Views of one run, headline first. ``raw_turns``: facts only (what users wrote; the figure
# comparable with other engines); ``with_observations``: the store as built, where a dataset's
# LLM-written observations (LoCoMo ships them) may answer for their source turns. A dataset
# without observations has only the second view (it is then the raw view).
log = logging.getLogger(__name__)

VIEWS = {
    "raw_turns": {"memory_types": ["fact"], "prefer_observations": False},
    "with_observations": {},
}


def pool_recall(engine: MemoryEngine, trace_id: str | None, space_id: str | None, q: QueryDef,
                ids: IdMap, ks: list[int]) -> dict[str, float | None]:
    """Candidate recall of the first stage: the share of the query's gold turns among the top
    ``k`` of the fused pool (after fusion and its boosts, before dedup, scoring and ``limit``;
    read from the trace, which must keep at least ``max(ks)`` rows: ``engine.trace.depth``).
    This is the ceiling of any reranker that scores that pool. ``pool_recall@k``."""
    if not ks:
        return {}
    if trace_id is None:
        raise ValueError("pool_recall needs the retrieve's trace (engine.trace on)")
    lists = engine.get_receipt(trace_id).trace.candidates.get(space_id) if space_id else None
    fused = [row.memory_id for row in lists.fused or ()] if lists is not None else []
    keys = ids.keys(m for m in fused if m in ids.key_of)
    got = score(keys, q.gold_keys, ids.sources, [f"recall@{k}" for k in ks])
    return {f"pool_{name}": value for name, value in got.items()}


def scorable(dataset: Dataset, ids: IdMap) -> tuple[list[QueryDef], Counter[str]]:
    """Queries that can be scored, and counts of the others by reason (never silently lost)."""
    return scorable_among(dataset, ids.id_of)


def scorable_among(dataset: Dataset, stored: Container[str]
                   ) -> tuple[list[QueryDef], Counter[str]]:
    """:func:`scorable` against the dataset keys ``stored`` (a sharded run decides before any
    store exists: every memory is written, so every key of the data set is stored)."""
    keep: list[QueryDef] = []
    skipped: Counter[str] = Counter()
    for q in dataset.queries:
        if q.gold_space is None:
            skipped["unanswerable"] += 1
        elif not q.gold_keys:
            skipped["no_gold"] += 1
        elif q.metadata.get("abstention"):
            skipped["abstention"] += 1
        elif any(k not in stored for k in q.gold_keys):
            skipped["gold_not_in_store"] += 1
        else:
            keep.append(q)
    return keep, skipped


def views_of(ev: EvalSpec, has_observations: bool) -> list[str]:
    """The views a run scores (:data:`VIEWS`, headline first): ``raw_turns`` only when the data
    set has observations and ``eval.raw_turns`` is on."""
    return [v for v in VIEWS if v == "with_observations" or (ev.raw_turns and has_observations)]


def session_names(ev: EvalSpec) -> list[str]:
    """Column names of the session-level metrics: ``session_<metric>``."""
    return [f"session_{m}" for m in ev.session_metrics]


def retrieve_limit(ev: EvalSpec, max_limit: int) -> int:
    """How many memories each query asks for: ``eval.limit``, else the deepest cut-off any
    metric needs (capped at the engine's ``max_limit``)."""
    if ev.limit:
        return min(int(ev.limit), max_limit)
    ks = list(ev.ks) + [k for m in [*ev.metrics, *ev.session_metrics]
                        if (k := M.parse_metric(m).k) is not None]
    return min(max(ks), max_limit)


def usable_modes(engine: MemoryEngine, ev: EvalSpec) -> tuple[list[str], dict[str, str]]:
    """The configured modes this engine can run, and the skipped ones with the reason.

    An unavailable mode is an error unless ``eval.skip_unavailable_modes`` (the ablation
    preset sets it, so ``[fast, accurate]`` runs before the cross-encoder exists); a skipped
    mode is written into ``metrics.json``, never dropped silently.
    """
    available = {m.value for m in engine.available_modes}
    modes = [m for m in ev.modes if m in available]
    why = {"accurate": f": {engine.rerank_unavailable}" if engine.rerank_unavailable else ""}
    skipped = {m: f"mode {m!r} is not available in this engine (available: "
                  f"{', '.join(sorted(available))}){why.get(m, '')}"
               for m in ev.modes if m not in available}
    if skipped and not ev.skip_unavailable_modes:
        raise ValueError("; ".join(skipped.values()) + " (set eval.skip_unavailable_modes=true "
                         "to skip it and record the skip)")
    if not modes:
        raise ValueError(f"none of eval.modes {list(ev.modes)} is available")
    return modes, skipped


def session_scores(keys: list[str], q: QueryDef, ids: IdMap,
                   names: list[str]) -> dict[str, float | None]:
    """Session-level metrics: returned memories -> what they retrieve (observations expanded)
    -> their sessions, unique in first-seen order, scored against ``q.gold_sessions``.
    ``None`` for a query without gold sessions (left out of the means, counted in ``n``)."""
    if not names:
        return {}
    if not q.gold_sessions:
        return {f"session_{n}": None for n in names}
    sessions = M.to_sessions(M.expand_ranked(keys, ids.sources), ids.session_of)
    return {f"session_{n}": M.parse_metric(n)(sessions, q.gold_sessions) for n in names}


EMBED_SAMPLE = 32
"""Distinct query texts whose embedding :func:`warm_up` times through the bare model."""


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 3)


def request_fields(q: QueryDef, ev: EvalSpec, limit: int) -> dict[str, Any]:
    """The fields :func:`evaluate` sends for ``q`` in every view (mode and view added): an
    addressed read of its space, or ``route="auto"`` for a routed question (a data set on disk
    whose question names no space: :mod:`experiments.data.jsonl`)."""
    when = ({"query_timestamp": q.query_timestamp}
            if ev.query_timestamp and q.query_timestamp else {})
    where = {"route": "auto"} if is_routed(q) else {"space_id": q.gold_space}
    return {"query": q.text, **where, "limit": limit, **when}


def is_routed(q: QueryDef) -> bool:
    """Whether ``q`` is asked with ``route="auto"`` (its data set names no space for it)."""
    return bool(q.metadata.get("routed"))


def warm_up(engine: MemoryEngine, queries: list[QueryDef], ev: EvalSpec,
            modes: list[str]) -> dict[str, Any]:
    """The untimed set-up :func:`evaluate` does before its first timed retrieve, so that no
    mode or view pays a first-use cost another one is spared; returns its record
    (``metrics.json`` ``latency``).

    - Every question's text is embedded once through the engine's embedder (one text a call,
      as a retrieve embeds it), so with the on-disk embedding cache (the default) every timed
      retrieve, in every mode and view, reads its query vector from the cache. Before, the
      first mode/view computed each query's embedding and the others read it: the first mode
      looked ~2-3x slower. ``query_embed_ms``: the bare model's time for one question (up to
      :data:`EMBED_SAMPLE` of them, after one call that loads it), which the timed figures
      leave out. Without a cache every timed call embeds its query (``query_embedding`` says
      which).
    - One retrieve per mode on the first question (receipt off, nothing stored): it loads
      the mode's models (the reranker or stacked scorer in accurate mode) and first-use
      state. ``first_retrieve_ms``: that call's time, model load included; it is in no
      table.
    """
    limit = retrieve_limit(ev, engine.spec.max_limit)
    embedder = engine.embedder
    bare = embedder.inner if isinstance(embedder, CachedEmbedder) else None  # the model
    texts = list(dict.fromkeys(q.text for q in queries))
    record: dict[str, Any] = {
        "measured": report.LATENCY_NOTE,
        "query_embedding": ("cached before timing (untimed)" if bare is not None
                            else "computed in each timed call (no embedding cache)"),
        "questions": len(texts),
    }
    if bare is not None and texts:
        bare.embed(texts[:1])  # loads the model, untimed
        sample = []
        for text in texts[:EMBED_SAMPLE]:
            t0 = time.perf_counter()
            bare.embed([text])
            sample.append(_ms(t0))
        record["query_embed_ms"] = {"p50": round(percentile(sample, 50), 3),
                                    "p95": round(percentile(sample, 95), 3), "n": len(sample)}
        for text in texts:
            embedder.embed([text])
    record["first_retrieve_ms"] = {}
    if queries:
        body = request_fields(queries[0], ev, limit)
        for mode in modes:
            t0 = time.perf_counter()
            engine.retrieve(**body, mode=mode, receipt=False)
            record["first_retrieve_ms"][mode] = _ms(t0)
    return record


def evaluate(engine: MemoryEngine, queries: list[QueryDef], ids: IdMap, ev: EvalSpec,
             has_observations: bool, modes: list[str] | None = None,
             timing: dict[str, Any] | None = None, progress: bool = False) -> list[QueryRow]:
    """Ask every query in every configured mode and view; one row per (query, mode, view).

    Each row's ``latency_ms`` is one retrieve timed after :func:`warm_up`; its record, and
    how many query embeddings were computed during the timed calls (``computed_while_timed``:
    0 with the embedding cache; ``None`` when the embedder counts none), go into ``timing``
    when given."""
    modes = modes if modes is not None else list(ev.modes)
    record = warm_up(engine, queries, ev, modes)
    embedder = engine.embedder
    misses = embedder.misses if isinstance(embedder, CachedEmbedder) else None
    metric_names = list(ev.metrics)
    sessions = [str(m) for m in ev.session_metrics]
    limit = retrieve_limit(ev, engine.spec.max_limit)
    ragas = None
    if ev.ragas:
        from experiments.ragas_metrics import RagasIdScorer

        ragas = RagasIdScorer(k=ev.ragas_cutoff)
    views = views_of(ev, has_observations)
    pool_ks = [int(k) for k in ev.pool_ks]
    shallow = [k for k in pool_ks if k > engine.spec.trace.depth]
    if shallow:  # run_experiment deepens the traces; a direct caller's engine may not have
        log.warning("pool_recall@%s not scored: the engine's traces keep %d candidates "
                    "(engine.trace.depth)", shallow, engine.spec.trace.depth)
        pool_ks = [k for k in pool_ks if k not in shallow]
    rows: list[QueryRow] = []
    for mode in modes:
        for view in views:
            for q in tqdm(queries, desc=f"{mode}/{view}", unit="q", disable=not progress):
                body = request_fields(q, ev, limit)
                t0 = time.perf_counter()
                resp = engine.retrieve(**body, mode=mode, receipt=ev.receipts, **VIEWS[view])
                latency = (time.perf_counter() - t0) * 1000
                ranked = tuple(Ranked(r.memory_id, ids.key_of[r.memory_id], r.relevance_score,
                                      r.memory_type) for r in resp.results)
                keys = [r.key for r in ranked]
                rows.append(QueryRow(
                    q.query_id, q.kind, q.category, q.conversation or q.gold_space, mode, view,
                    q.text, q.gold_space, tuple(q.gold_keys), ranked, latency, resp.receipt_id,
                    tuple(plots.recall_curve(keys, q.gold_keys, ids.sources, limit)), {
                        **score(keys, q.gold_keys, ids.sources, metric_names),
                        **session_scores(keys, q, ids, sessions),
                        **pool_recall(engine, resp.trace_id, q.gold_space, q, ids, pool_ks),
                        **(ragas.score(keys, q.gold_keys, ids.sources) if ragas else {})}))
    if timing is not None:
        timing.update(record, computed_while_timed=embedder.misses - misses
                      if isinstance(embedder, CachedEmbedder) and misses is not None else None)
    return rows


def reported_metrics(ev: EvalSpec) -> list[str]:
    """Every per-query metric column the summary aggregates, in report order."""
    names = [*ev.metrics, *[f"pool_recall@{k}" for k in ev.pool_ks], *session_names(ev)]
    if ev.ragas:
        from experiments.ragas_metrics import column_names

        names += column_names(ev.ragas_cutoff)
    return [str(n) for n in names]


def headline_groups(ev: EvalSpec) -> dict[str, list[str]]:
    """Named groups of query kinds reported first (``eval.headline``: name -> kinds)."""
    return {str(k): [str(v) for v in kinds] for k, kinds in (ev.headline or {}).items()}
