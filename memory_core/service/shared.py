"""What the service's routes share: the engine behind its gate (:class:`Service`), the
settings, the principal a body acts as, and the OpenAPI helpers the route modules use
(:mod:`memory_core.service.routes_v1`, :mod:`memory_core.service.routes_agent`); the app
(:mod:`memory_core.service.app`) composes them."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from fastapi import Request

from memory_core.engine import MemoryEngine
from memory_core.access import ROLES
from memory_core.errors import ErrorCode, MemoryCoreError, invalid, not_found
from memory_core.llm import LLMSpec, from_env, response_model
from memory_core.receipts import Receipt
from memory_core.service import models
from memory_core.service.access import read_json
from memory_core.service.errors import ServiceCode, ServiceError
from memory_core.service.keys import KeyStore
from memory_core.service.metrics import ServiceMetrics
from memory_core.requests import RetrieveRequest

T = TypeVar("T")
MAX_BODY_BYTES = 1_048_576  # 1 MiB: a write batch of a few thousand short memories


PROFILE_GROUPING_ENV = "MEMORY_CORE_LLM_PROFILE_GROUPING"


@dataclass(frozen=True)
class ServiceSettings:
    """``max_body_bytes``: a larger body is 413 before it is parsed; ``llm``: the response
    model (below); ``profile_grouping``: every write asks it for the profile group of each
    item that names none (:mod:`memory_core.service.profile_grouping`)."""

    max_body_bytes: int = MAX_BODY_BYTES
    # the response model of /chat and /v1/reason: None reads MEMORY_CORE_LLM_URL / _MODEL /
    # _API_KEY (DESIGN.md "Response model"); unset, those routes answer 501
    llm: LLMSpec | None = None
    # group every written item the writer left ungrouped with the response model (off: only a
    # write that sends group_profile=true asks); needs a model, else the service does not start
    profile_grouping: bool = False


class Gate:
    """Engine calls in worker threads, off the event loop, side by side (issue 35 item 3).

    The engine is safe for threads (issue 21): the store runs each statement and each write
    transaction under its connection's lock, and the vector index and the keyword postings are
    caught up and added to under their own locks, each row once. So no call waits for another
    call as a whole: a write's checks and embedding (nearly all of its time) run beside reads
    and other writes, and a read waits only while a write holds the store for its transaction
    and index update (:meth:`memory_core.write.Writer.write_many`; 0.25 s for 5,000 short
    items). A check-then-act call (creating a space: is the id free?) checks inside the
    store's write transaction, so it is whole across threads and processes alike."""

    def __init__(self, engine: MemoryEngine):
        self.engine = engine

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker thread, beside any other call."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class Service:
    """What the routes share: the engine behind its gate, the keys, the settings."""

    def __init__(self, engine: MemoryEngine, keys: KeyStore, settings: ServiceSettings):
        self.engine = engine
        self.gate = Gate(engine)
        self.keys = keys
        self.settings = settings
        self.metrics = ServiceMetrics(engine.cache_report)  # GET /metrics
        self.llm = from_env(settings.llm or LLMSpec())
        self.model = response_model(self.llm)  # None: /chat and /v1/reason answer 501
        # on by the setting or MEMORY_CORE_LLM_PROFILE_GROUPING=1 (so `memory-core serve` can)
        self.profile_grouping = settings.profile_grouping or os.environ.get(
            PROFILE_GROUPING_ENV, "").strip().lower() in ("1", "true", "yes")
        if self.profile_grouping and self.model is None:
            raise ValueError(f"profile_grouping ({PROFILE_GROUPING_ENV}) needs a response "
                             f"model: {self.llm.why_not()}")

    async def body(self, request: Request) -> Any:
        return await read_json(request, self.settings.max_body_bytes)

    def role(self, space_id: str, principal: str) -> str:
        """The principal's role in the space; 404 when it has none (or no such space)."""
        space = self.engine.store.get_space(space_id)
        role = None if space is None else space.members.get(principal)
        if role is None:
            raise not_found("space", space_id)
        return role

    def require_writer(self, space_id: str, principal: str) -> None:
        """404 unless the principal holds a role in the space; 403 unless developer or owner."""
        role = self.role(space_id, principal)
        if ROLES.index(role) < ROLES.index("developer"):
            raise ServiceError(ServiceCode.FORBIDDEN, "needs_developer",
                               f"principal {principal!r} is a {role} of space {space_id!r}; "
                               "writing needs developer or owner")

    def may_see_receipt(self, receipt_request: RetrieveRequest, principal: str) -> bool:
        """A trace belongs to the principal whose request made it (none: the store's owner)."""
        who = receipt_request.principal or self.engine.spec.owner
        return who == principal

    def own_receipt(self, receipt_id: str, principal: str, what: str,
                    space_id: str | None = None) -> Receipt:
        """The receipt (or trace) ``receipt_id`` if ``principal``'s own request left it and,
        given ``space_id``, searched that space; otherwise 404 ``<what>_missing``: one status,
        code and message whether it does not exist or belongs to someone else."""
        try:
            found: Receipt | None = self.engine.get_receipt(receipt_id)
        except MemoryCoreError as exc:
            if exc.code is not ErrorCode.NOT_FOUND:
                raise
            found = None
        if found is not None and space_id is not None:
            spaces = {found.request.space_id} | {
                s.space_id for s in (found.searched or ())}
            found = found if space_id in spaces else None
        if found is None or not self.may_see_receipt(found.request, principal):
            raise not_found(what, receipt_id)
        return found


def with_principal(body: Any, principal: str) -> dict[str, Any]:
    """The request body acting as ``principal``; a different ``principal`` in it is 403."""
    if not isinstance(body, dict):
        raise invalid("wrong_type", "a request must be a JSON object of fields")
    given = body.get("principal")
    if given is not None and given != principal:
        raise ServiceError(ServiceCode.FORBIDDEN, "principal_mismatch",
                           "the API key decides the principal; the body names another one",
                           "principal")
    return {**body, "principal": principal}


def body_spec(name: str, description: str = "") -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its JSON body itself: the body component
    ``name`` (:func:`memory_core.service.request_models.request_models`)."""
    return {"requestBody": {"required": True, "description": description, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for error statuses (always 401 and 422 too)."""
    what = {401: "no key or an unknown key", 403: "the principal may not do this",
            404: "no such object (or one the principal may not read)",
            409: "conflict: the request clashes with what is stored (a space id taken)",
            413: "the body is over the size limit",
            422: "the engine's validation_error / route_conflict / no_route_target / "
                 "reserved_tag, or a body that is not JSON",
            501: "not implemented here", 503: "every searched space failed"}
    return {s: {"model": models.ErrorBody, "description": what.get(s, "error")}
            for s in sorted({401, 422, 500, *statuses})}
