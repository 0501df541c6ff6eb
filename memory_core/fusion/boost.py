"""Conversation-aware re-scoring of a fused list: session evidence, named speakers, the
person the question is in and replies to pooled questions.

Signals that a single memory cannot carry alone, added after fusion over the same pool
(nothing is added to or removed from the list; only the order changes):

    s'(d)      = s(d) / s_max        the fused score, scaled by the top one (to (0, 1] when > 0)
    boosted(d) = s'(d) + w_session * max{ s'(e) : e in the pool, session(e) = session(d) }
                       + w_speaker * [the query names speaker(d)]
                       + w_person  * [role(d) = the role the query's grammatical person names]
                       + w_reply   * max{ s'(q) : q in the pool, d is the reply to question q }

- *Session evidence* (hierarchical retrieval): a turn of a session whose best turn matches the
  question well is more likely to hold the evidence than an equally scored turn of an
  unrelated session. A memory without a session is its own session (its term is its own
  score), so it is never pushed below what it scored itself.
- *Speaker*: in a conversation memory the question usually names the person it is about
  ("What did Caroline research?"), and that person's own turns are the likely evidence. A
  speaker is named when every word of its name appears among the query's words (case-folded).
- *Person*: in a memory of a user's chat with an assistant, the question's grammatical person
  says whose words hold the answer: "What did **you** recommend?" asks for the assistant's
  turns, "Where did **I** park?" and "Can **you** suggest a hotel for **my** trip?" for the
  user's own (:func:`memory_core.fusion.person.addressed_role`). A memory's role is
  ``metadata[role_key]``, else the one its position gives it in a session read as a chat with
  an assistant (:mod:`memory_core.fusion.chat`: the turns at alternate positions differ
  widely in length); other memories, and questions in the third person, get nothing (a
  conversation between named people, as in LoCoMo, is left as it is).
- *Reply*: a turn that asks something ("How did you two meet?") is often what the question
  matches, while the evidence is the next turn, which answers it ("It happened at yoga in the
  park.") and shares no word with the question. The turn right after a pooled turn holding a
  "?" in the same session is its reply (``reply_of``: question id -> reply id) and also
  scores by the question's scaled score, unless the two are turns of a chat with an assistant
  (a role on each, written or read from the session's shape): there a question is a request
  and the turn after it a long, generic answer that, lifted, pushes the user's own words that
  hold the evidence down. A reply outside the pool stays outside it (adding
  replies that no channel found did not raise LoCoMo's candidate recall@50, measured offline
  on the receipts' fused lists), and when no question and its reply are both pooled nothing
  moves.

Ties are broken by the fused rank, so with every weight 0 the order is the fused order.

References: hierarchical (session-then-turn) retrieval in LongMemEval (Wu et al., ICLR 2025,
section 5: "session decomposition" and round-level keys); score propagation from passages to
their document, e.g. MaxP/FirstP aggregation (Dai & Callan, SIGIR 2019).

Example:
    >>> from memory_core.types import Candidate, Channel
    >>> fused = [Candidate("a", 0.04, 1, Channel.FUSED), Candidate("b", 0.03, 2, Channel.FUSED),
    ...          Candidate("c", 0.02, 3, Channel.FUSED)]
    >>> out = boost(fused, {"a": "s1", "b": "s2", "c": "s1"}, {"c": "Caroline"},
    ...             "What did Caroline say?", session_weight=0.5, speaker_weight=0.2)
    >>> [(c.memory_id, round(c.score, 3)) for c in out]   # c: 0.5 + 0.5 * 1.0 + 0.2
    [('a', 1.5), ('c', 1.2), ('b', 1.125)]
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_core.config import FusionSpec
from memory_core.fusion.chat import chat_roles
from memory_core.fusion.person import addressed_role
from memory_core.store import StoreBackend, memory_id_of, rowid_of
from memory_core.trace import ConversationTerms
from memory_core.types import Candidate, frozen_map

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_words(query: str) -> frozenset[str]:
    """The query's words, case-folded (what a speaker name is matched against)."""
    return frozenset(_WORD.findall(query.casefold()))


def names_speaker(words: frozenset[str], speaker: str | None) -> bool:
    """Whether every word of ``speaker`` is among ``words`` (an empty name never matches)."""
    if not speaker:
        return False
    parts = _WORD.findall(speaker.casefold())
    return bool(parts) and all(p in words for p in parts)


def boost(fused: Sequence[Candidate], session_of: Mapping[str, Hashable | None],
          speaker_of: Mapping[str, str | None], query: str, *, session_weight: float,
          speaker_weight: float, person_weight: float = 0.0,
          role_of: Mapping[str, str | None] | None = None,
          addressed: str | None = None, reply_weight: float = 0.0,
          reply_of: Mapping[str, str] | None = None,
          terms: dict[str, dict[str, float]] | None = None,
          decided: dict[str, str] | None = None) -> list[Candidate]:
    """The fused list re-scored by session evidence, named speakers and the question's person
    (module docstring).

    ``session_of`` / ``speaker_of`` / ``role_of`` map memory ids to their session, speaker
    and role (absent or None: none); ``addressed`` is the role the question asks for
    (:func:`memory_core.fusion.person.addressed_role`; None: no person term); ``reply_of`` maps a
    question turn's id to the id of the turn that replies to it. Returns a new list, ranks
    renumbered from 1; the input is not changed. With ``terms`` (a dict), each memory that a
    term lifted gets ``terms[id] = {term: amount added}`` (``session`` / ``speaker`` /
    ``person`` / ``reply``; the session term counts only what its session's best turn adds
    above the memory's own score), so a receipt can say why a memory rose. With ``decided``
    (a dict), each term gets ``"applied"`` or why it moved nothing.
    """
    # the person term only where some memory has the addressed role: otherwise nothing moves
    # (not even the scale of the scores)
    person = person_weight if addressed is not None and role_of is not None \
        and addressed in role_of.values() else 0.0
    # the reply term only where some question and its reply are both pooled (else, as for the
    # person term, nothing moves, not even the scale of the scores)
    pooled = {c.memory_id for c in fused}
    pairs = [(q, r) for q, r in (reply_of or {}).items() if q in pooled and r in pooled]
    reply = reply_weight if pairs else 0.0
    if decided is not None:
        decided.update(_decisions(session_weight, speaker_weight, person_weight, person,
                                  addressed, reply_weight, reply))
    if not fused or (session_weight == 0 and speaker_weight == 0 and person == 0
                     and reply == 0):
        return list(fused)
    top = max(c.score for c in fused)
    scale = top if top > 0 else 1.0
    scaled = {c.memory_id: c.score / scale for c in fused}
    best: dict[Hashable, float] = {}
    for c in fused:
        session = session_of.get(c.memory_id)
        if session is not None:
            best[session] = max(best.get(session, float("-inf")), scaled[c.memory_id])
    asked: dict[str, float] = {}  # reply id -> the best scaled score of a question it answers
    for q, r in pairs:
        asked[r] = max(asked.get(r, float("-inf")), scaled[q])
    words = query_words(query) if speaker_weight else frozenset()
    scores: dict[str, float] = {}
    for c in fused:
        own = scaled[c.memory_id]
        session = session_of.get(c.memory_id)
        in_session = best[session] if session is not None else own
        added = {"session": session_weight * (in_session - own),
                 "speaker": speaker_weight if speaker_weight and names_speaker(
                     words, speaker_of.get(c.memory_id)) else 0.0,
                 "person": person if person and role_of is not None
                 and role_of.get(c.memory_id) == addressed else 0.0,
                 "reply": reply * asked[c.memory_id] if reply and c.memory_id in asked
                 else 0.0}
        # the same sum, in the same order, as the module docstring's formula
        scores[c.memory_id] = (own + session_weight * in_session + added["speaker"]
                               + added["person"] + added["reply"])
        if terms is not None and (lifted := {k: v for k, v in added.items() if v != 0}):
            terms[c.memory_id] = lifted
    order = sorted(fused, key=lambda c: (-scores[c.memory_id], c.rank))
    return [c.moved(i + 1, scores[c.memory_id]) for i, c in enumerate(order)]


def _decisions(session_weight: float, speaker_weight: float, person_weight: float,
               person: float, addressed: str | None, reply_weight: float, reply: float
               ) -> dict[str, str]:
    """Each term's ``"applied"`` or why it moved nothing (:func:`boost`'s gates)."""
    off = "weight 0"
    return {"session": "applied" if session_weight else off,
            "speaker": "applied" if speaker_weight else off,
            "person": off if not person_weight else "applied" if person
            else _NO_PERSON if addressed is None
            else f"no pooled turn has the role {addressed!r}",
            "reply": off if not reply_weight else "applied" if reply else _NO_PAIR}


def boosted(store: StoreBackend, fs: FusionSpec, query: str, fused: list[Candidate],
            terms: dict[str, dict[str, float]] | None = None) -> list[Candidate]:
    """The fused list re-scored by session evidence, named speakers, the question's person and
    replies to pooled questions (:func:`boosted_terms`, without its record)."""
    return boosted_terms(store, fs, query, fused, terms)[0]


def boosted_terms(store: StoreBackend, fs: FusionSpec, query: str, fused: list[Candidate],
                  terms: dict[str, dict[str, float]] | None = None
                  ) -> tuple[list[Candidate], ConversationTerms | None]:
    """The fused list re-scored by session evidence, named speakers, the question's person and
    replies to pooled questions (``fusion.session_weight`` / ``speaker_weight`` /
    ``person_weight`` / ``reply_weight``; :mod:`memory_core.fusion.boost`), and the record of
    what each term did and why (None for an empty list). ``terms``, when given, receives what
    each term added to each lifted memory (:func:`boost`). ``store`` answers the turns'
    sessions, speakers, roles, replies and the sessions' shapes.

    A pooled turn without a ``metadata`` role in a session read as a chat with an assistant
    (:mod:`memory_core.fusion.chat`, ``fusion.chat_length_ratio``) takes the role its position
    gives it (``fusion.infer_roles``), and its questions' replies are not lifted: a role read
    from the turns counts as one written (the reply term's rule: only between turns without a
    chat role)."""
    if not fused:
        return fused, None
    addressed = (addressed_role(query, fs.asker_role, fs.agent_role) if fs.person_weight
                 else None)
    if fs.session_weight == 0 and fs.speaker_weight == 0 and addressed is None \
            and fs.reply_weight == 0:
        return fused, ConversationTerms(frozen_map(_decisions(
            0.0, 0.0, fs.person_weight, 0.0, None, 0.0, 0.0)))
    rowids = [r for c in fused if (r := rowid_of(c.memory_id))]
    session_of: dict[str, Any] = {}
    speaker_of: dict[str, str | None] = {}
    if fs.session_weight or fs.speaker_weight:
        attrs = store.turn_attributes(rowids, fs.speaker_key)
        space_of = {c.memory_id: c.space_id for c in fused}
        # sessions are named per space: the same session name in two spaces is two sessions
        session_of = {m: (space_of[m], a[0]) if a[0] is not None else None
                      for r, a in attrs.items() if (m := memory_id_of(r)) in space_of}
        speaker_of = {memory_id_of(r): a[1] for r, a in attrs.items()}
    role_of = ({memory_id_of(r): v for r, v in
                store.metadata_texts(rowids, fs.role_key).items()}
               if addressed is not None else None)
    reply_of = ({memory_id_of(q): memory_id_of(r)
                 for q, r in store.replies(rowids, fs.role_key).items()}
                if fs.reply_weight else None)
    pooled = {c.memory_id for c in fused}
    shape = ChatShape()
    needs_roles = role_of is not None and addressed not in role_of.values()
    if fs.chat_length_ratio and (needs_roles or any(q in pooled and r in pooled for q, r in
                                                    (reply_of or {}).items())):
        shape = chat_shape(store, fs, rowids)
        if role_of is not None and fs.infer_roles:
            read = {m: shape.roles[r] for m, role in role_of.items()
                    if role is None and (r := rowid_of(m)) in shape.roles}
            role_of = {**role_of, **read}
            shape.inferred = len(read)
        if reply_of:
            kept = {q: r for q, r in reply_of.items() if rowid_of(q) not in shape.roles}
            shape.left_out = sum(1 for q, r in reply_of.items()
                                 if q not in kept and q in pooled and r in pooled)
            reply_of = kept
    decided: dict[str, str] = {}
    out = boost(fused, session_of, speaker_of, query, session_weight=fs.session_weight,
                speaker_weight=fs.speaker_weight, person_weight=fs.person_weight,
                role_of=role_of, addressed=addressed, reply_weight=fs.reply_weight,
                reply_of=reply_of, terms=terms, decided=decided)
    if decided.get("reply") == _NO_PAIR and shape.left_out:
        decided["reply"] = (f"its {shape.left_out} pooled question-reply pair(s) are turns "
                            "of a chat with an assistant")
    return out, ConversationTerms(frozen_map(decided), shape.chats, shape.others,
                                  shape.inferred, shape.left_out)


_NO_PERSON = "the question names no one by its grammatical person"
_NO_PAIR = "no question and its reply are both pooled"


@dataclass
class ChatShape:
    """The pooled turns' sessions as :func:`chat_shape` read them."""

    roles: dict[int, str] = field(default_factory=dict)  # rowid -> role, turns of chats
    chats: int = 0
    others: int = 0
    inferred: int = 0
    left_out: int = 0


def chat_shape(store: StoreBackend, fs: FusionSpec, rowids: Sequence[int]) -> ChatShape:
    """Which sessions of the pooled turns ``rowids`` are chats with an assistant
    (:func:`memory_core.fusion.chat.chat_roles`) and the role each of their pooled turns'
    position gives it."""
    key_of, turns = store.session_lengths(rowids)
    out = ChatShape()
    for key, session in turns.items():
        roles = chat_roles(session, fs.chat_length_ratio, fs.asker_role, fs.agent_role)
        if roles is None:
            out.others += 1
            continue
        out.chats += 1
        out.roles.update((r, roles[r]) for r, k in key_of.items() if k == key)
    return out
