"""Fixtures of the service tests: a live, seeded ``memory-core serve``
(benchmarks/live_service.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchmarks.live_service import LiveService, start_service


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[LiveService]:
    """alice owns ``pay`` (bob viewer, dave developer); carol owns ``carol-notes``; eve has a
    key and no space."""
    with start_service(tmp_path_factory.mktemp("svc"),
                       ("alice", "bob", "carol", "dave", "eve")) as svc:
        with svc.client("alice") as c:
            assert c.post("/v1/spaces", json={
                "space_id": "pay", "description": "Payments team: billing, invoices",
                "members": {"bob": "viewer", "dave": "developer"}}).status_code == 201
        with svc.client("carol") as c:
            assert c.post("/v1/spaces", json={"space_id": "carol-notes",
                                              "description": "Carol's notes"}).status_code == 201
            assert c.post("/v1/spaces/carol-notes/memories", json={"items": [
                {"content": "Carol's secret: the launch moves to March."}]}).status_code == 201
        yield svc
