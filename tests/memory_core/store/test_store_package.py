"""The ``memory_core.store`` package: one facade over per-table query classes (issue 14)."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import memory_core.store as store_pkg
from memory_core.store import Store
from memory_core.store.db import Database

QUERY_MODULES = ("memories", "sessions", "entities", "search", "spaces", "receipts")

# every name other modules, tests, experiments and the app imported from the single-file
# store.py, and the private ones tests reach for: all must stay importable from the package
FORMER_NAMES = (
    "SCHEMA", "SCHEMA_VERSION", "PAGE_SIZE", "MINHASH_STORED", "MEMORY_ID_PREFIX", "NewMemory",
    "SqlFilter", "Store", "entity_key", "memory_id_of", "rowid_of", "pack_minhash",
    "unpack_minhash", "pad_instant", "_TURN_ORDER_AFTER", "_TURN_ORDER_BEFORE",
    "_refresh_turn_context", "_write_contexts", "_rebuild_fulltext", "_migrate_vectors",
    "_migrate_instants", "_INSTANT_COLUMNS", "_MEMORY_COLUMNS", "_DAMAGE_WORDS", "_is_damage",
    "_matrix", "_chunks", "_space", "_memory",
)


@pytest.mark.parametrize("name", FORMER_NAMES)
def test_every_former_store_name_is_still_importable(name):
    assert hasattr(store_pkg, name), name


def test_query_classes_share_no_method_names():
    """Each query class owns its methods: a name defined twice would be settled silently by
    the method resolution order of :class:`Store`, so it is refused here."""
    owners: dict[str, str] = {}
    for base in Store.__mro__[1:]:
        if base in (Database, object):
            continue
        for name, value in vars(base).items():
            if inspect.isfunction(value):
                assert name not in owners, f"{name} in {base.__name__} and {owners[name]}"
                owners[name] = base.__name__
    assert {"insert_batch", "keyword_search", "get_space", "list_receipts",
            "session_neighbours", "entity_keys"} <= owners.keys()


@pytest.mark.parametrize("module", QUERY_MODULES)
def test_each_query_class_builds_on_the_one_database(module):
    mod = importlib.import_module(f"memory_core.store.{module}")
    classes = [c for c in vars(mod).values()
               if inspect.isclass(c) and c.__module__ == mod.__name__ and issubclass(c, Database)]
    assert len(classes) == 1
    assert classes[0] in Store.__mro__


@pytest.mark.parametrize("module", ("ids", "minhash", "schema"))
def test_store_doctests_pass(module):
    result = doctest.testmod(importlib.import_module(f"memory_core.store.{module}"))
    assert result.attempted > 0
    assert result.failed == 0


def test_the_facade_round_trips_a_space_and_a_meta_value():
    store = Store(":memory:")
    store.set_meta("k", "v")
    assert store.get_meta("k") == "v"
    assert store.get_meta("schema_version") == str(store_pkg.SCHEMA_VERSION)
    assert store.list_spaces() == [] and store.versions() == {}
    store.close()
