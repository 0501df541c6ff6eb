"""Accurate mode's default scorer: a learned, calibrated model stacked on first-stage evidence.

For the top ``rerank.pool`` fused candidates the stage computes the features of
:mod:`memory_core.rerank.features` (each channel's score, rank, gap to the pool's best, z-score
within the pool and lead over the runner-up; fused score and rank, the best rank over the
channels, query-term coverage and IDF mass with their gaps to the pool's best, bigram hits,
entity and speaker overlap, time-window agreement, memory type, length, age, session
neighbours; optionally a cross-encoder's score) and a scikit-learn model turns each row into
``P(relevant)``:

    relevance_score = calibrated(HGB(features))

``HGB`` is a ``HistGradientBoostingClassifier`` (missing feature values are ``NaN``, handled by
the trees natively), wrapped in ``CalibratedClassifierCV`` (isotonic, folds split by question),
so a score of 0.8 means about 80% of such candidates were relevant on held-out questions
(the model card records the expected calibration error per dataset). Candidates are ordered by
that probability (ties keep the fused order); the ones beyond the pool are cut with a ``limit``
drop of stage ``rerank``, as the cross-encoder stage does.

Models live in a folder holding ``model.joblib`` (``{"format", "features", "model"}``) and
``card.json``; the default one ships inside the package (``trained/stacked_default/``) and is
rebuilt by ``python -m experiments.train_reranker`` (the exact command is in its card).
A folder that cannot be loaded, or whose features differ from the code's, is a 422
``model_unavailable`` naming the path. Only load model files you trust (joblib is pickle).

Example:
    >>> import numpy as np
    >>> from memory_core.types import Candidate, Channel, Ranked
    >>> class Coverage:                      # a toy model: the probability is term coverage
    ...     names = FEATURE_NAMES; uses_cross_encoder = False
    ...     def predict(self, features, memory_ids):
    ...         return features[:, FEATURE_NAMES.index("term_coverage")]
    ...     def identity(self): return {"model": "coverage"}
    >>> fused = Ranked((Candidate("mem_1", 0.03, 1, Channel.FUSED),
    ...                 Candidate("mem_2", 0.02, 2, Channel.FUSED)))
    >>> X = np.zeros((2, len(FEATURE_NAMES))); X[:, FEATURE_NAMES.index("term_coverage")] = [.2, .9]
    >>> out = score_pool(fused, X, Coverage(), 50)
    >>> [(c.memory_id, c.score, c.rank) for c in out.candidates]
    [('mem_2', 0.9, 1), ('mem_1', 0.2, 2)]
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memory_core.config import RerankScorer
from memory_core.errors import MemoryCoreError, invalid
from memory_core.rerank.features import FEATURE_NAMES, FeatureMismatch, check_names
from memory_core.rerank.pool import checked_scores, score_head
from memory_core.types import Candidate, Ranked

log = logging.getLogger(__name__)

MODEL_FILE = "model.joblib"
CARD_FILE = "card.json"
MODEL_FORMAT = "memory_core.stacked/1"
DEFAULT_MODEL_DIR = Path(__file__).resolve().parent / "trained" / "stacked_default"


@runtime_checkable
class RelevanceModel(Protocol):
    """Scores a pool's feature matrix: one probability of relevance per row, in order."""

    # read-only members: a plain attribute or a property (StackedModel's is computed) both fit
    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def uses_cross_encoder(self) -> bool: ...

    def predict(self, features: np.ndarray, memory_ids: Sequence[str]) -> Sequence[float]: ...

    def identity(self) -> dict[str, Any]: ...


class ScorerOutputError(ValueError):
    """A relevance model returned the wrong number of scores or a non-finite one."""


def score_pool(ranked: Ranked, features: np.ndarray, model: RelevanceModel,
               pool: int) -> Ranked:
    """Score the first ``pool`` candidates (``features``: their rows, in order) and order them
    by probability (ties: fused order); the rest become ``limit`` drops of stage ``rerank``
    (:func:`memory_core.rerank.pool.score_head`)."""
    n_head = len(ranked.candidates[:max(pool, 0)])
    if pool >= 1 and features.shape[0] != n_head:
        raise ValueError(f"{features.shape[0]} feature rows for {n_head} candidates")

    def predict(head: Sequence[Candidate]) -> list[float]:
        return checked_scores(model.predict(features, [c.memory_id for c in head]), len(head),
                              ScorerOutputError, "the relevance model", "rows")
    return score_head(ranked, pool, predict)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class StackedModel:
    """A loaded stacked model: the estimator, its feature names, card and file digest."""

    path: str
    estimator: Any = field(repr=False)
    names: tuple[str, ...]
    sha256: str
    card: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # the same trees as flat arrays (memory_core/rerank/flat_forest.py), used when they gave
    # the estimator's own probabilities on the probe rows at load; None: scikit-learn's path
    flat: Any = field(default=None, compare=False, repr=False)
    evaluator: str = "sklearn"

    @property
    def uses_cross_encoder(self) -> bool:
        return check_names(self.names)

    @property
    def model_id(self) -> str:
        """``<card name>@<first 12 hex of the model file's sha256>``."""
        name = (self.card or {}).get("name") or Path(self.path).name
        return f"{name}@{self.sha256[:12]}"

    def predict(self, features: np.ndarray, memory_ids: Sequence[str]) -> list[float]:
        if features.shape[0] == 0:
            return []
        if self.flat is not None:
            return self.flat.predict_proba(features).tolist()
        return [float(p) for p in self.estimator.predict_proba(features)[:, 1]]

    def identity(self) -> dict[str, Any]:
        card = self.card or {}
        return {"model": self.path, "scorer": RerankScorer.STACKED.value, "id": self.model_id,
                "sha256": self.sha256, "name": card.get("name"), "features": list(self.names),
                "evaluator": self.evaluator, "card": card or None}


def _unavailable(message: str) -> MemoryCoreError:
    return invalid("model_unavailable", message, "mode")


def load_stacked(path: str | Path | None = None) -> StackedModel:
    """Load a stacked model folder (``None``: the packaged default).

    Raises :class:`MemoryCoreError` (422, reason ``model_unavailable``) naming the path when
    the folder or its file is missing or unreadable, or its features are not the code's.
    """
    folder = Path(path).expanduser() if path is not None else DEFAULT_MODEL_DIR
    file = folder / MODEL_FILE
    if not file.is_file():
        raise _unavailable(f"no stacked relevance model at {file}; train one with `python -m "
                           "experiments.train_reranker` or set rerank.stacked_model")
    card_file = folder / CARD_FILE
    stamp = [(f.stat().st_mtime_ns, f.stat().st_size) if f.is_file() else None
             for f in (file, card_file)]
    return _load(str(folder.resolve()), tuple(stamp))


@functools.lru_cache(maxsize=8)
def _load(folder_name: str, stamp: tuple) -> StackedModel:
    """One load per folder and file version (``stamp``: mtime and size of the model file and
    card); engines opened on the same model share the read-only estimator."""
    folder = Path(folder_name)
    file = folder / MODEL_FILE
    import joblib

    try:
        blob = joblib.load(file)
    except Exception as exc:  # any unreadable file is reported with its path
        raise _unavailable(f"the stacked relevance model {file} could not be loaded: "
                           f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(blob, dict) or blob.get("format") != MODEL_FORMAT:
        raise _unavailable(f"{file} is not a {MODEL_FORMAT} model file")
    names = tuple(blob.get("features") or ())
    try:
        check_names(names)
    except FeatureMismatch as exc:
        raise _unavailable(f"{file}: {exc}") from exc
    card = None
    if (folder / CARD_FILE).is_file():
        card = json.loads((folder / CARD_FILE).read_text())
    flat, evaluator = _flat_forest(blob["model"], len(names))
    if flat is None:
        log.warning("stacked model %s is scored through scikit-learn: %s", file, evaluator)
    return StackedModel(str(folder), blob["model"], names, file_sha256(file), card, flat,
                        evaluator)


def _flat_forest(estimator: Any, n_columns: int) -> tuple[Any, str]:
    """The estimator as a :class:`~memory_core.rerank.flat_forest.FlatForest` when it can be
    flattened and gives exactly the estimator's probabilities on probe rows; otherwise None
    and the reason (logged at load, and ``evaluator`` in the engine's model identity, which
    every run records in its ``metrics.json``)."""
    from memory_core.rerank.sk_parts import flatten, probe_rows

    try:
        flat = flatten(estimator)
        if flat is None:
            return None, "sklearn (the model's form has no flat evaluator)"
        X = probe_rows(flat, n_columns)
        if not np.array_equal(flat.predict_proba(X), estimator.predict_proba(X)[:, 1]):
            return None, "sklearn (the flat evaluator differed on the probe rows)"
    except Exception as exc:  # logged at load and kept in the model identity, never hidden
        return None, f"sklearn (flat evaluator failed: {type(exc).__name__}: {exc})"
    return flat, "flat_forest"


def save_stacked(folder: str | Path, estimator: Any, names: Sequence[str],
                 card: dict[str, Any]) -> Path:
    """Write ``model.joblib`` and ``card.json`` (with the model file's sha256) into ``folder``."""
    import joblib

    check_names(names)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / MODEL_FILE
    joblib.dump({"format": MODEL_FORMAT, "features": list(names), "model": estimator}, file,
                compress=3)
    card = {**card, "features": list(names), "model_file": MODEL_FILE,
            "sha256": file_sha256(file)}
    (folder / CARD_FILE).write_text(json.dumps(card, indent=2, default=str) + "\n")
    return file


__all__ = ["DEFAULT_MODEL_DIR", "FEATURE_NAMES", "RelevanceModel", "ScorerOutputError",
           "StackedModel", "load_stacked", "save_stacked", "score_pool"]
