"""Data-directory resolution and the sha256 check shared by every benchmark loader."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from experiments.data.files import (
    DATA_DIR_ENV,
    DatasetError,
    read_json,
    read_jsonl,
    resolve_data_dir,
    sha256_file,
    verify,
)


def test_configured_value_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, "/from/env")
    assert resolve_data_dir("/from/config") == Path("/from/config")


def test_environment_is_used_when_config_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, "/from/env")
    assert resolve_data_dir(None) == Path("/from/env")
    assert resolve_data_dir("") == Path("/from/env")  # an empty config value counts as unset


def test_no_config_and_no_environment_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    assert resolve_data_dir(None) is None
    monkeypatch.setenv(DATA_DIR_ENV, "   ")
    assert resolve_data_dir(None) is None


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    assert resolve_data_dir("~/data") == Path("/home/someone/data")


def test_sha256_file_matches_hashlib(tmp_path: Path) -> None:
    payload = b"memory" * 400_000  # larger than one 1 MiB read chunk
    path = tmp_path / "blob.bin"
    path.write_bytes(payload)
    assert sha256_file(path) == hashlib.sha256(payload).hexdigest()


def test_verify_returns_the_digest_when_it_matches(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("[]", encoding="utf-8")
    digest = hashlib.sha256(b"[]").hexdigest()
    assert verify(path, digest) == digest
    assert verify(path, digest.upper()) == digest  # hex case does not matter


def test_verify_with_no_expected_digest_skips_the_comparison(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("[]", encoding="utf-8")
    assert verify(path, None) == hashlib.sha256(b"[]").hexdigest()


def test_missing_file_names_the_path_and_the_card(tmp_path: Path) -> None:
    path = tmp_path / "locomo" / "locomo10.json"
    with pytest.raises(DatasetError) as err:
        verify(path, None, card="datasets/locomo.md")
    message = str(err.value)
    assert f"not found at {path}" in message
    assert "see datasets/locomo.md for how to obtain it" in message


def test_wrong_hash_reports_expected_and_actual(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("[1]", encoding="utf-8")
    actual = hashlib.sha256(b"[1]").hexdigest()
    with pytest.raises(DatasetError) as err:
        verify(path, "0" * 64, card="datasets/locomo.md")
    assert actual in str(err.value) and "0" * 64 in str(err.value)


def test_dataset_error_is_a_runtime_error() -> None:
    assert issubclass(DatasetError, RuntimeError)


def test_unparseable_json_is_a_dataset_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DatasetError, match="not valid UTF-8 JSON"):
        read_json(path)


def test_jsonl_skips_blank_lines_and_reports_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"b": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"a": 1}, {"b": 2}]
    path.write_text('{"a": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"rows.jsonl:2"):
        read_jsonl(path)
