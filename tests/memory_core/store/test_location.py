"""Store locations (issue 35): a string that looks like a URL is never a directory."""

from __future__ import annotations

import os

import pytest

from memory_core import MemoryCoreError, MemoryEngine
from memory_core.cli import main
from memory_core.store.location import StoreKind, parse_location, redact_url


@pytest.mark.parametrize("text", [
    "postgresql://postgres:@/postgres?host=/tmp/x",
    "postgres://alice@db.example:5433/memories",
    "POSTGRESQL://u@h/d",
    "postgresql:///mem?host=/var/run/postgresql&port=5433",
])
def test_postgres_uris_name_a_database(text):
    loc = parse_location(text)
    assert loc.kind is StoreKind.POSTGRESQL and loc.text == text and loc.is_url


@pytest.mark.parametrize("text", ["./mem", "mem", "/data/store", "postgresql", "postgres:x",
                                  "C:/stores/mem"])
def test_paths_are_directories(text):
    assert parse_location(text).kind is StoreKind.DIRECTORY


@pytest.mark.parametrize("text", ["mysql://db/x", "sqlite:///tmp/x", "http://x/y",
                                  "file:///tmp/store"])
def test_other_schemes_are_a_typed_error_that_creates_nothing(text, tmp_path, monkeypatch,
                                                              hash_embedder):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MemoryCoreError) as err:
        MemoryEngine.open(text, embedder=hash_embedder)
    assert (err.value.status, err.value.reason, err.value.field) == (
        422, "unsupported_store", "store")
    assert os.listdir(tmp_path) == []


def test_a_postgres_url_never_becomes_a_directory(tmp_path, monkeypatch, hash_embedder):
    """The defect of issue 35: ``open("postgresql://...")`` made a directory ``postgresql:``."""
    monkeypatch.chdir(tmp_path)
    try:
        MemoryEngine.open("postgresql://postgres:@/postgres?host=/nonexistent/socket-dir",
                          embedder=hash_embedder).close()
    except MemoryCoreError:
        pass  # no server there: a typed error, and still nothing on disk
    assert os.listdir(tmp_path) == []


def test_the_cli_takes_a_url_store_for_no_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["recall", "--store", "mysql://h/d", "--space", "s", "q"])
    assert code == 1 and "unsupported_store" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_keys_of_a_url_store_go_to_its_database_never_beside_it(tmp_path, monkeypatch, capsys):
    """Without ``--keys`` a URL store's keys live in its database: one that cannot be reached
    is 503 ``store_unavailable`` (password left out), and no file is written instead."""
    pytest.importorskip("psycopg")
    monkeypatch.chdir(tmp_path)
    code = main(["keys", "create", "--store", "postgresql://u:s3cret@/db?host=/tmp/none",
                 "--principal", "alice"])
    err = capsys.readouterr().err
    assert code == 1 and "store_unavailable" in err and "s3cret" not in err
    assert os.listdir(tmp_path) == []


def test_passwords_stay_out_of_messages():
    assert redact_url("postgresql://bob:s3cret@db:5432/x?sslmode=require") == (
        "postgresql://bob:***@db:5432/x?sslmode=require")
    with pytest.raises(MemoryCoreError) as err:
        parse_location("mysql://bob:s3cret@db/x")
    assert "s3cret" not in err.value.message


def test_keys_of_a_url_store_go_to_the_file_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["keys", "create", "--store", "postgresql://u@/db?host=/tmp/none",
                 "--keys", "k.json", "--principal", "alice"])
    assert code == 0 and capsys.readouterr().out.startswith("mck_")
    assert os.listdir(tmp_path) == ["k.json"] or sorted(os.listdir(tmp_path))[0] == "k.json"
