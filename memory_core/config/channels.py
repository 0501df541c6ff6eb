"""The channels' spec (``channels``): which candidate generators run and their pool depths
(:mod:`memory_core.channels`), the dense index kind (:class:`DenseIndexKind`) and where and
with which statistics BM25 is computed (:class:`KeywordIndex`, :class:`KeywordIdf`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from memory_core.config.choices import parse_choice


class DenseIndexKind(StrEnum):
    """``channels.dense_index``: which index a space gets (:mod:`memory_core.channels.dense`):
    faiss in the process, ``flat`` exact, ``hnsw`` approximate, ``auto`` flat below
    ``dense_ann_threshold`` memories and hnsw from there; or ``pgvector``, HNSW inside
    PostgreSQL (:mod:`memory_core.channels.dense_pg`), ``auto`` where the store has none."""

    AUTO = "auto"
    FLAT = "flat"
    HNSW = "hnsw"
    PGVECTOR = "pgvector"


class KeywordIndex(StrEnum):
    """``channels.keyword_index``: where BM25 is computed (:mod:`memory_core.channels.keyword`):
    ``fts5`` in SQLite, ``postings`` from in-memory postings of the read's spaces (the same
    scores), ``auto`` postings once the store holds ``keyword_index_threshold`` memories."""

    AUTO = "auto"
    FTS5 = "fts5"
    POSTINGS = "postings"


class KeywordIdf(StrEnum):
    """``channels.keyword_idf``: BM25's IDF from the whole store's counts (``store``, FTS5's
    own) or from the searched space's (``space``, smoothed toward the store-wide rate)."""

    STORE = "store"
    SPACE = "space"


@dataclass(frozen=True)
class ChannelsSpec:
    """Candidate generators and their pool depths (independent of ``limit``)."""

    dense: bool = True
    keyword: bool = True
    dense_pool: int = 50
    # a learned linear map on the retrieval query vector only (stored vectors unchanged):
    # None (off), a .npz path or "packaged:<name>" (memory_core/adapters/); a read-time setting,
    # so a store is reusable with or without it. See memory_core/channels/query_adapter.py; off by
    # default (measured: memory_core/adapters/README.md)
    query_adapter: str | None = None
    keyword_pool: int = 50
    # temporal: eligible memories whose event time (fallback: timestamp) falls in the window the
    # query names, ranked by cosine similarity; no window named, no list (it removes nothing)
    temporal: bool = True
    temporal_pool: int = 50
    # graph: from the top ``graph_seeds`` fused hits to eligible memories sharing an entity,
    # ``graph_depth`` hops, scored by the summed IDF of the shared entities; skipped under as_of
    graph: bool = True
    graph_pool: int = 50
    graph_seeds: int = 5
    graph_depth: int = 1
    # hub entities (held by more than max(graph_hub_floor, graph_max_share * N) memories of the
    # space, e.g. a conversation's speakers) are not followed
    graph_max_share: float = 0.05
    graph_hub_floor: int = 2
    # the graph list's ranks start after this many places (expansion ranks below its seeds)
    graph_rank_offset: int = 0
    # entity: structured read of the hybrid tier: eligible memories holding an entity the query
    # names (write-time entities, matched by entity key), scored by summed IDF; they join the
    # fusion as candidates, never as answers on their own (off by default: see the tiers
    # experiment, conf/experiment/tiers.yaml)
    entity: bool = False
    entity_pool: int = 50
    # keep each space's vector index in <store>/vectors between runs (a checked cache of the
    # embeddings SQLite holds; off: rebuilt from SQLite on a space's first use, nothing stored
    # twice). See memory_core/channels/dense.py and memory_core/index_files.py.
    dense_persist: bool = False
    # dense index kind (memory_core/channels/dense.py): "flat" exact, "hnsw" approximate, "auto"
    # flat below dense_ann_threshold memories in a space and hnsw from there (threshold and
    # hnsw settings from benchmarks/scale.py); a filtered search whose eligible share is under
    # dense_ann_exact_share is exact over the hnsw's own vectors. "pgvector": HNSW inside
    # PostgreSQL with the same m / ef settings (channels/dense_pg.py; faiss "auto" on a store
    # without pgvector); not the default: it ranks unlike SQLite (docs/recorded_figures_archive.md)
    dense_index: DenseIndexKind = DenseIndexKind.AUTO
    dense_ann_threshold: int = 50_000
    dense_hnsw_m: int = 32
    dense_hnsw_ef_construction: int = 64
    dense_hnsw_ef_search: int = 128
    dense_ann_exact_share: float = 0.02
    # recency: only when a request sends query_timestamp (the seed's rule: it ranks whenever
    # it is sent), the top ``recency_pool`` fused candidates re-listed by time proximity to
    # that instant, 2 ** (-gap_days / half_life), and fused again with weight
    # fusion.weights["recency"] (channels/recency.py); it adds and removes nothing, and a
    # request without query_timestamp is served exactly as with this off. Strength (weight 0.2,
    # half-life 90 days) chosen on LongMemEval oracle outside S (data=longmemeval_pooled; 0.1 /
    # 0.2 / 0.4 x 7 / 30 / 90 / 365 days; docs/recorded_figures_archive.md "Fusion that keeps a hit
    # apart from a miss")
    recency: bool = True
    recency_pool: int = 50
    recency_half_life_days: float = 90.0
    # keyword: BM25 weight of a turn's neighbour turns (the ``memories_ctx`` full-text table,
    # see memory_core/store/turns.py) beside its own text (weight 1); 0 = own text only
    # (0.4: best of 0 / 0.2 / 0.4 on LongMemEval oracle and an S subset;
    # docs/recorded_figures_archive.md "First stage on conversation turns")
    keyword_context_weight: float = 0.4
    # keyword: drop query words held by more than this share of the space's memories (BM25's
    # statistics are store-wide; a word common in one space, e.g. its speakers' names, is
    # rare across spaces); None = keep every word
    keyword_space_df_max: float | None = None
    # keyword: BM25's IDF from the whole store's counts (FTS5's own, "store") or from the
    # searched space's ("space", channels/keyword.py space_idf_scores), the space's counts
    # smoothed with keyword_idf_prior_rows pseudo-rows at the store-wide rate. "space" with 50
    # rows: ties "store" on LongMemEval (oracle, S-60), where 50 beat 0 and 200 on the oracle's
    # small spaces; it is the IDF of the collection searched (docs/recorded_figures_archive.md)
    keyword_idf: KeywordIdf = KeywordIdf.SPACE
    keyword_idf_prior_rows: float = 50.0
    # keyword: BM25's collection statistics (N, average length, each word's document count:
    # the prior's rate above) from this JSON file (channels/keyword_corpus.py) instead of from
    # whatever spaces the store holds; needs keyword_index auto/postings and no
    # keyword_space_df_max. A sharded run hands each unit the data set's (experiments/shard.py)
    keyword_corpus: str | None = None
    # keyword: where BM25 is computed (channels/keyword.py): "fts5" in SQLite, "postings" from
    # in-memory postings of the searched spaces (store/postings.py; the same scores), "auto"
    # postings once the store holds keyword_index_threshold memories (FTS5 scores every
    # matching row of the store). benchmarks/scale.py on its synthetic sentences, keyword
    # alone, p50 FTS5 / postings: 100 0.20 / 0.13 ms, 300 0.28 / 0.22, 1k 0.45 / 0.18,
    # 3k 0.92 / 0.20 (2026-12-05), 10k 6.9 / 1.0, 100k 68 / 1.9, 1M 541 / 9.7: the postings
    # at every size, so 0 (it was 1,000 until 2026-12-05)
    keyword_index: KeywordIndex = KeywordIndex.AUTO
    keyword_index_threshold: int = 0
    # a write brings the written space's postings up to date with its own rows (where the
    # space's reads use postings, with the keyword channel on), so the first read after a write
    # burst pays no build: measured on LongMemEval S haystacks (benchmarks/floor_haystacks.py,
    # issue 37). Off: built on the space's first search, as before; the scores are the same
    keyword_index_on_write: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "dense_index", parse_choice(DenseIndexKind, self.dense_index,
                                                             "channels.dense_index"))
        w = self.keyword_context_weight
        if not (isinstance(w, (int, float)) and 0.0 <= w <= 10.0):
            raise ValueError(f"channels.keyword_context_weight must be within [0, 10], got {w!r}")
        d = self.keyword_space_df_max
        if d is not None and not (isinstance(d, (int, float)) and 0.0 < d <= 1.0):
            raise ValueError(f"channels.keyword_space_df_max must be within (0, 1], got {d!r}")
        p = self.keyword_idf_prior_rows
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1e9):
            raise ValueError("channels.keyword_idf_prior_rows must be within [0, 1e9], "
                             f"got {p!r}")
        object.__setattr__(self, "keyword_index", parse_choice(
            KeywordIndex, self.keyword_index, "channels.keyword_index"))
        t = self.keyword_index_threshold
        if not (isinstance(t, int) and not isinstance(t, bool) and t >= 0):
            raise ValueError(f"channels.keyword_index_threshold must be an int >= 0, got {t!r}")
        object.__setattr__(self, "keyword_idf", parse_choice(KeywordIdf, self.keyword_idf,
                                                             "channels.keyword_idf"))
        if self.keyword_corpus is not None and (self.keyword_index == "fts5"
                                                or self.keyword_space_df_max is not None):
            raise ValueError("channels.keyword_corpus scores from the postings: it needs "
                             "keyword_index auto or postings and no keyword_space_df_max")
