"""scikit-learn parts of the stacked model that must be importable when it is unpickled.

Imported only when a stacked model is trained or loaded (it imports scikit-learn).
"""

from __future__ import annotations

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
