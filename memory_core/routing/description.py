"""Description router: the query against each space's description, in embedding space.

    fit_i = logit_i = cos(e(query), e(description_i))
    confidence_i = softmax(logit / T)_i            (T = routing.temperature)

A space without a description is described by its id. Description vectors are cached by
(space id, description), so each description is embedded once per engine.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from memory_core.config import RouterName
from memory_core.embed import Embedder
from memory_core.routing.base import RouteQuery, SpaceScore, softmax
from memory_core.types import Space, frozen_map


def description_text(space: Space) -> str:
    """The text embedded for a space: its description, or its id when it has none."""
    return space.description.strip() or space.space_id


class DescriptionRouter:
    """Space-description embedding similarity (see the module docstring)."""

    name = RouterName.DESCRIPTION.value

    def __init__(self, embedder: Embedder, temperature: float = 0.05):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.embedder = embedder
        self.temperature = temperature
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()

    def _description_vectors(self, spaces: Sequence[Space]) -> np.ndarray:
        keys = [(s.space_id, description_text(s)) for s in spaces]
        with self._lock:
            missing = [k for k in dict.fromkeys(keys) if k not in self._vectors]
        if missing:
            vecs = self.embedder.embed([text for _, text in missing])
            with self._lock:
                self._vectors.update(zip(missing, vecs, strict=True))
        with self._lock:
            return np.stack([self._vectors[k] for k in keys]).astype(np.float32, copy=False)

    def score(self, query: RouteQuery, spaces: Sequence[Space]) -> list[SpaceScore]:
        if not spaces:
            return []
        qv = query.vector if query.vector is not None else self.embedder.embed([query.text])[0]
        cos = self._description_vectors(spaces) @ np.asarray(qv, dtype=np.float32)
        conf = softmax(cos, self.temperature)
        return [SpaceScore(s.space_id, float(p), float(c), float(c),
                           frozen_map({"cosine": float(c)}))
                for s, c, p in zip(spaces, cos, conf, strict=True)]
