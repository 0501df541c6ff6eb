"""A learned linear map applied to the *query* vector of the dense channel.

A bi-encoder like MiniLM places a question and the conversation turn that answers it further
apart than two paraphrases. A query adapter is a matrix ``W`` (``d x d``) trained so that the
mapped question lands nearer its evidence turns (``experiments/train_adapter.py``)::

    q' = W q / ||W q||

Only the query moves: stored memory vectors are never touched, so a store embedded without an
adapter stays valid with one (no re-embedding), and turning it off is a config change. It is
the "linear adapter" of the embedding-adaptation literature (e.g. Chroma's *Embedding Adapters*
technical report, 2024), kept close to the identity by a penalty on ``||W - I||_F^2`` while
training.

Where it applies (``channels.query_adapter``): the retrieval query vector computed in
:func:`memory_core.pipeline.run` (the dense channel, the temporal channel's cosine order,
and escalation's rewritten vector, which starts from it; every subject of ``expand_query``).
Routing (``route="auto"``) embeds the query on its own and does **not** use the adapter: the
description router compares the question with space descriptions, and the evidence router's
probe of each space is part of choosing spaces, neither of which the adapter was trained for.
The retrieval of a routed read, once the spaces are chosen, goes through the pipeline and is
adapted like an addressed one.

File format: a NumPy ``.npz`` (no pickles) holding ``format`` (:data:`FORMAT`) and ``matrix``
(``float32``, ``d x d``). ``packaged:<name>`` names ``memory_core/adapters/<name>.npz``; any
other value is a file path.

Example:
    >>> import numpy as np
    >>> adapter = QueryAdapter(np.eye(2, dtype=np.float32), "eye", "0" * 64)
    >>> [round(float(x), 2) for x in adapter.apply(np.array([[3.0, 4.0]], dtype=np.float32))[0]]
    [0.6, 0.8]
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory_core.errors import MemoryCoreError, invalid

FORMAT = "memory_core.query_adapter/1"  # the file format tag (not a module path)
PACKAGED_PREFIX = "packaged:"
PACKAGED_DIR = Path(__file__).resolve().parents[1] / "adapters"
# the smallest singular value a loadable matrix may have: W q can then never vanish for a unit
# q, so the normalisation in apply() needs no fallback (a trained adapter is near the identity)
MIN_SINGULAR_VALUE = 1e-3
FIELD = "channels.query_adapter"
REASON = "query_adapter_unavailable"


@dataclass(frozen=True)
class QueryAdapter:
    """A loaded adapter: the matrix, where it came from and the file's sha256."""

    matrix: np.ndarray  # (d, d) float32
    source: str
    sha256: str

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[0])

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Rows ``q`` -> ``W q / ||W q||`` (float32, C-contiguous)."""
        mapped = np.asarray(vectors, dtype=np.float32) @ self.matrix.T
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        return np.ascontiguousarray(mapped / norms, dtype=np.float32)

    def identity(self) -> dict[str, str]:
        """For reports: ``{"query_adapter": source, "sha256": ...}``."""
        return {"query_adapter": self.source, "sha256": self.sha256}


def resolve_adapter_path(ref: str) -> Path:
    """``packaged:<name>`` -> ``memory_core/adapters/<name>.npz``; anything else a path."""
    if ref.startswith(PACKAGED_PREFIX):
        name = ref[len(PACKAGED_PREFIX):]
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise _unavailable(f"{ref!r} is not a packaged adapter name")
        return PACKAGED_DIR / f"{name}.npz"
    return Path(ref).expanduser()


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_query_adapter(ref: str, dim: int) -> QueryAdapter:
    """Load and check the adapter ``ref`` names for an embedder of ``dim`` dimensions.

    Raises:
        MemoryCoreError: 422 ``validation_error``, reason ``query_adapter_unavailable``, when
            the file is missing or unreadable, is not a :data:`FORMAT` file, has the wrong
            shape, holds non-finite values or a (near-)singular matrix. Never a silent
            fallback to the plain query vector.
    """
    path = resolve_adapter_path(ref)
    if not path.is_file():
        raise _unavailable(f"no query adapter file at {path} (channels.query_adapter={ref!r}); "
                           "train one with `python -m experiments.train_adapter`")
    try:
        with np.load(path, allow_pickle=False) as blob:
            fmt = str(blob["format"]) if "format" in blob.files else None
            if "matrix" not in blob.files:
                raise _unavailable(f"{path} holds no 'matrix' array")
            matrix = np.array(blob["matrix"], dtype=np.float32)
    except MemoryCoreError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _unavailable(f"query adapter {path} could not be read: {exc}") from exc
    if fmt != FORMAT:
        raise _unavailable(f"{path} is not a {FORMAT} file (format {fmt!r})")
    if matrix.shape != (dim, dim):
        raise _unavailable(f"query adapter {path} is {matrix.shape}, the embedder needs "
                           f"({dim}, {dim})")
    if not np.isfinite(matrix).all():
        raise _unavailable(f"query adapter {path} holds non-finite values")
    smallest = float(np.linalg.svd(matrix.astype(np.float64), compute_uv=False)[-1])
    if smallest < MIN_SINGULAR_VALUE:
        raise _unavailable(f"query adapter {path} is (near-)singular: smallest singular value "
                           f"{smallest:.2e} < {MIN_SINGULAR_VALUE}")
    return QueryAdapter(np.ascontiguousarray(matrix), ref, file_sha256(path))


def adapter_from_ref(ref: str | None, dim: int) -> QueryAdapter | None:
    """``channels.query_adapter``: None (off) or the loaded adapter."""
    return None if ref is None else load_query_adapter(ref, dim)


def save_query_adapter(path: Path, matrix: np.ndarray) -> str:
    """Write ``matrix`` as a :data:`FORMAT` ``.npz`` (uncompressed) and return the file's
    sha256. NumPy writes its zip entries with a fixed date, so the same matrix gives the same
    bytes; :func:`matrix_sha256` names the weights alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.savez(fh, format=np.array(FORMAT), matrix=np.asarray(matrix, dtype=np.float32))
    return file_sha256(path)


def matrix_sha256(matrix: np.ndarray) -> str:
    """sha256 of the float32 matrix bytes (C order): the same for the same weights."""
    return hashlib.sha256(np.ascontiguousarray(matrix, dtype=np.float32).tobytes()).hexdigest()


def _unavailable(message: str) -> MemoryCoreError:
    return invalid(REASON, message, FIELD)
