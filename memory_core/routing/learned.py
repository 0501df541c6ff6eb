"""Learned router: a calibrated scikit-learn classifier over the other routers' signals.

For each offered space ``i`` the features (:data:`FEATURES`) are the description router's
cosine ``c_i``, the evidence router's best / top-3 cosine ``d_i`` and relative BM25, each also as
a margin over the best *other* space (``c_i - max_{j != i} c_j``) and as an inverse rank, plus
``log(n_spaces)``. The model is ``StandardScaler -> LogisticRegression`` wrapped in
``CalibratedClassifierCV`` (Platt sigmoid by default), trained on (query, space) rows labelled
"this space holds the answer", so

    confidence_i = fit_i = P(space i holds the answer | features_i)     (calibrated)
    logit_i      = log(p_i / (1 - p_i))

The probabilities are independent per space: a question spanning two spaces can make both
confident, and an unanswerable one can make none fit. The routing experiment trains it on a
training split (``experiments/routing.py``) and saves it with the run (:func:`save_model`,
joblib plus a JSON model card); the engine loads it from ``routing.model_path``. A missing or
unloadable model raises :class:`RouterUnavailable` (422 ``no_route_target`` /
``model_unavailable``).

Training (what the experiment does)::

    >>> X, y = feature_rows(desc_scores, evidence_scores), labels   # doctest: +SKIP
    >>> model = train_model(X, y, seed=0)                          # doctest: +SKIP
    >>> save_model(model, "run/models/routing_learned.joblib", card={...})  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_core.config import RouterName
from memory_core.routing.base import (RouteQuery, RouterUnavailable, SpaceScore, logit_of,
                                      rank_order)
from memory_core.routing.description import DescriptionRouter
from memory_core.routing.evidence import EvidenceRouter
from memory_core.types import Space, frozen_map

FORMAT = "memory_core.routing.learned/1"
FEATURES = ("desc_cosine", "desc_margin", "desc_rank_inv", "dense_best", "dense_top3",
            "dense_margin", "dense_rank_inv", "keyword_rel", "keyword_rank_inv", "log_spaces")


def _margins(values: Sequence[float]) -> list[float]:
    """``v_i - max_{j != i} v_j`` (``v_i`` itself when there is no other value)."""
    out = []
    for i, v in enumerate(values):
        others = [w for j, w in enumerate(values) if j != i]
        out.append(v - max(others) if others else v)
    return out


def feature_rows(desc: Sequence[SpaceScore], evidence: Sequence[SpaceScore]) -> np.ndarray:
    """The feature matrix (one row per space, columns :data:`FEATURES`) for one query.

    ``desc`` and ``evidence`` are the two routers' scores for the same spaces in the same order.
    """
    if [s.space_id for s in desc] != [s.space_id for s in evidence]:
        raise ValueError("description and evidence scores must list the same spaces in order")
    cos = [float(s.features["cosine"]) for s in desc]
    dense = [float(s.features["dense_best"]) for s in evidence]
    top3 = [float(s.features["dense_top3"]) for s in evidence]
    kw = [float(s.features["keyword_rel"]) for s in evidence]
    cos_rank, dense_rank, kw_rank = rank_order(cos), rank_order(dense), rank_order(kw)
    n = len(desc)
    rows = [[c, cm, 1.0 / cr, d, t, dm, 1.0 / dr, k, (1.0 / kr if k > 0 else 0.0), math.log(n)]
            for c, cm, cr, d, t, dm, dr, k, kr in zip(
                cos, _margins(cos), cos_rank, dense, top3, _margins(dense), dense_rank, kw,
                kw_rank, strict=True)]
    return np.asarray(rows, dtype=np.float64).reshape(n, len(FEATURES))


def train_model(X: np.ndarray, y: np.ndarray, seed: int = 0, method: str = "sigmoid",
                cv: int = 3, C: float = 1.0):
    """Fit ``CalibratedClassifierCV(StandardScaler -> LogisticRegression)`` on (space, label) rows.

    ``cv`` is lowered to the minority class count when needed; fewer than 2 rows of either
    class is a ``ValueError`` (a calibrated model cannot be fitted).
    """
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(y, dtype=int)
    counts = np.bincount(y, minlength=2)
    folds = min(cv, int(counts.min()))
    if folds < 2:
        raise ValueError(f"too few training rows to fit a calibrated router: {int(counts[1])} "
                         f"positive, {int(counts[0])} negative (need >= 2 of each)")
    base = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000,
                                                              random_state=seed))
    model = CalibratedClassifierCV(base, method=method,
                                   cv=StratifiedKFold(folds, shuffle=True, random_state=seed))
    return model.fit(np.asarray(X, dtype=np.float64), y)


def save_model(model: Any, path: str | Path, card: Mapping[str, Any]) -> Path:
    """Write the model (joblib) and its card (``<path>.json``); returns the model path."""
    import joblib
    import sklearn

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    full_card = {"format": FORMAT, "features": list(FEATURES),
                 "sklearn_version": sklearn.__version__, **dict(card)}
    joblib.dump({"format": FORMAT, "features": list(FEATURES), "model": model,
                 "card": full_card}, path)
    path.with_suffix(path.suffix + ".json").write_text(json.dumps(full_card, indent=2,
                                                                  default=str))
    return path


def load_model(path: str | Path | None) -> tuple[Any, dict[str, Any]]:
    """The model and its card from :func:`save_model`'s file; :class:`RouterUnavailable` when
    the path is unset or missing, the file does not load, or it is not a router model for
    these features. Only load model files you trust (joblib files are pickles)."""
    if not path:
        raise RouterUnavailable("the learned router has no model: set routing.model_path to a "
                                "model trained by experiments.routing")
    path = Path(path).expanduser()
    if not path.is_file():
        raise RouterUnavailable(f"learned router model not found: {path}")
    import joblib

    try:
        blob = joblib.load(path)
    except Exception as exc:  # any unpickling failure means the model is unavailable
        raise RouterUnavailable(f"learned router model {path} could not be loaded: "
                                f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(blob, Mapping) or blob.get("format") != FORMAT:
        raise RouterUnavailable(f"{path} is not a {FORMAT} model file")
    if list(blob.get("features") or ()) != list(FEATURES):
        raise RouterUnavailable(f"{path} was trained on features {blob.get('features')}, this "
                                f"engine computes {list(FEATURES)}")
    if not hasattr(blob.get("model"), "predict_proba"):
        raise RouterUnavailable(f"{path} holds no probabilistic classifier")
    return blob["model"], dict(blob.get("card") or {})


class LearnedRouter:
    """Calibrated probabilities over the description and evidence routers' signals."""

    name = RouterName.LEARNED.value

    def __init__(self, description: DescriptionRouter, evidence: EvidenceRouter,
                 model_path: str | Path | None = None, model: Any = None):
        self.description = description
        self.evidence = evidence
        self.model_path = None if model_path is None else str(model_path)
        self._model = model
        self.card: dict[str, Any] = {}
        self._lock = threading.Lock()

    def model(self) -> Any:
        """The classifier, loaded on first use (:class:`RouterUnavailable` if it cannot be)."""
        with self._lock:
            if self._model is None:
                self._model, self.card = load_model(self.model_path)
            return self._model

    def score(self, query: RouteQuery, spaces: Sequence[Space]) -> list[SpaceScore]:
        if not spaces:
            return []
        model = self.model()
        desc = self.description.score(query, spaces)
        ev = self.evidence.score(query, spaces)
        X = feature_rows(desc, ev)
        try:
            proba = model.predict_proba(X)[:, 1]
        except Exception as exc:  # a model that loads but cannot predict is unavailable too
            raise RouterUnavailable(f"learned router model failed to predict: "
                                    f"{type(exc).__name__}: {exc}") from exc
        return [SpaceScore(s.space_id, float(p), float(p), logit_of(float(p)),
                           frozen_map(dict(zip(FEATURES, map(float, row), strict=True))))
                for s, p, row in zip(spaces, proba, X, strict=True)]
