"""A BEIR test collection read as one space (``data=jsonl data.path=DIR``, auto-detected).

The BEIR layout (Thakur et al., NeurIPS 2021 Datasets and Benchmarks; beir-cellar/beir):
``corpus.jsonl`` (``_id``, ``title``, ``text``, optional ``metadata``), ``queries.jsonl``
(``_id``, ``text``, optional ``metadata``) and ``qrels/<split>.tsv`` (a header line, then
``query-id <TAB> corpus-id <TAB> score``). What the loader builds:

- one space named after the folder, holding one fact per document: content ``title + " " +
  text`` (BEIR's own convention for dense retrievers; the text alone when the title is empty),
  key = ``_id``;
- one question per query that the split's qrels judge, asked of that space; evidence = the
  documents judged relevant (score > 0; graded relevance is read as binary, as recall is). A
  query the split does not judge is left out and counted (``info["queries_not_in_split"]``);
  qrels naming an unknown query or document are :class:`~experiments.data.jsonl.FormatError`
  (file and line), as in the jsonl format.

    >>> from pathlib import Path
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()) / "tiny"
    >>> (d / "qrels").mkdir(parents=True)
    >>> _ = (d / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\\n'
    ...                                   '{"_id": "d2", "title": "", "text": "y"}\\n')
    >>> _ = (d / "queries.jsonl").write_text('{"_id": "q1", "text": "y?"}\\n')
    >>> _ = (d / "qrels" / "test.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td2\\t1\\n")
    >>> ds = load_beir(d)
    >>> [m.content for m in ds.memories], ds.queries[0].gold_keys, ds.spaces[0].space_id
    (['T x', 'y'], ('d2',), 'tiny')
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.data.files import sha256_file
from experiments.data.jsonl import Field, FormatError, _id, _records, _str
from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"


def _object_or_none(value: Any) -> str | None:
    return None if value is None or isinstance(value, dict) else "must be a JSON object"


CORPUS_FIELDS = {"_id": Field(True, _id), "title": Field(False, _str),
                 "text": Field(True, _str), "metadata": Field(False, _object_or_none)}
QUERY_FIELDS = {"_id": Field(True, _id), "text": Field(True, _str),
                "metadata": Field(False, _object_or_none)}


def is_beir_dir(root: Path) -> bool:
    """Whether ``root`` has BEIR's three parts."""
    return ((root / CORPUS_FILE).is_file() and (root / QUERIES_FILE).is_file()
            and (root / QRELS_DIR).is_dir())


def load_beir(root: str | Path, split: str = "test") -> Dataset:
    """The BEIR collection in ``root`` (module docstring), judged by ``qrels/<split>.tsv``."""
    root = Path(root)
    qrels_path = root / QRELS_DIR / f"{split}.tsv"
    if not qrels_path.is_file():
        have = sorted(p.stem for p in (root / QRELS_DIR).glob("*.tsv"))
        raise FormatError(qrels_path, None, None, "missing_file",
                          f"no qrels for split {split!r} (data.split; this folder has "
                          f"{', '.join(have) or 'none'})")
    space = root.resolve().name
    memories: list[MemoryDef] = []
    for _, r in _records(root / CORPUS_FILE, CORPUS_FIELDS, "_id"):
        title = (r.get("title") or "").strip()
        content = f"{title} {r['text']}" if title else r["text"]
        memories.append(MemoryDef(key=r["_id"], space_id=space, content=content))
    keys = {m.key for m in memories}
    texts = {r["_id"]: r["text"] for _, r in _records(root / QUERIES_FILE, QUERY_FIELDS, "_id")}
    judged: dict[str, list[str]] = defaultdict(list)
    with qrels_path.open("r", encoding="utf-8", newline="") as handle:
        for no, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if no == 1 and row[:1] == ["query-id"]:
                continue
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise FormatError(qrels_path, no, None, "wrong_type",
                                  f"expected 3 tab-separated columns, got {len(row)}")
            qid, doc, grade = row
            if qid not in texts:
                raise FormatError(qrels_path, no, "query-id", "dangling_reference",
                                  f"names query {qid!r}, which {QUERIES_FILE} does not hold")
            if doc not in keys:
                raise FormatError(qrels_path, no, "corpus-id", "dangling_reference",
                                  f"names document {doc!r}, which {CORPUS_FILE} does not hold")
            try:
                relevant = float(grade) > 0
            except ValueError:
                raise FormatError(qrels_path, no, "score", "wrong_type",
                                  f"must be a number, got {grade!r}") from None
            judged.setdefault(qid, [])
            if relevant and doc not in judged[qid]:
                judged[qid].append(doc)
    queries = [QueryDef(query_id=qid, text=text, gold_space=space,
                        gold_keys=tuple(judged[qid]), conversation=space)
               for qid, text in texts.items() if qid in judged]
    files = [root / CORPUS_FILE, root / QUERIES_FILE, qrels_path]
    info = {"format": "beir", "path": str(root), "split": split, "documents": len(memories),
            "queries": len(queries), "queries_not_in_split": len(texts) - len(queries),
            "judged_without_relevant": sum(1 for q in queries if not q.gold_keys),
            "content": "title + ' ' + text (the text alone when the title is empty)"}
    return Dataset(name=f"beir-{space}", spaces=(SpaceDef(space, f"BEIR collection {space}"),),
                   memories=tuple(memories), queries=tuple(queries),
                   source_sha256=MappingProxyType({
                       str(p.relative_to(root)): sha256_file(p) for p in files}),
                   info=MappingProxyType(info))
