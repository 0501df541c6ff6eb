"""Schemathesis: property-based requests generated from the service's OpenAPI schema, sent to a
live ``memory-core serve`` for every operation. No response may be a 5xx, carry an
undocumented status or content type, or break the response schema it documents.

The schema is the app's own (``create_app(...).openapi()``, which does not depend on the store);
the requests go over loopback to the real server. Bounded: :data:`EXAMPLES` examples per
operation (``MEMORY_CORE_FUZZ_EXAMPLES`` raises it for a longer local run).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                                response_headers_conformance,
                                                response_schema_conformance,
                                                status_code_conformance)

from benchmarks.hash_engine import HashEmbedder
from benchmarks.live_service import start_service
from memory_core import MemoryEngine
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore

pytestmark = pytest.mark.service

EXAMPLES = int(os.environ.get("MEMORY_CORE_FUZZ_EXAMPLES", "25"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


def _openapi() -> dict:
    with MemoryEngine.open(":memory:", embedder=HashEmbedder()) as eng:
        return create_app(eng, KeyStore(Path("/nonexistent/keys.json"))).openapi()


schema = schemathesis.openapi.from_dict(_openapi())


@pytest.fixture(scope="module")
def fuzz_service(tmp_path_factory):
    """A service where ``fuzz`` owns ``fz`` (one memory in session ``s1``)."""
    with start_service(tmp_path_factory.mktemp("fuzz"), ("fuzz",)) as svc:
        with svc.client("fuzz") as c:
            assert c.post("/v1/spaces", json={"space_id": "fz"}).status_code == 201
            assert c.post("/v1/spaces/fz/memories", json={"items": [
                {"content": "Fuzzing notes: the ledger balances.", "session_id": "s1"}]}
            ).status_code == 201
        yield svc


def test_the_schema_covers_every_route():
    paths = set(_openapi()["paths"])
    assert {"/v1/retrieve", "/v1/context", "/v1/spaces", "/v1/spaces/{space_id}/memories",
            "/v1/receipts/{receipt_id}", "/api/v1/{context_id}/query",
            "/api/v1/{context_id}/sessions/{session_id}/context",
            "/api/v1/{context_id}/documents/query", "/api/v1/{context_id}/traces/{trace_id}",
            "/api/v1/{context_id}/chat"} <= paths


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_operation_breaks_its_contract(case, fuzz_service):
    headers = {"Authorization": f"Bearer {fuzz_service.keys['fuzz']}"}
    if case.path.endswith("/chat"):  # 501 by design: the one 5xx the service answers
        response = case.call(base_url=fuzz_service.url, headers=headers)
        assert response.status_code < 500 or response.status_code == 501
        case.validate_response(response, checks=CHECKS[1:], headers=headers)
        return
    case.call_and_validate(base_url=fuzz_service.url, checks=CHECKS, headers=headers)
