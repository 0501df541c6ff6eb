"""Checks every public entry point runs before any work: shapes, text, sizes, reserved names.

A value that fails is a 422 ``validation_error`` naming the field (``reserved_tag`` for a
reserved tag) and nothing is read or written. What is checked:

- **shapes**: a request or a write item is a mapping whose keys are strings
  (:func:`memory_core.requests.model.check_mapping`);
- **text** (:func:`check_text`, :func:`check_clean`): every string anywhere in a request or an
  item is valid Unicode text: no lone surrogate (it cannot be encoded, so SQLite, the tokenizer
  and the JSON wire would all fail on it) and no NUL character (SQLite and C libraries cut a
  string there);
- **sizes** (:class:`memory_core.config.LimitsSpec`): the query (``max_query_chars``), each
  write's content (``max_content_chars``), ids and names (``max_id_chars``), and metadata
  (:func:`check_metadata`: JSON-serialisable, string keys, finite numbers, at most
  ``max_metadata_depth`` levels and ``max_metadata_bytes`` bytes of JSON);
- **reserved tags** (:func:`reserved_form`): the prefix test runs on a normalised form (NFKC,
  case-folded, whitespace and invisible format characters removed), so ``ANONA:x``,
  ``" anona:x"``, fullwidth ``ａｎｏｎａ:x`` and ``anona\\u200b:x`` are all reserved.

Example:
    >>> reserved_form(" ＡNONA\\u200b:x")
    'anona:x'
    >>> is_reserved("Anona:team", "anona:"), is_reserved("anonymous:x", "anona:")
    (True, False)
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from memory_core.config import LimitsSpec
from memory_core.errors import ErrorCode, MemoryCoreError, invalid

MAX_TAG_CHARS = 256  # one tag's length, on writes and in filters (422 too_long)
_WALK_LIMIT = 10_000  # strings and containers visited by check_clean before giving up (422)


def text_problem(value: str) -> str | None:
    """Why ``value`` is not storable text (``"nul"``, ``"surrogate"``), or None."""
    if "\x00" in value:
        return "nul"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "surrogate"
    return None


def check_text(value: Any, field: str, max_chars: int | None = None, *,
               allow_empty: bool = False, limit_name: str = "") -> str:
    """``value`` as a string of valid text, else 422 naming ``field`` (and the limit broken).

    Example:
        >>> check_text("fine", "query")
        'fine'
        >>> check_text("bad\\ud800", "query")
        Traceback (most recent call last):
        ...
        memory_core.errors.MemoryCoreError: 422 validation_error (invalid_text): query holds a lone surrogate (not valid Unicode text)
    """  # noqa: E501 (a doctest's expected output is one line)
    if not isinstance(value, str):
        raise invalid("wrong_type", f"{field} must be a string, got {type(value).__name__}",
                      field)
    if not allow_empty and not value.strip():
        raise invalid("empty_value", f"{field} must not be empty", field)
    if max_chars is not None and len(value) > max_chars:
        raise invalid("too_long", f"{field} is {len(value):,} characters; the limit "
                      f"{limit_name or 'max_chars'} is {max_chars:,}", field)
    problem = text_problem(value)
    if problem == "nul":
        raise invalid("invalid_text", f"{field} holds a NUL character", field)
    if problem == "surrogate":
        raise invalid("invalid_text", f"{field} holds a lone surrogate (not valid Unicode "
                      "text)", field)
    return value


def check_content(value: Any, field: str = "content", where: str | None = None) -> str:
    """A memory's ``content``: present (422 ``missing_field``), a string (``wrong_type``),
    not blank (``empty_content``); ``where`` names it in the message (``items[0].content``).

    Example:
        >>> check_content(123, where="items[0].content")
        Traceback (most recent call last):
        ...
        memory_core.errors.MemoryCoreError: 422 validation_error (wrong_type): items[0].content must be a string, got int
    """  # noqa: E501 (a doctest's expected output is one line)
    where = where or field
    if value is None:
        raise invalid("missing_field", f"{where} is required", field)
    if not isinstance(value, str):
        raise invalid("wrong_type", f"{where} must be a string, got {type(value).__name__}",
                      field)
    if not value.strip():
        raise invalid("empty_content", f"{where} must not be empty", field)
    return value


def check_clean(value: Any, field: str) -> None:
    """Every string inside ``value`` (mapping keys included) is valid text; 422 otherwise.

    Walks at most ``_WALK_LIMIT`` nodes (a larger request is 422 ``too_large``); shapes are
    checked by each field's own validation."""
    stack: list[tuple[Any, str]] = [(value, field)]
    seen = 0
    while stack:
        item, where = stack.pop()
        seen += 1
        if seen > _WALK_LIMIT:
            raise invalid("too_large", f"{field} holds more than {_WALK_LIMIT:,} values", field)
        if isinstance(item, str):
            if text_problem(item) is not None:
                check_text(item, where, allow_empty=True)
        elif isinstance(item, Mapping):
            for k, v in item.items():
                if isinstance(k, str) and text_problem(k) is not None:
                    check_text(k, f"{where} (a key)", allow_empty=True)
                stack.append((v, f"{where}.{k}" if isinstance(k, str) else where))
        elif isinstance(item, list | tuple):
            stack.extend((v, where) for v in item)


def check_metadata(value: Any, field: str, limits: LimitsSpec) -> dict[str, Any]:
    """Metadata as a plain JSON object within the limits, else 422 naming the limit.

    Example:
        >>> check_metadata({"a": [1, 2.5, "x"]}, "metadata", LimitsSpec())
        {'a': [1, 2.5, 'x']}
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid("wrong_type", f"{field} must be a mapping", field)
    out = _plain(value, field, 1, limits)
    size = len(json.dumps(out, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise invalid("too_large", f"{field} is {size:,} bytes of JSON; the limit "
                      f"max_metadata_bytes is {limits.max_metadata_bytes:,}", field)
    return out


def _plain(value: Any, field: str, depth: int, limits: LimitsSpec) -> Any:
    if depth > limits.max_metadata_depth:
        raise invalid("too_deep", f"{field} nests deeper than max_metadata_depth "
                      f"({limits.max_metadata_depth})", field)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 2**63 - 1:
            raise invalid("out_of_range", f"{field}: integers must fit 64 bits", field)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise invalid("wrong_type", f"{field}: numbers must be finite", field)
        return value
    if isinstance(value, str):
        return check_text(value, field, limits.max_metadata_bytes, allow_empty=True,
                          limit_name="max_metadata_bytes")
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise invalid("wrong_type", f"{field}: keys must be strings", field)
            check_text(k, f"{field} (a key)", limits.max_id_chars, allow_empty=True,
                       limit_name="max_id_chars")
            out[k] = _plain(v, f"{field}.{k}", depth + 1, limits)
        return out
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_plain(v, field, depth + 1, limits) for v in value]
    raise invalid("wrong_type", f"{field}: {type(value).__name__} is not a JSON value", field)


# -- reserved names ---------------------------------------------------------------------------
def reserved_form(text: str) -> str:
    """The form the reserved-prefix test compares: NFKC, case-folded, with whitespace and
    invisible format characters (Unicode category ``Cf``: zero-width space and joiners, BOM,
    soft hyphen...) removed. NFKC runs again after case folding (casefold can de-normalise)."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return "".join(ch for ch in folded
                   if not ch.isspace() and unicodedata.category(ch) != "Cf")


def is_reserved(tag: str, prefix: str) -> bool:
    """Whether ``tag`` is under the reserved ``prefix`` once both are normalised."""
    return bool(prefix) and reserved_form(tag).startswith(reserved_form(prefix))


def check_reserved(tags: Sequence[str], prefix: str, field: str) -> None:
    """Tags under the reserved prefix belong to the engine: 422 ``reserved_tag``."""
    if not prefix:
        return
    reserved = reserved_form(prefix)
    bad = [t for t in tags if reserved_form(t).startswith(reserved)]
    if bad:
        raise MemoryCoreError(ErrorCode.RESERVED_TAG, "reserved_prefix",
                              f"{field}: tags under {prefix!r} are reserved: "
                              f"{', '.join(map(repr, bad))}", field)
