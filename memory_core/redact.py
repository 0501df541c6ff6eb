"""Optional write-time redaction of secrets and personal data.

When ``RedactSpec.enabled``, every match of every configured pattern in a written text is
replaced by ``replacement`` (``{name}`` becomes the pattern's name, e.g. ``[REDACTED:email]``)
*before* anything else sees the text: the stored content, the stored passage, the full-text
index, the embedding, the entities and the event time are all computed from the redacted text,
so the original never reaches the store and blocks carry the redacted text.

Patterns are applied in configuration order, each over the output of the previous one. They
are compiled once, when the engine is built: a bad pattern fails at start-up, not on a write.

Example:
    >>> from memory_core.config import RedactSpec
    >>> Redactor.from_spec(RedactSpec(enabled=True)).apply("mail bob@example.com now")
    'mail [REDACTED:email] now'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_core.config import RedactSpec


@dataclass(frozen=True)
class Redactor:
    """Compiled redaction patterns (an empty tuple redacts nothing)."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    replacement: str = "[REDACTED:{name}]"

    @classmethod
    def from_spec(cls, spec: RedactSpec) -> Redactor:
        if not spec.enabled:
            return cls((), spec.replacement)
        compiled: list[tuple[str, re.Pattern[str]]] = []
        for name, pattern in spec.patterns.items():
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"redact pattern {name!r} does not compile: {exc}") from exc
            if regex.search(""):
                raise ValueError(f"redact pattern {name!r} matches the empty string")
            compiled.append((name, regex))
        return cls(tuple(compiled), spec.replacement)

    @property
    def active(self) -> bool:
        return bool(self.patterns)

    def apply(self, text: str) -> str:
        """``text`` with every match of every pattern replaced."""
        for name, regex in self.patterns:
            text = regex.sub(self.replacement.replace("{name}", name).replace("\\", r"\\"), text)
        return text

    def count(self, text: str) -> dict[str, int]:
        """How many matches each pattern has in ``text`` (for checks and reports)."""
        return {name: len(regex.findall(text)) for name, regex in self.patterns}
