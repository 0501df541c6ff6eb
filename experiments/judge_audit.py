"""Deliberately wrong answers made from a gold answer, for auditing a judge.

A lenient judge inflates answer accuracy (an audit of LoCoMo found the usual gpt-4o-mini judge
accepting 62.8% of wrong but on-topic answers), so the answer run grades, beside each real
answer, wrong answers that stay on topic: the gold with one number changed
(:func:`change_number`), one date changed (:func:`change_date`), one name changed
(:func:`change_name`), and the refusal ``"not mentioned"``. Each is wrong by construction; the
share the judge accepts is its false-accept rate. A change that does not apply to a gold (no
number in it, ...) gives ``None`` and is counted as not made.

Example:
    >>> change_number("Dana cut latency by 12 percent.")
    'Dana cut latency by 19 percent.'
    >>> change_date("Moved on 2024-03-05 to Kafka.")
    'Moved on 2024-03-12 to Kafka.'
    >>> change_name("The owner is Dana Whitfield.")
    'The owner is Morgan Whitfield.'
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from memory_core.llm.prompts import NOT_MENTIONED

AUDIT_VERSION = "audit-v1"
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NAMES = ("Morgan", "Priya", "Tomasz", "Ines", "Kwame", "Yuki")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH = re.compile(r"\b(" + "|".join(MONTHS) + r")\b")
_YEAR = re.compile(r"\b(19|20)(\d{2})\b")
_NUMBER = re.compile(r"(?<![\d\-:/.])(\d+)(?![\d\-:/]|\.\d)")
_WORD = re.compile(r"\b[A-Z][a-z]+\b")


def change_date(gold: str) -> str | None:
    """An ISO date a week later, else a month name the next month, else a year one later."""
    if m := _ISO.search(gold):
        try:
            day = dt.date(int(m[1]), int(m[2]), int(m[3])) + dt.timedelta(days=7)
        except ValueError:
            return None
        return gold[:m.start()] + day.isoformat() + gold[m.end():]
    if m := _MONTH.search(gold):
        later = MONTHS[(MONTHS.index(m[1]) + 1) % 12]
        return gold[:m.start()] + later + gold[m.end():]
    if m := _YEAR.search(gold):
        return gold[:m.start()] + str(int(m[0]) + 1) + gold[m.end():]
    return None


def change_number(gold: str) -> str | None:
    """The first number outside a date made 7 larger (never a year: that is a date)."""
    for m in _NUMBER.finditer(gold):
        if _YEAR.fullmatch(m[1]) or any(d.start() <= m.start() < d.end()
                                        for d in _ISO.finditer(gold)):
            continue
        return gold[:m.start()] + str(int(m[1]) + 7) + gold[m.end():]
    return None


def change_name(gold: str) -> str | None:
    """The first capitalised word that is not a sentence's first, a month or a weekday (a
    name, most likely) replaced by another name."""
    for m in _WORD.finditer(gold):
        before = gold[:m.start()].rstrip()
        if not before or before[-1] in ".!?:" or m[0] in MONTHS or m[0] in WEEKDAYS:
            continue
        other = next(n for n in NAMES if n != m[0])
        return gold[:m.start()] + other + gold[m.end():]
    return None


def not_mentioned(gold: str) -> str | None:
    """The refusal: wrong for a question the memories answer."""
    return NOT_MENTIONED


WRONG_ANSWERS: dict[str, Callable[[str], str | None]] = {
    "changed_number": change_number,
    "changed_date": change_date,
    "changed_name": change_name,
    "not_mentioned": not_mentioned,
}


def wrong_answers(gold: str) -> dict[str, str]:
    """Every wrong answer :data:`WRONG_ANSWERS` can make from ``gold`` (kind -> answer)."""
    out = {}
    for kind, make in WRONG_ANSWERS.items():
        made = make(gold)
        if made is not None and made.strip().lower() != gold.strip().lower():
            out[kind] = made
    return out
