"""Which sessions are a user's chat with an assistant, read from the turns themselves.

The conversation terms of :mod:`memory_core.fusion.boost` differ by kind of conversation: the
*reply* term helps between people (LoCoMo: the answer to "How did you two meet?" is the next
turn) and hurts in a chat with an assistant, where the turn after a question is a long, generic
answer to a request and is lifted above the user's own words that hold the evidence; the
*person* term needs to know whose turn is whose. Writers that send ``metadata.role`` say which
it is; many send only a ``session_id``. Then the session's shape says it: an assistant answers
at length and the user asks briefly, so the turns at alternate positions differ in length by a
wide factor, while people talking take turns of like length.

    chat(session)  <=>  both parities hold >= 2 turns and
                        max(a, b) >= ratio * min(a, b), a / b = median characters of the
                        turns at even / odd positions (timestamp, then write, order)

In a chat, the longer parity's turns are the agent's (``fusion.agent_role``) and the shorter's
the asker's (``fusion.asker_role``). Measured (characters; ``fusion.chat_length_ratio``):
LongMemEval's user-assistant sessions have a parity ratio of 2.8 / 5.1 / 9.1 at their 1st /
5th / 50th percentile (oracle outside S, the choice set), MemoryBank's user-companion sessions
1.01 / 1.03 / 1.13 (1.4% at or above 3). 3 keeps 98.9% of the first chats and reads 1.4% of
the second as chats (docs/recorded_figures_archive.md, issue 38).

Example:
    >>> chat_roles(((1, 40), (2, 900), (3, 55), (4, 1200)), 3.0, "user", "assistant")
    {1: 'user', 2: 'assistant', 3: 'user', 4: 'assistant'}
    >>> chat_roles(((1, 40), (2, 52), (3, 61), (4, 38)), 3.0, "user", "assistant") is None
    True
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

MIN_TURNS_PER_SIDE = 2  # a session of fewer turns at either parity is never read as a chat


def parity_ratio(lengths: Sequence[int]) -> float | None:
    """``max(a, b) / min(a, b)`` of the median lengths at even and odd positions (the
    module's rule; a side of length 0 counts as 1 character); None when either side holds
    fewer than :data:`MIN_TURNS_PER_SIDE` turns."""
    even, odd = lengths[0::2], lengths[1::2]
    if len(even) < MIN_TURNS_PER_SIDE or len(odd) < MIN_TURNS_PER_SIDE:
        return None
    a, b = max(1.0, statistics.median(even)), max(1.0, statistics.median(odd))
    return max(a, b) / min(a, b)


def chat_roles(turns: Sequence[tuple[int, int]], ratio: float, asker: str, agent: str
               ) -> dict[int, str] | None:
    """``rowid -> role`` for each turn of a session read as a chat with an assistant (the
    module's rule over ``turns``: ``(rowid, characters)`` in turn order), else None. A
    ``ratio`` of 0 reads no session as a chat."""
    if ratio <= 0:
        return None
    lengths = [n for _, n in turns]
    shape = parity_ratio(lengths)
    if shape is None or shape < ratio:
        return None
    even_longer = statistics.median(lengths[0::2]) > statistics.median(lengths[1::2])
    return {rowid: (agent if (i % 2 == 0) == even_longer else asker)
            for i, (rowid, _) in enumerate(turns)}
