"""The stacked model's trees and calibration as flat numpy arrays, for pools of a few dozen rows.

scikit-learn's ``HistGradientBoostingClassifier.predict_proba`` costs 5-14 ms on a 50-row pool
on 2 cores: input validation, one call per tree (200) and an OpenMP pool started for each,
then the calibrator. Accurate mode scores one such pool per read, so that overhead was most of
its cost (bar: accurate p50 <= 3x fast). :class:`FlatForest` holds the same trees as arrays
(every tree's nodes side by side) and walks all rows through all trees at once, one numpy step
per tree level, then sums the leaf values tree by tree in the estimator's order (the same
float additions) and applies the isotonic calibrator by linear interpolation.

It is built from a fitted model by :func:`memory_core.rerank.sk_parts.flatten` and is used only
after it reproduces the estimator's probabilities on a probe set (``StackedModel``): anything
it cannot represent (categorical splits, a sigmoid calibrator, an ensemble of calibrated
models) keeps scikit-learn's own path.

Example:
    >>> import numpy as np
    >>> # one stump: x0 <= 0.5 -> leaf 1 (value -1), else leaf 2 (value +1); NaN goes right
    >>> f = FlatForest(n_columns=1, kept=np.array([0]), feature=np.array([0, 0, 0]),
    ...                threshold=np.array([0.5, 0.0, 0.0]),
    ...                missing_left=np.array([False, False, False]),
    ...                left=np.array([1, 0, 0]), right=np.array([2, 0, 0]),
    ...                is_leaf=np.array([False, True, True]), value=np.array([0.0, -1.0, 1.0]),
    ...                roots=np.array([0]), baseline=0.0, depth=1,
    ...                iso_x=np.array([-1.0, 1.0]), iso_y=np.array([0.1, 0.9]))
    >>> f.predict_proba(np.array([[0.2], [0.9], [np.nan]])).round(2).tolist()
    [0.1, 0.9, 0.9]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FlatForest:
    """Every tree's nodes in one set of arrays (node ``i``: split on ``feature[i]`` at
    ``threshold[i]``, NaN to the left when ``missing_left[i]``, children ``left[i]`` /
    ``right[i]`` as global node indices, ``value[i]`` at a leaf); ``roots``: each tree's first
    node, in the estimator's order; ``n_columns``: the input width; ``kept``: the input
    columns the trees index (the model's empty-column drop); ``iso_x`` / ``iso_y``: the
    isotonic calibrator's breakpoints."""

    n_columns: int
    kept: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    is_leaf: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    baseline: float
    depth: int
    iso_x: np.ndarray
    iso_y: np.ndarray

    def raw(self, X: np.ndarray) -> np.ndarray:
        """The boosted log-odds of each row (baseline plus every tree's leaf, in order)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_columns:
            raise ValueError(f"expected {self.n_columns} feature columns, got shape {X.shape}")
        X = X[:, self.kept]
        n, trees = X.shape[0], len(self.roots)
        at = np.broadcast_to(self.roots, (n, trees)).copy()
        rows = np.arange(n)[:, None]
        for _ in range(self.depth):
            leaf = self.is_leaf[at]
            if leaf.all():
                break
            x = X[rows, self.feature[at]]
            go_left = np.where(np.isnan(x), self.missing_left[at], x <= self.threshold[at])
            at = np.where(leaf, at, np.where(go_left, self.left[at], self.right[at]))
        # sequential sums in tree order: the estimator's own float additions
        values = np.concatenate([np.full((n, 1), self.baseline), self.value[at]], axis=1)
        return np.cumsum(values, axis=1)[:, -1]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """``P(relevant)`` of each row: the isotonic map of :meth:`raw`, normalised as
        ``CalibratedClassifierCV`` normalises its two columns."""
        p = np.interp(self.raw(X), self.iso_x, self.iso_y)
        return p / ((1.0 - p) + p)
