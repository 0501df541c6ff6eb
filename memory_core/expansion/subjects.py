"""``expand_query``: split a multi-subject question into its subjects.

The question is cut at the connectors ``and``, ``versus`` / ``vs`` / ``vs.`` and ``, then``
(whole words, any case), never at ``or`` (an "or" question asks for one of its options, and
splitting it would fetch evidence for both as if both were asked). At most
:data:`MAX_SUBJECTS` subjects: after the third cut the rest of the question stays one subject.
A piece without a content word (letters or digits beyond a stop word) is not a subject.

The pipeline retrieves the whole question and each subject on its own and fuses the lists
into one ranking (see ``memory_core/pipeline.py``); a question with fewer than two subjects is
retrieved exactly as without the flag.

Example:
    >>> split_subjects("How many weeks between finishing the payments migration and "
    ...                "starting the mobile rewrite?")
    ('How many weeks between finishing the payments migration', 'starting the mobile rewrite')
    >>> split_subjects("Do we use Stripe or Adyen?")
    ()
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory_core.trace import ExpansionTrace, SubjectContribution
from memory_core.types import Candidate

MAX_SUBJECTS = 4

# ", then" first so "x, then y" is cut once; "vs." keeps its dot inside the connector
CONNECTOR = re.compile(r",\s*then\b|\s+(?:versus|vs\.?)\s+|\s+and\s+", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_FILLER = frozenset("""a an the of to in on at for with by from what which who whom how
when where why is are was were be been do does did it its this that these those then
also and""".split())


def _is_subject(piece: str) -> bool:
    return any(w.lower() not in _FILLER for w in _WORD.findall(piece))


def _clean(piece: str) -> str:
    return piece.strip().strip(",;:").strip().rstrip("?.!").strip()


def split_subjects(question: str, max_subjects: int = MAX_SUBJECTS) -> tuple[str, ...]:
    """The question's subjects (at least two), or ``()`` for a single-subject question."""
    if max_subjects < 2:
        raise ValueError(f"max_subjects must be >= 2, got {max_subjects}")
    pieces = CONNECTOR.split(question, maxsplit=max_subjects - 1)
    subjects = tuple(p for p in (_clean(x) for x in pieces) if p and _is_subject(p))
    return subjects if len(subjects) >= 2 else ()


def expansion_record(subjects: Sequence[str], found: Sequence[Sequence[Candidate]],
                     kept: Sequence[Candidate]) -> ExpansionTrace:
    """What each subject contributed: how many candidates its own retrieval found, which
    returned memories it found, and which of those the whole question did not find
    (``found[0]`` is the whole question's list, ``found[i]`` subject ``i``'s)."""
    if not subjects:
        return ExpansionTrace(applied=False)
    whole = {c.memory_id for c in found[0]}
    returned = [c.memory_id for c in kept]
    contributions = []
    for subject, cands in zip(subjects, found[1:], strict=True):
        ids = {c.memory_id for c in cands}
        contributions.append(SubjectContribution(
            subject, len(ids), tuple(m for m in returned if m in ids),
            tuple(m for m in returned if m in ids and m not in whole)))
    return ExpansionTrace(True, tuple(subjects), len(whole),
                          tuple(m for m in returned if m in whole), tuple(contributions))
