"""Hit families: what kind of row a result is, in the agent-memory seed's words.

The agent-memory seed names the family of every hit in its ``source`` field: ``entity``,
``attribute``, ``action`` (distilled rows), ``memory_chunk``, ``chunk`` or ``section`` (the
written text). Here, from what the store keeps of a memory:

- ``memory_chunk``: a written memory that is not part of a document (a conversation turn, a
  note; a long turn split into pieces stays one);
- ``chunk``: a piece of a document (``document_id`` set);
- ``section``: a piece of a document that sits under a heading: its write named the heading in
  ``metadata.section`` (a non-empty string), or its own text opens with a Markdown heading
  line (``# Expense policy``). The engine does not cut documents at headings itself; a writer
  that does names each piece's heading;
- ``attribute``: an observation (a note distilled from facts, :meth:`MemoryEngine.observe`).
  The engine distils no actions, so ``action`` never appears, and ``entity`` only names a
  context hit's entity card, never a ranked hit.

    >>> family_of("fact", None, {}, "Alice prefers pnpm.")
    'memory_chunk'
    >>> family_of("fact", "policy.pdf", {"section": "Expense policy"}, "Meals: 50 a day.")
    'section'
    >>> family_of("fact", "policy.pdf", {}, "## Travel\\nTrains, second class.")
    'section'
    >>> family_of("observation", None, {}, "Alice travels in June.")
    'attribute'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# every value the seed's ``source`` may take, in its own order
FAMILIES = ("entity", "attribute", "action", "memory_chunk", "chunk", "section")
# the metadata key a writer names a document piece's heading with
SECTION_KEY = "section"
_MARKDOWN_HEADING = re.compile(r"\s*#{1,6}[ \t]+(\S[^\n]*)")


def heading_of(metadata: Mapping[str, Any], content: str) -> str | None:
    """The heading a document piece sits under: ``metadata.section`` when it is a non-empty
    string, else the text of a Markdown heading line that opens ``content``; None otherwise.

        >>> heading_of({}, "# Expense policy\\nMeals are covered.")
        'Expense policy'
        >>> heading_of({"section": "  "}, "Meals are covered.") is None
        True
    """
    named = metadata.get(SECTION_KEY)
    if isinstance(named, str) and named.strip():
        return named.strip()
    found = _MARKDOWN_HEADING.match(content)
    if found is None:
        return None
    return found.group(1).strip().rstrip("#").strip() or None


def family_of(memory_type: str, document_id: str | None, metadata: Mapping[str, Any],
              content: str) -> str:
    """The seed's ``source`` family of a memory (module docstring)."""
    if memory_type == "observation":
        return "attribute"
    if document_id is None:
        return "memory_chunk"
    return "section" if heading_of(metadata, content) is not None else "chunk"
