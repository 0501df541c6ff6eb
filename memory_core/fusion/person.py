"""Whose words answer a question in a user's chat with an assistant: its grammatical person.

"What did **you** recommend?" asks for the assistant's earlier words; "Where did **I** park?"
and "Can **you** suggest a hotel for **my** trip?" are answered from what the user said about
themselves; "What did Caroline research?" (third person) names neither. Used by the fusion
boost (``fusion.person_weight``) and the stacked model's ``person_match`` feature, both
against a memory's role (``metadata[fusion.role_key]``).

The rule (checked on LongMemEval oracle's questions outside the shared S subset: 36 of its 39
single-session-assistant questions are the agent's, every question of the other types the
asker's or nobody's):

- the **agent** when the question refers to what "you" said or did before: "did you", "you"
  (or "you've", "you'd") followed within two words by a verb of speaking or making in the
  past (:data:`SPOKE`: "you mentioned", "you also recommended"), or "remind me";
- else the **asker** when it has a first- or second-person pronoun (a request to "you" is
  answered from the asker's own words);
- else None.

Words keep their apostrophes (typographic ones are read as "'"), so "ID" or "ill" are not
"I'd" or "I'll". Words are case-folded, so a lower-case "i" (as chat users type it) counts,
and so does the "i" of "i.e.".

Example:
    >>> addressed_role("What did you suggest for my trip?", "user", "assistant")
    'assistant'
    >>> addressed_role("Can you suggest a hotel for my trip?", "user", "assistant")
    'user'
    >>> addressed_role("Where did I park?", "user", "assistant")
    'user'
    >>> addressed_role("What's the ID of the ticket Caroline filed?", "user", "assistant") is None
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
SECOND_PERSON = frozenset({"you", "your", "yours", "yourself", "yourselves", "you're",
                           "you've", "you'd", "you'll"})
# "you <verb>" that refers to the agent's earlier words or work
SPOKE = frozenset({
    "said", "told", "mentioned", "recommended", "suggested", "provided", "gave", "given",
    "made", "wrote", "written", "listed", "shared", "explained", "described", "offered",
    "proposed", "noted", "named", "included", "created", "generated", "sent", "showed",
    "shown", "taught", "advised", "remembered", "came", "did", "used", "called",
    "answered", "replied"})
_YOU_SUBJECT = frozenset({"you", "you've", "you'd"})
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'", "\u2018": "'"})


def words_of(query: str) -> list[str]:
    """The query's words, case-folded, apostrophes kept ("I'm" -> "i'm")."""
    return _WORD.findall(query.translate(_APOSTROPHES).casefold())


def refers_to_agents_words(words: Sequence[str]) -> bool:
    """Whether the words refer to what "you" said or did before (see the module doc)."""
    for i, w in enumerate(words):
        if w == "remind" and i + 1 < len(words) and words[i + 1] == "me":
            return True
        if w == "you" and i > 0 and words[i - 1] == "did":
            return True
        if w in _YOU_SUBJECT and any(n in SPOKE for n in words[i + 1:i + 3]):
            return True
    return False


def addressed_role(query: str, asker: str, agent: str) -> str | None:
    """The role whose words hold the answer to ``query`` (the module doc): ``agent``,
    ``asker`` or None."""
    words = words_of(query)
    if refers_to_agents_words(words):
        return agent
    if FIRST_PERSON.intersection(words) or SECOND_PERSON.intersection(words):
        return asker
    return None
