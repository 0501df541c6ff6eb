"""Schemathesis: property-based requests generated from the service's OpenAPI schema, sent to a
live ``memory-core serve`` for every operation.

- Contract: no response may be a 5xx, carry an undocumented status or content type, or break
  the response schema it documents (valid and invalid requests alike).
- Acceptance: a request the schema allows is accepted (schemathesis' positive-data acceptance:
  never a 400/422), with the paths and ``space_id`` pointed at what the store holds so the
  bodies reach the engine's validation. The one exception is a refusal the schema says it
  cannot state (``request_models.UNSTATED``: a rule across fields, a total, what the store
  holds), which must name its reason.
- Methods: a method a path does not serve is 405 with an ``Allow`` header naming exactly the
  methods the schema lists for it.

The schema is the one the live service serves (its engine's limits and modes; checked). Bounded:
:data:`EXAMPLES` examples per operation (``MEMORY_CORE_FUZZ_EXAMPLES`` raises it), the
examples and fuzzing phases only; ``MEMORY_CORE_FUZZ_COVERAGE=1`` adds schemathesis' coverage
phase (thousands of boundary cases per read operation: minutes, for a local run).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (content_type_conformance,
                                                positive_data_acceptance,
                                                response_headers_conformance,
                                                response_schema_conformance,
                                                status_code_conformance)

from benchmarks.hash_engine import open_engine
from benchmarks.live_service import start_service
from memory_core.service.app import create_app
from memory_core.service.keys import KeyStore
from memory_core.service.request_models import UNSTATED

pytestmark = pytest.mark.service

EXAMPLES = int(os.environ.get("MEMORY_CORE_FUZZ_EXAMPLES", "25"))
COVERAGE = os.environ.get("MEMORY_CORE_FUZZ_COVERAGE") == "1"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]
HTTP_METHODS = ("get", "put", "post", "delete", "patch")
# what the store of fuzz_service holds: the acceptance test points the paths here
PINNED = {"space_id": "fz", "context_id": "fz", "session_id": "s1"}


def _openapi() -> dict:
    """The schema of an engine the served one's factory opens (same limits and modes)."""
    with open_engine(":memory:") as eng:
        return create_app(eng, KeyStore(Path("/nonexistent/keys.json"))).openapi()


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


def _schema(modes: list[GenerationMode] | None = None):
    schema = schemathesis.openapi.from_dict(_openapi())
    if not COVERAGE:
        schema.config.phases.coverage.enabled = False
    if modes is not None:
        schema.config.generation.update(modes=modes)
    return schema


contract = _schema()
acceptance = _schema([GenerationMode.POSITIVE])


# routes that need a response model: 501 no_response_model until one is configured
NOT_SERVED = ("/chat", "/v1/reason")


def _needs_model(case) -> bool:
    """A route that needs a response model, or a write asking it for profile groups
    (``group_profile``): 501 no_response_model by design with none configured."""
    return case.path.endswith(NOT_SERVED) or (
        isinstance(case.body, dict) and case.body.get("group_profile") is True)


def test_the_schema_is_the_served_one(fuzz_service):
    assert httpx.get(f"{fuzz_service.url}/openapi.json").json() == _openapi()


def test_the_schema_covers_every_route():
    paths = set(_openapi()["paths"])
    assert {"/v1/retrieve", "/v1/context", "/v1/spaces", "/v1/spaces/{space_id}/memories",
            "/v1/receipts/{receipt_id}", "/api/v1/{context_id}/query",
            "/api/v1/{context_id}/sessions/{session_id}/context",
            "/api/v1/{context_id}/documents/query", "/api/v1/{context_id}/traces/{trace_id}",
            "/api/v1/{context_id}/chat", "/v1/spaces/{space_id}/entities",
            "/v1/spaces/{space_id}/entities/{name}", "/v1/reason"} <= paths


@contract.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_operation_breaks_its_contract(case, fuzz_service):
    headers = {"Authorization": f"Bearer {fuzz_service.keys['fuzz']}"}
    if _needs_model(case):  # 501 by design: the one 5xx the service answers
        response = case.call(base_url=fuzz_service.url, headers=headers)
        assert response.status_code < 500 or response.status_code == 501
        case.validate_response(response, checks=CHECKS[1:], headers=headers)
        return
    case.call_and_validate(base_url=fuzz_service.url, checks=CHECKS, headers=headers)


def _unstated(response) -> bool:
    """A 422 for a rule the schema says it cannot state (request_models.UNSTATED)."""
    if response.status_code != 422:
        return False
    body = response.json()
    return body.get("reason") in UNSTATED


@acceptance.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_a_request_the_schema_allows_is_accepted(case, fuzz_service):
    headers = {"Authorization": f"Bearer {fuzz_service.keys['fuzz']}"}
    if _needs_model(case):  # 501 by design
        return
    for name in PINNED.keys() & (case.path_parameters or {}).keys():
        case.path_parameters[name] = PINNED[name]
    if isinstance(case.body, dict):  # the body reaches the engine only in a space it holds
        if isinstance(case.body.get("space_id"), str) and case.path != "/v1/spaces":
            case.body["space_id"] = "fz"
        if isinstance(case.body.get("principal"), str):
            case.body["principal"] = "fuzz"
    response = case.call(base_url=fuzz_service.url, headers=headers)
    if _unstated(response):
        return
    case.validate_response(response, checks=[not_a_server_error, positive_data_acceptance],
                           headers=headers)


def test_a_method_a_path_does_not_serve_is_405_naming_the_ones_it_does(fuzz_service):
    with fuzz_service.client("fuzz") as c:
        for template, item in c.get("/openapi.json").json()["paths"].items():
            path = template.format(space_id="fz", context_id="fz", session_id="s1",
                                   receipt_id="x", trace_id="x", memory_id="x", name="x")
            served = {m.upper() for m in item if m in HTTP_METHODS}
            for method in ("OPTIONS", *(m.upper() for m in HTTP_METHODS)):
                if method in served:
                    continue
                r = c.request(method, path)
                assert r.status_code == 405, (method, path)
                assert r.json()["code"] == "method_not_allowed"
                assert set(r.headers["allow"].split(", ")) == served, (method, path)
