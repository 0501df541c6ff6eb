"""Observations derived from a speaker's own turns, without an LLM: a training source for data
that ships none.

LoCoMo ships LLM-written observations: one short third-person sentence restating a turn
("Caroline attended an LGBTQ support group recently ..."), stored beside the turn with the
turn as its source. The stacked model learns what an observation standing in for its source
turn looks like (``memory_core.dedup.prefer_observations``) only from its training sources,
and none of them (the synthetic world's notes join two or three facts; LongMemEval has no
observations) has notes of that shape. This module writes them for a dataset of first-person
turns, by rule:

- a share ``share`` of the facts is chosen by a seeded shuffle, **never by label** (a note on a
  gold turn is as likely as on any other), so "has an observation" cannot stand in for
  relevance; the assistant's turns are never chosen (their "I" is not the user);
- from a chosen turn, the first ``max_sentences`` (default 1: an observation is one sentence)
  declarative sentences that speak in the first person (``I``, ``my``, ``me``, ...; questions
  are skipped) are kept, each cut at ``max_words``;
- the first person is rewritten into the third (``I'm`` -> ``the user is``, ``my`` ->
  ``the user's``, ``me`` -> ``them``), with ``subject`` naming the speaker; the role prefix
  the LongMemEval loader puts on a turn (``"user: "``) is removed;
- the note is an ``observation`` with the turn as its only source, in the turn's space and
  session, with its timestamp. A turn with no such sentence gets none.

Example:
    >>> from experiments.data.schema import Dataset, MemoryDef, SpaceDef
    >>> turn = MemoryDef("s:1", "s", "user: I'm moving to Lyon next month. Any tips?")
    >>> ds = Dataset("d", (SpaceDef("s", "one user"),), (turn,), ())
    >>> derive_observations(ds, share=1.0).memories[1].content
    'The user is moving to Lyon next month.'
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence

from experiments.data.schema import Dataset, MemoryDef

_ROLE_PREFIX = re.compile(r"^\s*(user|assistant)\s*:\s*", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself)\b", re.IGNORECASE)
# longest forms first; the subject stands for "I" (a capital I only: "i.e." stays)
_REWRITES: Sequence[tuple[str, str, int]] = (
    (r"\bI'm\b|\bI am\b", "{s} is", 0),
    (r"\bI've\b|\bI have\b", "{s} has", 0),
    (r"\bI'd\b", "{s} would", 0),
    (r"\bI'll\b", "{s} will", 0),
    (r"\bI was\b", "{s} was", 0),
    (r"\bI don't\b|\bI do not\b", "{s} does not", 0),
    (r"\bI\b", "{s}", 0),
    (r"\bmyself\b", "themselves", re.IGNORECASE),
    (r"\bmine\b", "{p}", re.IGNORECASE),
    (r"\bmy\b", "{p}", re.IGNORECASE),
    (r"\bme\b", "them", re.IGNORECASE),
)
# "the user want" -> "the user wants": a present-tense verb right after the subject
_THIRD_PERSON_VERB = re.compile(
    r"\b(want|need|love|like|think|feel|hope|plan|know|prefer|enjoy|live|work|use|"
    r"remember|wonder|believe|mean|guess|own|play|run|find|get|go|do|try|watch|see|read|"
    r"cook|visit|start|keep|take|make)\b")
_ES = {"go": "goes", "do": "does", "try": "tries", "watch": "watches"}


def third_person(sentence: str, subject: str = "the user") -> str:
    """``sentence`` with its first person rewritten about ``subject`` (capitalised first)."""
    out = sentence.strip()
    for pattern, repl, flags in _REWRITES:
        out = re.sub(pattern, repl.format(s=subject, p=f"{subject}'s"), out, flags=flags)
    # agreement: "<subject> want" -> "<subject> wants" (also after "really", "also", ...)
    out = re.sub(rf"(\b{re.escape(subject)} (?:(?:really|also|just|usually|often|still|"
                 rf"always|never) )?){_THIRD_PERSON_VERB.pattern}",
                 lambda m: m.group(1) + _ES.get(m.group(2), m.group(2) + "s"), out,
                 flags=re.IGNORECASE)
    return out[:1].upper() + out[1:]


def observation_text(content: str, *, subject: str = "the user", max_sentences: int = 1,
                     max_words: int = 30) -> str | None:
    """The note for one turn, or None when it has no first-person statement."""
    text = _ROLE_PREFIX.sub("", content)
    kept = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        if not sentence or sentence.endswith("?") or not _FIRST_PERSON.search(sentence):
            continue
        words = sentence.split()
        if len(words) > max_words:
            sentence = " ".join(words[:max_words]).rstrip(",;:") + "."
        elif sentence[-1] not in ".!":
            sentence += "."
        kept.append(third_person(sentence, subject))
        if len(kept) == max_sentences:
            break
    return " ".join(kept) or None


def derive_observations(dataset: Dataset, share: float, *, seed: int = 0,
                        subject: str = "the user", max_sentences: int = 1,
                        max_words: int = 30,
                        skip_roles: tuple[str, ...] = ("assistant", "system")) -> Dataset:
    """``dataset`` plus one derived observation for each chosen fact (see the module doc).

    Facts whose ``metadata["role"]`` is in ``skip_roles`` are never chosen (their "I" is not
    the ``subject``): ``share`` is of the other facts. Keys are ``f"{fact_key}#obs"``; the
    dataset's ``info`` records ``derived_observations`` (how many were written, from how many
    chosen facts)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"derived observation share must be in [0, 1], got {share}")
    if share == 0.0:
        return dataset
    facts = sorted((m for m in dataset.memories if m.memory_type == "fact"
                    and (m.metadata or {}).get("role") not in skip_roles),
                   key=lambda m: m.key)
    random.Random(f"{seed}:{dataset.name}:observations").shuffle(facts)
    chosen = facts[: round(share * len(facts))]
    notes = []
    for fact in sorted(chosen, key=lambda m: m.key):
        text = observation_text(fact.content, subject=subject, max_sentences=max_sentences,
                                max_words=max_words)
        if text is None:
            continue
        notes.append(MemoryDef(
            key=f"{fact.key}#obs", space_id=fact.space_id, content=text,
            timestamp=fact.timestamp, memory_type="observation", source_keys=(fact.key,),
            session_id=fact.session_id, user_id=fact.user_id,
            metadata={"derived_from": fact.key}))
    info = {**dict(dataset.info),
            "derived_observations": {"written": len(notes), "chosen": len(chosen),
                                     "facts": len(facts), "share": share, "seed": seed}}
    return dataclasses.replace(dataset, memories=(*dataset.memories, *notes), info=info)
