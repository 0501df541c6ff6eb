"""The stacked model's flat evaluator gives scikit-learn's probabilities bit for bit
(memory_core/rerank/flat_forest.py, sk_parts.flatten)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from memory_core.rerank import sk_parts, stacked
from memory_core.rerank.stacked import load_stacked


def _fit(method: str = "isotonic", seed: int = 0):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 6))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:, 5] = np.nan                                   # an empty column, dropped in training
    y = ((np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1], nan=1.0)) > 0.3).astype(int)
    pipe = make_pipeline(sk_parts.DropEmptyColumns(), HistGradientBoostingClassifier(
        max_iter=30, max_leaf_nodes=7, min_samples_leaf=10, random_state=0))
    model = CalibratedClassifierCV(pipe, method=method, cv=3, ensemble=False)
    model.fit(X, y)
    return model, X


def test_the_packaged_model_runs_flat_and_gives_the_same_probabilities():
    model = load_stacked()
    assert model.evaluator == "flat_forest" and model.flat is not None
    rng = np.random.default_rng(1)
    X = rng.normal(0.0, 2.0, size=(50, len(model.names)))
    X[rng.random(X.shape) < 0.3] = np.nan
    want = model.estimator.predict_proba(X)[:, 1]
    assert np.array_equal(np.asarray(model.predict(X, ["m"] * 50)), want)
    assert model.identity()["evaluator"] == "flat_forest"


def test_a_fitted_model_flattens_exactly_including_missing_values_and_ties():
    model, X = _fit()
    flat = sk_parts.flatten(model)
    assert flat is not None and list(flat.kept) == [0, 1, 2, 3, 4]
    for rows in (X, sk_parts.probe_rows(flat, X.shape[1], seed=3)):
        assert np.array_equal(flat.predict_proba(rows), model.predict_proba(rows)[:, 1])
    # a value exactly on a split threshold goes left, as in scikit-learn
    j = int(flat.feature[flat.roots[0]])
    on = np.zeros((1, X.shape[1]))
    on[0, flat.kept[j]] = flat.threshold[flat.roots[0]]
    assert np.array_equal(flat.predict_proba(on), model.predict_proba(on)[:, 1])


def test_other_forms_keep_scikit_learns_path_and_say_so():
    sigmoid, _ = _fit("sigmoid")
    assert sk_parts.flatten(sigmoid) is None
    flat, evaluator = stacked._flat_forest(sigmoid, 6)
    assert flat is None and evaluator.startswith("sklearn (the model's form")


def test_a_flat_forest_that_differs_is_not_used(monkeypatch):
    model, _ = _fit()
    good = sk_parts.flatten(model)
    assert good is not None
    wrong = dataclasses.replace(good, value=good.value * 1.01)
    monkeypatch.setattr(sk_parts, "flatten", lambda est: wrong)
    flat, evaluator = stacked._flat_forest(model, 6)
    assert flat is None and "differed" in evaluator


def test_a_failing_flattener_is_recorded_not_raised(monkeypatch):
    model, _ = _fit()

    def broken(est):
        raise KeyError("nodes")

    monkeypatch.setattr(sk_parts, "flatten", broken)
    flat, evaluator = stacked._flat_forest(model, 6)
    assert flat is None and "KeyError" in evaluator


@pytest.mark.parametrize("n", [1, 7, 50])
def test_pool_sizes(n):
    model = load_stacked()
    X = np.random.default_rng(n).normal(size=(n, len(model.names)))
    assert np.array_equal(np.asarray(model.predict(X, ["m"] * n)),
                          model.estimator.predict_proba(X)[:, 1])


def test_a_matrix_of_the_wrong_width_is_refused_as_scikit_learn_refuses_it():
    model, X = _fit()
    flat = sk_parts.flatten(model)
    with pytest.raises(ValueError, match="6 feature columns"):
        flat.predict_proba(np.hstack([X, X[:, :1]]))
    with pytest.raises(ValueError):
        model.predict_proba(np.hstack([X, X[:, :1]]))
