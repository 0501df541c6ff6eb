"""The doctests of every ``memory_core`` module run (one test per module that has any)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import memory_core

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _names() -> list[str]:
    out = [memory_core.__name__]
    for info in pkgutil.walk_packages(memory_core.__path__, prefix="memory_core."):
        if info.name.rpartition(".")[2] != "__main__":  # running it is the command itself
            out.append(info.name)
    return sorted(out)


def _with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    return [name for name in _names()
            if any(t.examples for t in finder.find(importlib.import_module(name)))]


MODULES = _with_examples()


def test_the_package_has_doctests():
    assert len(MODULES) >= 40


@pytest.mark.parametrize("name", MODULES)
def test_doctests_pass(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
