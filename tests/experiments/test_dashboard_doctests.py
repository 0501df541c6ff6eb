"""The dashboard's docstring examples run: every module of ``experiments.dashboard`` (pages
included), so an example that no longer holds fails here.

Importing a page module imports Streamlit but runs nothing: a page draws only when called.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import experiments.dashboard

MODULES = sorted(m.name for m in pkgutil.walk_packages(experiments.dashboard.__path__,
                                                       "experiments.dashboard."))


def test_every_dashboard_module_is_listed():
    assert {"experiments.dashboard.receipts", "experiments.dashboard.pages.query"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
