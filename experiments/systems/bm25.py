"""``system=bm25``: BM25 from bm25s (Lù, 2024, arXiv:2407.03618), one sparse index per space.

Tokenised as bm25s' README does: lower case, its word pattern (``\\b\\w\\w+\\b``: one-letter
words are dropped), English stop words (``stopwords``), the Snowball English stemmer from
PyStemmer (``stemmer``; null for none). Scored with bm25s' ``method`` (default ``lucene``:
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` times ``tf / (tf + k1 (1 - b + b dl / avgdl))``,
``k1`` 1.5, ``b`` 0.75; Lucene 8's form, without the constant ``k1 + 1``). Only items that share a
word with the question are returned (a zero score is no match, as in Lucene), ties in the
order bm25s gives.

memory_core's own BM25 (``channels=keyword_only``) differs in ways that move rankings: SQLite
FTS5's tokenizer (``porter unicode61``: Porter stemming, one-letter words kept, no stop
words), FTS5's BM25 (``k1`` 1.2, ``b`` 0.75, its own idf), and collection statistics that
are the whole store's, not the space's (docs/workbench.md, "Systems").

    >>> s = BM25(BM25Spec())
    >>> s.index("notes", [Item("m1", "We moved card payments to Stripe."),
    ...                   Item("m2", "On-call rotates every Monday.")])
    >>> [h.key for h in s.search("notes", Query("q", "Who rotates on-call?"), 5)]
    ['m2']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.systems.base import Hit, Item, Query, require


@dataclass(frozen=True)
class BM25Spec:
    """``system=bm25`` (``conf/system/bm25.yaml``): bm25s' settings."""

    name: str = "bm25"
    method: str = "lucene"  # robertson | atire | bm25l | bm25+ | lucene
    k1: float = 1.5
    b: float = 0.75
    stopwords: str | None = "en"  # bm25s' list; null: none
    stemmer: str | None = "english"  # a PyStemmer (Snowball) language; null: none


class BM25:
    """One bm25s index per space (module docstring)."""

    name = "bm25"

    def __init__(self, spec: BM25Spec):
        self.spec = spec
        self._bm25s = require("bm25s", "bm25")
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs each build at DEBUG
        self._stem = None
        if spec.stemmer:
            stemmer_mod = require("Stemmer", "bm25")
            self._stem = stemmer_mod.Stemmer(spec.stemmer).stemWords
        self._indexes: dict[str, tuple[Any, list[str]]] = {}

    def _tokens(self, texts: Sequence[str], ids: bool) -> Any:
        return self._bm25s.tokenize(list(texts), stopwords=self.spec.stopwords or [],
                                    stemmer=self._stem, return_ids=ids, show_progress=False)

    def index(self, space: str, items: Sequence[Item]) -> None:
        retriever = self._bm25s.BM25(method=self.spec.method, k1=self.spec.k1, b=self.spec.b)
        retriever.index(self._tokens([i.content for i in items], True), show_progress=False)
        self._indexes[space] = (retriever, [i.key for i in items])

    def search(self, space: str, query: Query, k: int) -> list[Hit]:
        retriever, keys = self._indexes[space]
        words = [w for w in self._tokens([query.text], False)[0] if w in retriever.vocab_dict]
        if not words or not keys:
            return []
        docs, scores = retriever.retrieve([words], k=min(k, len(keys)), show_progress=False,
                                          n_threads=1)
        return [Hit(keys[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True)
                if s > 0]

    def save(self, directory: Path) -> None:
        for n, (space, (retriever, keys)) in enumerate(self._indexes.items()):
            where = directory / f"space{n:05d}"
            retriever.save(str(where), show_progress=False)
            (where / "keys.json").write_text(json.dumps({"space": space, "keys": keys}))

    def identity(self) -> Mapping[str, Any]:
        import importlib.metadata as md

        versions = {"bm25s": md.version("bm25s")}
        if self.spec.stemmer:
            versions["PyStemmer"] = md.version("PyStemmer")
        return {"system": "bm25", "library": versions, "settings": asdict(self.spec),
                "tokenizer": r"bm25s.tokenize: lower case, (?u)\b\w\w+\b"}

    def close(self) -> None:
        self._indexes.clear()
