"""Features of one (query, candidate) pair for the stacked relevance scorer.

Everything here is computed from what the pipeline already holds after fusion: each channel's
raw score and rank (``Candidate.channel_scores`` / ``channel_ranks``), the fused score and
position, the candidate memories themselves and the query's time window. No second embedding
pass, no model: a pool of 50 candidates costs a few milliseconds.

The list of features is *data*: the channel features are generated from
:class:`~memory_core.types.Channel` (every channel but ``fused`` and ``escalated``), so a new
channel adds its columns here by itself and a retrain (one command,
``python -m experiments.train_reranker``) is all a first-stage change needs. The model file
stores the names it was trained with; :func:`check_names` refuses a model whose names differ.

Per channel ``ch`` (absent from the channel = ``NaN``, a missing value, never zero):

- ``ch_score``: the raw channel score (cosine, BM25, summed entity IDF, ...);
- ``ch_rank``: the 1-based rank in that channel's list;
- ``ch_gap``: ``max(ch_score over the pool) - ch_score`` (per-query normalisation: a cosine
  of 0.4 means little on its own, 0.05 below the pool's best means a lot);
- ``ch_z``: ``(ch_score - mean) / std`` over the pooled candidates the channel returned (how
  far the candidate stands out of this query's spread; ``NaN`` below two such candidates or
  without spread);
- ``ch_lead``: ``ch_score - max(ch_score of the other pooled candidates)``: the channel's
  leader gets its lead over the runner-up (a clear winner vs a near tie), every other
  candidate ``-ch_gap`` (``NaN`` below two scored candidates).

Per candidate (``q`` = the query's content words, ``d`` = the memory's, see
:func:`content_words`; ``idf(t) = ln((N + 1) / (df(t) + 0.5))`` over the ``N`` pooled texts):

- ``fused_score``, ``fused_rank``, ``fused_ratio = fused_score / best fused score``;
- ``n_channels``: how many channels returned the memory; ``min_rank``: its best rank over
  the channels (rank agreement: 1 when some channel puts it first);
- ``term_coverage = |q ∩ d| / |q|`` and ``idf_mass = Σ_{t ∈ q ∩ d} idf(t) / Σ_{t ∈ q} idf(t)``
  (``NaN`` when the query has no content word); ``coverage_gap`` / ``idf_gap``: the pool's
  best ``term_coverage`` / ``idf_mass`` minus the candidate's (does another candidate match
  the query's words better?);
- ``bigram_share``: share of the query's adjacent word pairs found adjacent in the memory;
- ``entity_overlap``: share of the query's entities (:func:`~memory_core.entities.extract_entities`)
  among the memory's entities or its speaker (``NaN`` when the query names none);
- ``speaker_named``: 1 when the query names the memory's speaker (``metadata["speaker"]``, or
  the ``"name: "`` prefix of a conversation turn), 0 when not, ``NaN`` without a speaker;
- ``in_window``: 1 when the memory's event time (fallback: timestamp) falls in the query's time
  window, 0 when not, ``NaN`` when the query names no time;
- ``is_observation``, ``log_chars = ln(1 + len(content))``;
- ``age_days``: how many days older the memory is than the newest pooled memory (its age
  relative to "now" minus the pool's smallest age; the difference form is what transfers
  between datasets whose "now", ``query_timestamp`` or the clock, differs by years);
- ``neighbour_fused`` / ``neighbour_dense``: the best fused score / dense cosine of the pooled
  memories right before and after it in the same session (write order), ``NaN`` when neither is
  in the pool (a turn that answers the previous turn's question inherits its evidence);
- ``person_match``: 1 when the memory's role (``metadata[fusion.role_key]``, else the one its
  position gives it in a session read as a chat, :mod:`memory_core.fusion.chat`) is the one the
  question's grammatical person asks for (:func:`memory_core.fusion.person.addressed_role`:
  what "you" said before -> the assistant's turns, "I/my" -> the user's), 0 when it is the
  other role, ``NaN`` for a third-person question or a memory without a role.

Example:
    >>> from memory_core.types import Candidate, Channel, frozen_map
    >>> c = Candidate("mem_1", 0.03, 1, Channel.FUSED, frozen_map({"dense": 1}), None,
    ...               frozen_map({"dense": 0.71}))
    >>> row = dict(zip(FEATURE_NAMES, channel_row(c, {"dense": 0.8})))
    >>> row["dense_score"], row["dense_rank"], round(row["dense_gap"], 2)
    (0.71, 1.0, 0.09)
    >>> import math; math.isnan(row["keyword_score"])
    True
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memory_core import times
from memory_core.channels.keyword import STOPWORDS
from memory_core.config import FusionSpec
from memory_core.entities import extract_entities
from memory_core.fusion.person import addressed_role
from memory_core.types import Candidate, Channel, Memory, MemoryType

NAN = float("nan")
# the channels whose evidence a candidate carries (fused/escalated are list labels, not evidence)
SCORED_CHANNELS: tuple[Channel, ...] = tuple(
    c for c in Channel if c not in (Channel.FUSED, Channel.ESCALATED))
_EVIDENCE = frozenset(c.value for c in SCORED_CHANNELS)
CHANNEL_PARTS = ("score", "rank", "gap", "z", "lead")
CHANNEL_FEATURES: tuple[str, ...] = tuple(
    f"{c.value}_{part}" for c in SCORED_CHANNELS for part in CHANNEL_PARTS)
CANDIDATE_FEATURES: tuple[str, ...] = (
    "fused_score", "fused_rank", "fused_ratio", "n_channels", "min_rank", "term_coverage",
    "idf_mass", "coverage_gap", "idf_gap", "bigram_share", "entity_overlap", "speaker_named",
    "in_window", "is_observation", "log_chars", "age_days", "neighbour_fused", "neighbour_dense",
    "person_match")
# the optional cross-encoder score (a model trained with it needs a cross-encoder to run)
CROSS_ENCODER_FEATURE = "cross_encoder"
FEATURE_NAMES: tuple[str, ...] = CHANNEL_FEATURES + CANDIDATE_FEATURES

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SPEAKER = re.compile(r"^([A-Z][\w.' -]{0,40}):\s")
SECONDS_PER_DAY = 86400.0


def feature_names(cross_encoder: bool = False) -> tuple[str, ...]:
    """The columns of a feature matrix, in order (``cross_encoder`` appends its score).

    Example:
        >>> feature_names()[:3]
        ('dense_score', 'dense_rank', 'dense_gap')
        >>> feature_names(cross_encoder=True)[-1]
        'cross_encoder'
    """
    return FEATURE_NAMES + ((CROSS_ENCODER_FEATURE,) if cross_encoder else ())


class FeatureMismatch(ValueError):
    """A model was trained on other feature columns than this code computes."""


def check_names(trained: Sequence[str]) -> bool:
    """Whether ``trained`` is this code's feature list (returns True when it has the
    cross-encoder column); raises :class:`FeatureMismatch` naming the difference otherwise."""
    trained = tuple(trained)
    for with_ce in (False, True):
        if trained == feature_names(with_ce):
            return with_ce
    want = feature_names(CROSS_ENCODER_FEATURE in trained)
    missing = [n for n in want if n not in trained]
    extra = [n for n in trained if n not in want]
    raise FeatureMismatch(f"the model's features differ from the code's: missing {missing}, "
                          f"unknown {extra}" + ("" if missing or extra else " (order)")
                          + "; retrain with `python -m experiments.train_reranker`")


def content_words(text: str) -> list[str]:
    """Lower-cased words without stop words, each with a plural ``s`` stripped.

    Example:
        >>> content_words("Where are Alice's new offices?")
        ['alice', 'new', 'office']
    """
    return list(_content_words(text))


# longer texts are split each time: the cache holds at most ~90 MB (a few MB of short turns)
KEPT_TEXT_CHARS = 1000


def _content_words(text: str) -> tuple[str, ...]:
    """:func:`content_words` as a tuple, kept per text up to :data:`KEPT_TEXT_CHARS`: a
    memory's words are read again by every query whose pool it joins."""
    return _kept_words(text) if len(text) <= KEPT_TEXT_CHARS else _split_words(text)


@functools.lru_cache(maxsize=8192)
def _kept_words(text: str) -> tuple[str, ...]:
    return _split_words(text)


def _split_words(text: str) -> tuple[str, ...]:
    out = []
    for w in _WORD.findall(text.lower()):
        if w in STOPWORDS or (len(w) < 2 and not w.isdigit()):
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return tuple(out)


def _bigrams(words: Sequence[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(words, words[1:], strict=False)}


def speaker_of(memory: Memory) -> str | None:
    """The speaker of a conversation turn: ``metadata["speaker"]``, else a ``"Name: "``
    prefix of the content (``user:``/``assistant:`` roles are not names)."""
    name = memory.metadata.get("speaker") if memory.metadata else None
    if isinstance(name, str) and name.strip():
        return name.strip()
    m = _SPEAKER.match(memory.content)
    if m and m.group(1).lower() not in ("user", "assistant", "system"):
        return m.group(1).strip()
    return None


@dataclass(frozen=True)
class QueryContext:
    """What every candidate of one query shares: the query's words, entities, window, now,
    and the role its grammatical person asks for (``addressed``, read from ``role_key``, else
    from ``roles``)."""

    words: tuple[str, ...]
    bigrams: frozenset[tuple[str, str]]
    entities: frozenset[str]
    window: times.Window | None
    now: datetime
    addressed: str | None = None
    role_key: str = "role"
    # rowid -> role, for pooled turns without one in sessions read as chats with an assistant
    # (memory_core/fusion/chat.py; the rerank stage fills it)
    roles: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of(cls, query: str, now: datetime, window: times.Window | None,
           fusion: FusionSpec | None = None) -> QueryContext:
        """``fusion`` names the roles (``role_key``, ``asker_role``, ``agent_role``; the
        defaults when None)."""
        fs = fusion or FusionSpec()
        words = tuple(dict.fromkeys(content_words(query)))
        return cls(words, frozenset(_bigrams(content_words(query))),
                   frozenset(e.lower() for e in extract_entities(query)), window, now,
                   addressed_role(query, fs.asker_role, fs.agent_role), fs.role_key)


def channel_row(c: Candidate, best: Mapping[str, float]) -> list[float]:
    """The channel columns of one candidate; ``best`` = each channel's best score in the pool.

    ``ch_z`` and ``ch_lead`` need the whole pool: they are ``NaN`` here and filled in by
    :func:`extract` (:func:`pool_columns`)."""
    row: list[float] = []
    for ch in SCORED_CHANNELS:
        score = c.channel_scores.get(ch.value)
        rank = c.channel_ranks.get(ch.value)
        row.append(NAN if score is None else float(score))
        row.append(NAN if rank is None else float(rank))
        row.append(NAN if score is None else float(best[ch.value]) - float(score))
        row += [NAN, NAN]
    return row


def pool_columns(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(z, lead)`` of one channel's scores over a pool (``NaN`` = not returned by it).

    Example:
        >>> z, lead = pool_columns(np.array([0.8, 0.6, np.nan, 0.4]))
        >>> [round(float(v), 3) for v in z[[0, 1, 3]]], math.isnan(z[2])
        ([1.225, 0.0, -1.225], True)
        >>> [round(float(v), 3) for v in lead[[0, 1, 3]]]
        [0.2, -0.2, -0.4]
    """
    z = np.full(scores.shape, NAN)
    lead = np.full(scores.shape, NAN)
    ok = ~np.isnan(scores)
    if ok.sum() < 2:
        return z, lead
    v = scores[ok]
    std = float(v.std())
    if std > 0:
        z[ok] = (v - float(v.mean())) / std
    top2 = np.sort(v)[-2:]
    lead[ok] = np.where(v >= top2[1], v - top2[0], v - top2[1])
    return z, lead


def _instant(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return times.parse_instant(value, "timestamp")
    except Exception:  # a stored value this reader cannot parse is a missing feature value
        return None


def _in_window(m: Memory, window: times.Window | None) -> float:
    if window is None:
        return NAN
    start = _instant(m.occurred_start) or _instant(m.timestamp)
    end = _instant(m.occurred_end) or start
    if start is None or end is None:
        return NAN
    return 1.0 if start <= window.end and end >= window.start else 0.0


def _person_match(m: Memory, query: QueryContext) -> float:
    if query.addressed is None:
        return NAN
    role = m.metadata.get(query.role_key) if m.metadata else None
    if not isinstance(role, str):  # else the one its turn's position gives it in a chat
        role = query.roles.get(m.rowid)
    return NAN if role is None else float(role == query.addressed)


def extract(query: QueryContext, pool: Sequence[Candidate],
            memories: Mapping[str, Memory]) -> np.ndarray:
    """The feature matrix of ``pool`` (one row per candidate, :data:`FEATURE_NAMES` columns).

    ``memories`` maps memory id -> :class:`Memory` for every pooled candidate.
    """
    n = len(pool)
    out = np.full((n, len(FEATURE_NAMES)), NAN, dtype=np.float64)
    if n == 0:
        return out
    best: dict[str, float] = {}
    for c in pool:
        for name, s in c.channel_scores.items():
            best[name] = max(best.get(name, -math.inf), float(s))
    words = [_content_words(memories[c.memory_id].content) for c in pool]
    df: dict[str, int] = {}
    for ws in words:
        for t in set(ws):
            df[t] = df.get(t, 0) + 1
    idf = {t: math.log((n + 1) / (df.get(t, 0) + 0.5)) for t in query.words}
    idf_total = sum(idf.values())
    top_fused = max((float(c.score) for c in pool), default=0.0)
    # neighbours: the pooled turns right before/after in the same session (write order)
    by_session: dict[tuple[str | None, str], list[tuple[int, int]]] = {}
    for i, c in enumerate(pool):
        m = memories[c.memory_id]
        if m.session_id:
            by_session.setdefault((m.space_id, m.session_id), []).append((m.rowid, i))
    stamps = [_instant(memories[c.memory_id].timestamp) for c in pool]
    newest = max((t for t in stamps if t is not None), default=None)
    neighbours: dict[int, list[int]] = {}
    for rows in by_session.values():
        at = dict(rows)
        for rowid, i in rows:
            neighbours[i] = [at[r] for r in (rowid - 1, rowid + 1) if r in at]
    for i, c in enumerate(pool):
        m = memories[c.memory_id]
        ws = words[i]
        wset = set(ws)
        matched = [t for t in query.words if t in wset]
        speaker = speaker_of(m)
        ents = {e.lower() for e in m.entities} | ({speaker.lower()} if speaker else set())
        ts = stamps[i]
        near = neighbours.get(i, [])
        row = channel_row(c, best) + [
            float(c.score), float(c.rank),
            float(c.score) / top_fused if top_fused > 0 else NAN,
            float(len(c.channel_scores)),
            min((float(r) for ch, r in c.channel_ranks.items() if ch in _EVIDENCE), default=NAN),
            len(matched) / len(query.words) if query.words else NAN,
            sum(idf[t] for t in matched) / idf_total if idf_total > 0 else NAN,
            NAN, NAN,  # coverage_gap, idf_gap: below, once the pool's best is known
            (len(query.bigrams & _bigrams(ws)) / len(query.bigrams)) if query.bigrams else NAN,
            (len(query.entities & ents) / len(query.entities)) if query.entities else NAN,
            NAN if speaker is None else float(speaker.lower() in query.entities
                                              or speaker.lower() in query.words),
            _in_window(m, query.window),
            float(m.memory_type is MemoryType.OBSERVATION),
            math.log1p(len(m.content)),
            NAN if ts is None or newest is None
            else (newest - ts).total_seconds() / SECONDS_PER_DAY,
            max((float(pool[j].score) for j in near), default=NAN),
            max((float(pool[j].channel_scores[Channel.DENSE.value]) for j in near
                 if Channel.DENSE.value in pool[j].channel_scores), default=NAN),
            _person_match(m, query),
        ]
        out[i] = row
    col = {name: j for j, name in enumerate(FEATURE_NAMES)}
    for ch in SCORED_CHANNELS:
        z, lead = pool_columns(out[:, col[f"{ch.value}_score"]])
        out[:, col[f"{ch.value}_z"]] = z
        out[:, col[f"{ch.value}_lead"]] = lead
    for src, dst in (("term_coverage", "coverage_gap"), ("idf_mass", "idf_gap")):
        v = out[:, col[src]]
        if not np.isnan(v).all():
            out[:, col[dst]] = np.nanmax(v) - v
    return out
