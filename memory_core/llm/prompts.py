"""The fixed, versioned prompts: the one that asks a response model to answer from a numbered
block, and the reading of the memories its answer cites; and the one that asks it which profile
group a written memory belongs to (:data:`PROFILE_PROMPT_VERSION`, :func:`read_group`).

The block is :func:`memory_core.context.render_block`'s numbered text (``1. ...``); the model
is asked to cite the lines it used as ``[n]``, and :func:`cited` maps those numbers back to
memory ids. A change of wording is a new :data:`ANSWER_PROMPT_VERSION`: cached replies are keyed
by the exact messages, so old replies are never served for a new prompt.

Example:
    >>> cited("Alice works at Globex [2], since 2024 [2][3].", ["m1", "m2", "m3"])
    ['m2', 'm3']
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ANSWER_PROMPT_VERSION = "answer-v1"
ANSWER_SYSTEM = (
    "You answer a question about a user from their stored memories. Use only the numbered "
    "memories you are given. Cite every memory your answer relies on by its number in square "
    "brackets, e.g. [2]. If the memories do not contain the answer, reply exactly: "
    "not mentioned. Answer in one or two short sentences.")
NOT_MENTIONED = "not mentioned"
_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def answer_messages(question: str, block: str) -> list[dict[str, str]]:
    """The chat messages of :data:`ANSWER_PROMPT_VERSION` for ``question`` over ``block``."""
    memories = block.strip() or "(no memories were found)"
    return [{"role": "system", "content": ANSWER_SYSTEM},
            {"role": "user", "content": f"Memories:\n{memories}\n\nQuestion: {question}"}]


def cited(answer: str, memory_ids: Sequence[str]) -> list[str]:
    """The ids of the block lines ``answer`` cites, first citation first, each once; a number
    outside the block is ignored (a model may invent one)."""
    out: list[str] = []
    for group in _CITE.findall(answer):
        for n in (int(x) for x in group.split(",")):
            if 1 <= n <= len(memory_ids) and memory_ids[n - 1] not in out:
                out.append(memory_ids[n - 1])
    return out


PROFILE_PROMPT_VERSION = "profile-v1"
PROFILE_GROUPS = ("selfFacts", "static", "dynamic", "preferences", "instructions")
PROFILE_SYSTEM = (
    "You file one memory about a user into their profile. Reply with exactly one word: "
    "selfFacts (who the user is: name, age, where they live, family, job), static (lasting "
    "facts about the user's world that rarely change), dynamic (what is true now and will "
    "change: current projects, plans, moods, this week), preferences (likes, dislikes, "
    "choices), instructions (how the user wants the assistant to behave), or none (not about "
    "the user).")


def profile_messages(content: str) -> list[dict[str, str]]:
    """The chat messages of :data:`PROFILE_PROMPT_VERSION` for one memory's text."""
    return [{"role": "system", "content": PROFILE_SYSTEM},
            {"role": "user", "content": f"Memory: {content}"}]


def read_group(reply: str) -> str | None:
    """The group a :data:`PROFILE_PROMPT_VERSION` reply names (``"none"`` when it says the
    memory is not about the user), or ``None`` when it names no group (a model that rambles
    is not guessed at).

    >>> read_group(" Preferences."), read_group("self_facts"), read_group("None"), read_group("?")
    ('preferences', 'selfFacts', 'none', None)
    """
    word = re.sub(r"[^a-z_]", "", reply.strip().lower())
    for group in (*PROFILE_GROUPS, "none"):
        if word in (group.lower(), re.sub(r"([A-Z])", r"_\1", group).lower()):
            return group
    return None
