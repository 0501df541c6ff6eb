"""Prompt-ready blocks: rendering, token estimate and the token budget.

A block is numbered plain text with no header (``1. ...``); ``block_order="stable"`` orders by
record time and uses bullets (``- ...``). ``token_estimate = ceil(len(block) / chars_per_token)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from memory_core.types import BlockOrder, Result

# the end of a passage cut by ``source_max_tokens`` (seed rule: a cut passage says so)
SOURCE_CUT_MARK = " [...]"


def estimate_tokens(text: str, chars_per_token: float) -> int:
    """Token estimate from a characters-per-token ratio (0 for empty text)."""
    return math.ceil(len(text) / chars_per_token) if text else 0


def render_block(results: Sequence[Result], order: BlockOrder) -> str:
    """The block text. Passages (``Result.source``) never enter it."""
    if order is BlockOrder.STABLE:
        ordered = sorted(results, key=lambda r: (r.recorded_at, r.memory_id))
        return "\n".join(f"- {_one_line(r.content)}" for r in ordered)
    return "\n".join(f"{i}. {_one_line(r.content)}" for i, r in enumerate(results, start=1))


def render_folded(results: Sequence[Result], order: BlockOrder,
                  folded: Mapping[str, Sequence[str]]) -> str:
    """The block with ``folded`` texts (result memory id -> texts) as indented lines under
    their result (the agent-memory seed's section expansion folded into the block).

    Example:
        >>> r = Result("mem_1", "s", "Expense policy", "fact", 1.0, (), None, {}, "p.pdf", (),
        ...            (), "t", "t", None, None, None, None, None)
        >>> print(render_folded([r], BlockOrder.RELEVANCE, {"mem_1": ["Meals: 50 a day."]}))
        1. Expense policy
           Meals: 50 a day.
    """
    if order is BlockOrder.STABLE:
        ordered = sorted(results, key=lambda r: (r.recorded_at, r.memory_id))
        heads = [(r, "- ") for r in ordered]
    else:
        heads = [(r, f"{i}. ") for i, r in enumerate(results, start=1)]
    lines: list[str] = []
    for r, mark in heads:
        lines.append(f"{mark}{_one_line(r.content)}")
        lines.extend(" " * len(mark) + _one_line(t) for t in folded.get(r.memory_id, ()))
    return "\n".join(lines)


def fold_sections(results: Sequence[Result], order: BlockOrder,
                  rows: Sequence[tuple[str, str, str]], max_tokens: int | None,
                  chars_per_token: float) -> tuple[str, list[str], list[str]]:
    """The block of ``results`` with section ``rows`` (``(result id, row id, text)``, in
    rank order of their result) folded under their result, as many as fit ``max_tokens``
    (a row that would pass it is left out and the next one tried); returns the text, the
    row ids folded and those left out. Without rows it is :func:`render_block`'s text."""
    folded: dict[str, list[str]] = {}
    done: list[str] = []
    left: list[str] = []
    shown = {r.memory_id for r in results}
    for of, row, text in rows:
        if of not in shown:
            continue
        folded.setdefault(of, []).append(text)
        if max_tokens is not None and estimate_tokens(
                render_folded(results, order, folded), chars_per_token) > max_tokens:
            folded[of].pop()
            left.append(row)
        else:
            done.append(row)
    return render_folded(results, order, folded), done, left


def fit_budget(results: Sequence[Result], order: BlockOrder, max_tokens: int | None,
               chars_per_token: float) -> tuple[list[Result], list[Result]]:
    """(kept, cut): drop whole memories, lowest-ranked first, until the block fits."""
    kept = list(results)
    cut: list[Result] = []
    if max_tokens is None:
        return kept, cut
    while kept and estimate_tokens(render_block(kept, order), chars_per_token) > max_tokens:
        cut.insert(0, kept.pop())
    return kept, cut


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_recent(contents: Sequence[str], session_id: str) -> str:
    """The recent-turns part ``get_context(session_id=...)`` appends after the recalled block:
    a label line, then the turns oldest first as bullets."""
    if not contents:
        return ""
    return f"Recent turns (session {session_id}):\n" + "\n".join(
        f"- {_one_line(c)}" for c in contents)


def fit_recent(block: str, contents: Sequence[str], session_id: str, max_tokens: int | None,
               chars_per_token: float) -> tuple[str, int]:
    """``block`` plus as many of the newest ``contents`` as fit ``max_tokens`` (the recalled
    block is never cut for them); returns the text and how many of the oldest were left out."""
    kept = list(contents)
    while True:
        tail = render_recent(kept, session_id)
        text = "\n\n".join(part for part in (block, tail) if part)
        if max_tokens is None or not kept or estimate_tokens(text, chars_per_token) <= max_tokens:
            return text, len(contents) - len(kept)
        kept.pop(0)


def cut_passage(text: str, budget_chars: int, mark: str = SOURCE_CUT_MARK) -> str | None:
    """``text`` within ``budget_chars`` characters: whole when it fits; otherwise the longest
    prefix ending at a word boundary, followed by ``mark`` (the mark counts against the
    budget); ``None`` when not even one whole word and the mark fit.

    Example:
        >>> cut_passage("Alice owns the pricing table.", 100)
        'Alice owns the pricing table.'
        >>> cut_passage("Alice owns the pricing table.", 20)
        'Alice owns the [...]'
        >>> cut_passage("Alice owns the pricing table.", 8) is None
        True
    """
    if len(text) <= budget_chars:
        return text
    room = budget_chars - len(mark)
    if room <= 0:
        return None
    # the last whitespace at or before ``room`` ends the kept prefix (a word boundary)
    cut = max(text.rfind(ch, 0, room + 1) for ch in (" ", "\n", "\t"))
    prefix = text[:cut].rstrip() if cut > 0 else ""
    return prefix + mark if prefix else None
