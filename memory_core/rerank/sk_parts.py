"""scikit-learn parts of the stacked model that must be importable when it is unpickled.

Imported only when a stacked model is trained or loaded (it imports scikit-learn).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin


class DropEmptyColumns(TransformerMixin, BaseEstimator):
    """Keep the columns that held at least one finite value in training.

    ``HistGradientBoostingClassifier`` cannot bin a column that is missing (NaN) in every
    training row (e.g. a channel no training source produces, or a speaker feature on data
    without speakers); such a column carries no evidence, so it is dropped, and the kept
    column indices are stored, so serving drops the same ones.

    Example:
        >>> X = np.array([[1.0, np.nan], [2.0, np.nan]])
        >>> DropEmptyColumns().fit(X).transform(np.array([[3.0, 4.0]]))
        array([[3.]])
    """

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=np.float64)
        self.kept_ = np.flatnonzero(np.isfinite(X).any(axis=0))
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        X = np.asarray(X, dtype=np.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"expected {self.n_features_in_} feature columns, got {X.shape[1]}")
        return X[:, self.kept_]


def flatten(estimator: Any) -> Any:
    """A :class:`~memory_core.rerank.flat_forest.FlatForest` of a fitted
    ``CalibratedClassifierCV(Pipeline(DropEmptyColumns, HistGradientBoostingClassifier),
    method="isotonic", ensemble=False)`` on two classes, or None for anything else (then
    scikit-learn's own ``predict_proba`` is used)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.isotonic import IsotonicRegression
    from sklearn.pipeline import Pipeline

    from memory_core.rerank.flat_forest import FlatForest

    if not isinstance(estimator, CalibratedClassifierCV):
        return None
    fitted: Any = estimator.calibrated_classifiers_
    if len(fitted) != 1:
        return None
    cc: Any = fitted[0]
    pipe = cc.estimator
    if list(cc.classes) != [0, 1] or len(cc.calibrators) != 1 \
            or not isinstance(cc.calibrators[0], IsotonicRegression) \
            or cc.calibrators[0].out_of_bounds != "clip" \
            or not isinstance(pipe, Pipeline) or len(pipe.steps) != 2 \
            or not isinstance(pipe.steps[0][1], DropEmptyColumns) \
            or not isinstance(pipe.steps[1][1], HistGradientBoostingClassifier):
        return None
    drop, hgb = pipe.steps[0][1], pipe.steps[1][1]
    if getattr(hgb, "is_categorical_", None) is not None or hgb.n_trees_per_iteration_ != 1:
        return None
    parts, roots, offset = [], [], 0
    for (predictor,) in hgb._predictors:
        nodes = predictor.nodes
        if nodes["is_categorical"].any():
            return None
        roots.append(offset)
        parts.append((nodes, offset))
        offset += len(nodes)
    cat = np.concatenate
    iso = cc.calibrators[0]
    return FlatForest(
        n_columns=int(drop.n_features_in_),
        kept=np.asarray(drop.kept_, dtype=np.intp),
        feature=cat([n["feature_idx"].astype(np.intp) for n, _ in parts]),
        threshold=cat([n["num_threshold"].astype(np.float64) for n, _ in parts]),
        missing_left=cat([n["missing_go_to_left"].astype(bool) for n, _ in parts]),
        left=cat([n["left"].astype(np.intp) + o for n, o in parts]),
        right=cat([n["right"].astype(np.intp) + o for n, o in parts]),
        is_leaf=cat([n["is_leaf"].astype(bool) for n, _ in parts]),
        value=cat([n["value"].astype(np.float64) for n, _ in parts]),
        roots=np.asarray(roots, dtype=np.intp),
        baseline=float(np.ravel(hgb._baseline_prediction)[0]),
        depth=int(max(n["depth"].max() for n, _ in parts)) + 1,
        iso_x=np.asarray(iso.X_thresholds_, dtype=np.float64),
        iso_y=np.asarray(iso.y_thresholds_, dtype=np.float64))


def probe_rows(forest, n_columns: int, seed: int = 0) -> np.ndarray:
    """Rows that visit both sides of many splits (each value near some split threshold of
    its column, or NaN), to check a flat forest against its estimator."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0.0, 3.0, size=(256, n_columns))
    inner = ~forest.is_leaf
    for j, col in enumerate(forest.kept):
        thr = forest.threshold[inner & (forest.feature == j)]
        if len(thr):
            pick = rng.choice(thr, size=256) + rng.choice([-1e-9, 0.0, 1e-9], size=256)
            X[:, col] = np.where(rng.random(256) < 0.6, pick, X[:, col])
    X[rng.random(X.shape) < 0.15] = np.nan
    return X
