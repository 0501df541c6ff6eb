"""Scope rules: scope paths (a write's ``scopes``, a read's ``lens``) and a read's descriptor
``labels``, each read and stated in JSON Schema here (the filter compiler,
:mod:`memory_core.filters.scope` and :mod:`memory_core.filters.labels`, turns them into SQL).

    >>> parse_lens([["org/acme/user/alice"], ["org/acme/team/payments", "project/alpha"]])
    (('org/acme/user/alice',), ('org/acme/team/payments', 'project/alpha'))
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memory_core.errors import invalid
from memory_core.requests.rules import ParseContext, Rule, Stated
from memory_core.requests.text import text

# scope paths: "/"-separated segments, e.g. "org/acme/team/payments"
SCOPE_PATH = re.compile(r"^[A-Za-z0-9_.:@+-]+(?:/[A-Za-z0-9_.:@+-]+)*$")
MAX_PATH_CHARS = 256
MAX_WRITE_SCOPES = 20
MAX_LENS_CLAUSES = 16
MAX_CLAUSE_PATHS = 8


def check_scope_path(path: Any, field: str) -> str:
    """A valid scope path or 422 ``invalid_scope_path`` naming ``field``."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS or not SCOPE_PATH.fullmatch(path):
        raise invalid("invalid_scope_path", f"{field}: a scope path is 1-{MAX_PATH_CHARS} "
                      "characters of '/'-separated non-empty segments (letters, digits, "
                      f"_ . : @ + -), got {path!r}", field)
    return path


def check_write_scopes(scopes: Any, field: str = "scopes") -> tuple[str, ...]:
    """The scope paths of a write (at most :data:`MAX_WRITE_SCOPES`), deduplicated."""
    if scopes is None:
        return ()
    if isinstance(scopes, str) or not isinstance(scopes, Sequence):
        raise invalid("wrong_type", f"{field} must be a list of scope paths", field)
    if len(scopes) > MAX_WRITE_SCOPES:
        raise invalid("too_many_scopes", f"{field}: at most {MAX_WRITE_SCOPES} scope paths",
                      field)
    return tuple(dict.fromkeys(check_scope_path(p, field) for p in scopes))


def parse_lens(lens: Any) -> tuple[tuple[str, ...], ...]:
    """A ``lens`` in disjunctive normal form: a non-empty list of clauses (at most
    :data:`MAX_LENS_CLAUSES`), each a non-empty list of scope paths (at most
    :data:`MAX_CLAUSE_PATHS`). Anything else is 422 naming ``lens``."""
    if isinstance(lens, str) or not isinstance(lens, Sequence) or not lens:
        raise invalid("wrong_type", "lens must be a non-empty list of clauses, each a "
                      "non-empty list of scope paths", "lens")
    if len(lens) > MAX_LENS_CLAUSES:
        raise invalid("too_many_clauses", f"lens: at most {MAX_LENS_CLAUSES} clauses", "lens")
    out = []
    for i, clause in enumerate(lens):
        if isinstance(clause, str) or not isinstance(clause, Sequence) or not clause:
            raise invalid("wrong_type", f"lens[{i}] must be a non-empty list of scope paths",
                          "lens")
        if len(clause) > MAX_CLAUSE_PATHS:
            raise invalid("too_many_paths", f"lens[{i}]: at most {MAX_CLAUSE_PATHS} paths in "
                          "a clause", "lens")
        out.append(tuple(dict.fromkeys(check_scope_path(p, "lens") for p in clause)))
    return tuple(out)


def parse_labels(value: Any, max_labels: int) -> tuple[str, ...]:
    """A request's ``labels``: a non-empty list of at most ``max_labels`` non-empty strings
    without a namespace (422 ``validation_error`` naming ``labels`` otherwise); duplicates
    collapse, order kept."""
    if isinstance(value, str) or not isinstance(value, Sequence) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise invalid("wrong_type", "labels must be a non-empty list of non-empty strings",
                      "labels")
    namespaced = [v for v in value if ":" in v]
    if namespaced:
        raise invalid("namespaced_label", "a label has no namespace (no ':'); filter "
                      f"namespaced tags with tags / tag_groups: {', '.join(namespaced)}",
                      "labels")
    labels = tuple(dict.fromkeys(v.strip() for v in value))
    if len(labels) > max_labels:
        raise invalid("too_many_labels", f"at most {max_labels} labels, got {len(labels)}",
                      "labels")
    return labels


def path_schema() -> dict[str, Any]:
    return {"type": "string", "maxLength": MAX_PATH_CHARS, "pattern": SCOPE_PATH.pattern}


class Lens(Rule):
    """``lens``: scope paths in disjunctive normal form (OR over clauses, AND within one)."""

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        if isinstance(value, tuple) and all(isinstance(c, tuple) for c in value):
            return value  # parsed already (a request built in code)
        return parse_lens(value)

    def schema(self, stated: Stated) -> dict[str, Any]:
        clause = {"type": "array", "items": path_schema(), "minItems": 1,
                  "maxItems": MAX_CLAUSE_PATHS}
        return {"type": "array", "items": clause, "minItems": 1, "maxItems": MAX_LENS_CLAUSES}

    def load(self, value: Any) -> Any:
        return tuple(tuple(clause) for clause in value)


class Labels(Rule):
    """``labels``: descriptor labels (no namespace), at most ``tags.max_flat_tags``."""

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return parse_labels(value, ctx.spec.tags.max_flat_tags)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "array", "items": text(exclude=":"), "minItems": 1,
                "maxItems": stated.spec.tags.max_flat_tags}


class WriteScopes(Rule):
    """A write's ``scopes``: scope paths a read's ``lens`` matches; omitted, none."""

    def omitted(self, name: str, ctx: ParseContext) -> Any:
        return ()

    def read(self, value: Any, name: str, ctx: ParseContext) -> Any:
        return check_write_scopes(value, name)

    def schema(self, stated: Stated) -> dict[str, Any]:
        return {"type": "array", "items": path_schema(), "maxItems": MAX_WRITE_SCOPES}
