"""API keys of a PostgreSQL store (issue 35), in its ``api_keys`` table: hashed as the file
keeps them, shared by every object (process) over the database, ``--keys FILE`` still an
explicit override, a refused principal writes nothing."""

from __future__ import annotations

import json

import pytest

from memory_core import MemoryCoreError
from memory_core.service.keys import DatabaseKeyStore, KeyStore, hash_key

pytestmark = pytest.mark.postgres


def test_keys_live_hashed_in_the_database_and_every_store_object_sees_them(pg_uri):
    import psycopg

    one, two = KeyStore.for_store(pg_uri), KeyStore.for_store(pg_uri)
    try:
        assert isinstance(one, DatabaseKeyStore) and str(one.path).startswith("the api_keys")
        assert one.records() == [] and two.principal_of("mck_" + "0" * 12 + "_" + "a" * 43) \
            is None
        alice = one.create("alice")
        assert two.principal_of(alice) == "alice"  # at once, no restart, no file
        assert two.principal_of(alice[:-1] + ("x" if alice[-1] != "x" else "y")) is None
        bob = two.create("bob")
        assert sorted((r.principal, r.sha256) for r in one.records()) == [
            ("alice", hash_key(alice)), ("bob", hash_key(bob))]
        with psycopg.connect(pg_uri) as conn:
            stored = conn.execute("SELECT * FROM api_keys").fetchall()
        assert alice not in repr(stored) and bob not in repr(stored)  # only hashes
        with pytest.raises(MemoryCoreError) as err:
            one.create("no spaces")
        assert err.value.reason == "invalid_principal" and len(two.records()) == 2
    finally:
        one.close()
        two.close()


def test_a_keys_file_still_overrides_the_database(pg_uri, tmp_path):
    file = KeyStore.for_store(pg_uri, tmp_path / "keys.json")
    table = KeyStore.for_store(pg_uri)
    try:
        assert not isinstance(file, DatabaseKeyStore)
        key = file.create("alice")
        assert [r["principal"] for r in json.loads(file.path.read_text())["keys"]] == ["alice"]
        assert table.principal_of(key) is None and table.records() == []
    finally:
        table.close()


def test_an_unreachable_database_is_503_and_the_keys_recover(tmp_path):
    """Its own server, stopped under a live key store: a check is 503 ``store_unavailable``
    (never a 401 that would read as a wrong key); started again, the same object works."""
    import shutil
    import tempfile
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server

        data = tempfile.mkdtemp(prefix="memory_core-pg-keys-")
        server = get_server(data, cleanup_mode="stop")
    keys = KeyStore.for_store(server.get_uri())
    try:
        key = keys.create("alice")
        server.cleanup()  # stops it
        with pytest.raises(MemoryCoreError) as err:
            keys.principal_of(key)
        assert err.value.status == 503 and err.value.code.value == "store_unavailable"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = get_server(data, cleanup_mode="delete")
        assert keys.principal_of(key) == "alice"
    finally:
        keys.close()
        server.cleanup()
        shutil.rmtree(data, ignore_errors=True)
