"""Where accurate mode's cross-encoder comes from: offline-first model resolution.

Resolution order for a :class:`~memory_core.config.RerankSpec`:

1. ``model`` is an existing local folder -> that folder.
2. ``model`` is a Hugging Face id -> used only if it is already in the local hub cache, or if a
   hub may be reached (``HF_HUB_OFFLINE`` unset). With ``HF_HUB_OFFLINE=1`` and no cached copy
   this is a 422 ``validation_error`` (reason ``model_unavailable``): nothing is downloaded.
3. ``model`` is ``None`` -> the project's own cross-encoder, trained from the packaged MiniLM
   weights by ``python -m experiments.train_reranker`` and cached under
   ``<cache>/rerankers/<trained>/`` next to its model card (``card.json`` + ``MODEL_CARD.md``).
   A missing one is a 422 ``model_unavailable`` that says how to train it.

Nothing here loads weights; :class:`~memory_core.rerank.cross_encoder.CrossEncoderReranker`
loads them lazily on first use.

Example:
    >>> from memory_core.config import RerankSpec
    >>> resolve_model(RerankSpec(model="/no/such/folder"))  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    MemoryCoreError: 422 validation_error (model_unavailable): ...
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory_core.config import RerankSpec, default_cache_dir
from memory_core.errors import MemoryCoreError, invalid

CARD_JSON = "card.json"
CARD_MARKDOWN = "MODEL_CARD.md"
RERANKERS_DIR = "rerankers"
# weights files a saved cross-encoder folder must hold (one of them)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_TRUE = {"1", "ON", "YES", "TRUE"}

Source = Literal["path", "hub", "trained"]


@dataclass(frozen=True)
class ResolvedModel:
    """A cross-encoder the engine may load: ``location`` is a folder or a hub id."""

    location: str
    source: Source
    local_files_only: bool
    card: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return str(self.card.get("name")) if self.card else self.location


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) forbids reaching a hub."""
    return any(os.environ.get(v, "").strip().upper() in _TRUE
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def rerankers_root(cache_dir: str | None = None) -> Path:
    """``<cache>/rerankers``: where the project's trained cross-encoders live."""
    return default_cache_dir(cache_dir) / RERANKERS_DIR


def trained_model_dir(name: str, cache_dir: str | None = None) -> Path:
    """The folder of the project's trained cross-encoder ``name``."""
    return rerankers_root(cache_dir) / name


def is_saved_model(folder: Path) -> bool:
    """A folder holding a saved transformers model (config plus a weights file)."""
    return (folder / "config.json").is_file() and any((folder / f).is_file()
                                                        for f in WEIGHT_FILES)


def load_card(folder: Path) -> dict[str, Any] | None:
    """The model card ``card.json`` of a trained folder, or None when there is none."""
    path = folder / CARD_JSON
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _unavailable(message: str) -> MemoryCoreError:
    return invalid("model_unavailable", message, "mode")


def _in_hub_cache(model_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(model_id, "config.json")
    return isinstance(found, str)


def resolve_model(spec: RerankSpec) -> ResolvedModel:
    """Find the configured cross-encoder without loading or downloading anything.

    Raises :class:`MemoryCoreError` (422 ``validation_error``, reason ``model_unavailable``)
    with a message that says what is missing and how to get it.
    """
    if spec.model is None:
        folder = trained_model_dir(spec.trained, spec.cache_dir)
        if not is_saved_model(folder):
            raise _unavailable(
                f"no trained cross-encoder {spec.trained!r} at {folder}; train it once with "
                f"`python -m experiments.train_reranker name={spec.trained}` (`make run` does "
                "this automatically when accurate mode needs it), or set rerank.model to a "
                "local cross-encoder folder")
        return ResolvedModel(str(folder), "trained", True, load_card(folder))
    local = Path(spec.model).expanduser()
    if local.exists():
        if not is_saved_model(local):
            raise _unavailable(f"rerank.model={spec.model!r} is a path but holds no saved "
                               f"model (config.json and one of {', '.join(WEIGHT_FILES)})")
        return ResolvedModel(str(local), "path", True, load_card(local))
    if spec.model.startswith((".", "/", "~")) or not _HF_ID.match(spec.model):
        raise _unavailable(f"rerank.model={spec.model!r}: no such folder")
    if _in_hub_cache(spec.model):
        return ResolvedModel(spec.model, "hub", True, None)
    if hub_offline():
        raise _unavailable(f"rerank.model={spec.model!r} is not in the local Hugging Face cache "
                           "and HF_HUB_OFFLINE=1 forbids downloading it; point rerank.model at "
                           "a local folder or leave it unset to use the project's trained model")
    return ResolvedModel(spec.model, "hub", False, None)
