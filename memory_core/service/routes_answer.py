"""The routes that answer with the response model (DESIGN.md "Response model"): the
agent-memory seed's ``POST /api/v1/{context_id}/chat`` and the Retrieve seed's
``POST /v1/reason``.

Both read first, exactly as ``/context`` would (the request's filters, its trace or receipt),
then ask the configured model with the fixed prompt
:data:`memory_core.llm.prompts.ANSWER_PROMPT_VERSION` over the numbered block and return the
answer with the ids of the memories it cites (``[n]`` is the n-th hit). With no model
configured each is 501 ``no_response_model`` before the body is read; a model that does not
answer is 422 ``model_unavailable``. Neither writes anything but the read's own trace, to
which the answer is added (:class:`memory_core.receipts.AnswerRecord`: text, cited ids, model,
prompt version, tokens and cost, whether the cache gave it) or, when the model did not answer
or broke off, the refusal and what arrived before it; the receipt persisted when the read asked
for one (``/v1/reason`` always does).

``/chat`` with ``"stream": true`` answers ``text/event-stream``: ``event: context`` (hits and
trace), one ``event: token`` a piece (``{"text"}``), then ``event: done`` (the whole answer,
citations, usage) or ``event: error`` (the refusal body) if the model breaks off mid-answer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from memory_core.errors import MemoryCoreError, invalid
from memory_core.llm import Reply, ResponseModel
from memory_core.llm.prompts import ANSWER_PROMPT_VERSION, answer_messages, cited
from memory_core.receipts import AnswerRecord
from memory_core.service import wire
from memory_core.service.errors import ServiceCode, ServiceError
from memory_core.service.shared import Service, errors, with_principal
from memory_core.types import RetrieveResponse

def model_of(svc: Service, what: str) -> ResponseModel:
    """The service's response model; 501 ``no_response_model`` saying how to name one."""
    if svc.model is None:
        raise ServiceError(ServiceCode.NOT_IMPLEMENTED, "no_response_model",
                           f"{what} needs a response model and this service has none: "
                           f"{svc.llm.why_not()}; or use /query, /context or /v1/retrieve "
                           "with your own model")
    return svc.model


def _stream_flag(body: Any) -> tuple[Any, bool]:
    if not isinstance(body, dict) or "stream" not in body:
        return body, False
    body = dict(body)
    stream = body.pop("stream")
    if not isinstance(stream, bool):
        raise invalid("wrong_type", "stream must be true or false", "stream")
    return body, stream


def _stable(body: Mapping[str, Any]) -> None:
    order = body.get("block_order", body.get("blockOrder"))
    if order not in (None, "relevance"):
        raise invalid("invalid_value", "an answer cites block lines by rank: block_order must "
                      "be 'relevance' here", "block_order")


def chat_answer(model: ResponseModel, reply: Reply, ids: list[str]) -> dict[str, Any]:
    """What ``/chat`` adds to the read's body (and its stream's ``done`` event): the answer,
    the ids of the hits it cites, the model, the prompt's version, whether the cache gave it,
    its tokens and cost. The command line's ``chat`` answers the same."""
    return {"answer": reply.text, "citedIds": cited(reply.text, ids), "model": model.model,
            "promptVersion": ANSWER_PROMPT_VERSION, "cached": reply.cached,
            "usage": {"promptTokens": reply.prompt_tokens,
                      "completionTokens": reply.completion_tokens,
                      "costUsd": reply.cost_usd}}


def answer_record(model: ResponseModel, reply: Reply | None, ids: list[str], streamed: bool,
                  error: MemoryCoreError | None = None, text: str = "") -> AnswerRecord:
    """The receipt's record of an answer (``reply``), or of its failure (``error``; ``text``:
    what arrived before it)."""
    if reply is None:
        return AnswerRecord(text=text, cited_ids=tuple(cited(text, ids)), model=model.model,
                            prompt_version=ANSWER_PROMPT_VERSION, streamed=streamed,
                            error=None if error is None else error.to_dict())
    return AnswerRecord(text=reply.text, cited_ids=tuple(cited(reply.text, ids)),
                        model=model.model, prompt_version=ANSWER_PROMPT_VERSION,
                        cached=reply.cached, prompt_tokens=reply.prompt_tokens,
                        completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd,
                        cache_key=reply.key, streamed=streamed)


async def _answer(svc: Service, model: ResponseModel, resp: RetrieveResponse,
                  messages: list[dict[str, str]], ids: list[str]) -> Reply:
    """The model's reply, recorded in the read's receipt; a refusal is recorded, then
    raised."""
    persisted = resp.receipt_id is not None
    try:
        reply = await svc.gate.run(model.complete, messages)
    except MemoryCoreError as exc:
        await svc.gate.run(svc.engine.record_answer, resp.trace_id,
                           answer_record(model, None, ids, False, exc), persisted)
        raise
    await svc.gate.run(svc.engine.record_answer, resp.trace_id,
                       answer_record(model, reply, ids, False), persisted)
    return reply


def _sse(event: str, data: Mapping[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def add_chat(api: APIRouter, svc: Service, who: Any,
             call: Callable[..., Awaitable[RetrieveResponse]]) -> None:
    """``POST /api/v1/{context_id}/chat`` on the agent-memory router."""
    eng = svc.engine

    @api.post("/chat", response_model=None,
              responses={200: {"description": "the answer with cited memory ids; SSE with "
                                              "stream=true"}, **errors(404, 413, 501)})
    async def chat(context_id: str, request: Request, p: str = who) -> Any:
        """Recall (the ``/context`` body and filters), then the configured response model
        answers the ``query`` from the numbered block: ``{"answer", "citedIds", "context",
        "hits", "trace", "model", "promptVersion", "cached", "usage"}``; ``"stream": true``
        sends server-sent events (module docstring)."""
        model = model_of(svc, "chat")
        raw, stream = _stream_flag(await svc.body(request))
        body = wire.agent_body(raw, None, eng.spec)
        _stable(body)
        resp = await call(eng.recall_context, {**body, "space_id": context_id,
                                               "principal": p})
        ids = [r.memory_id for r in resp.results]
        messages = answer_messages(str(body.get("query", "")), resp.context or "")
        head = wire.context_response(resp)
        if not stream:
            reply = await _answer(svc, model, resp, messages, ids)
            return JSONResponse({**chat_answer(model, reply, ids), **head})
        done: list[Reply] = []
        pieces = model.stream(messages, on_reply=done.append)

        def record(reply: Reply | None, error: MemoryCoreError | None = None,
                   text: str = "") -> None:
            eng.record_answer(resp.trace_id, answer_record(model, reply, ids, True, error, text),
                              resp.receipt_id is not None)

        try:  # a refusal before the first piece is still a status
            first = await anyio.to_thread.run_sync(next, pieces, None)
        except MemoryCoreError as exc:
            await svc.gate.run(record, None, exc)
            raise
        return StreamingResponse(_events(model, head, first, pieces, ids, done, record),
                                 media_type="text/event-stream")


def _events(model: ResponseModel, head: Mapping[str, Any], first: str | None,
            pieces: Iterator[str], ids: list[str], done: list[Reply],
            record: Callable[..., None]) -> Iterator[str]:
    yield _sse("context", head)
    parts: list[str] = []
    try:
        for piece in ([] if first is None else [first]):
            parts.append(piece)
            yield _sse("token", {"text": piece})
        for piece in pieces:
            parts.append(piece)
            yield _sse("token", {"text": piece})
    except MemoryCoreError as exc:
        record(None, exc, "".join(parts))
        yield _sse("error", exc.to_dict())
        return
    record(done[0])
    yield _sse("done", chat_answer(model, done[0], ids))


def add_reason(api: APIRouter, svc: Service, who: Any) -> None:
    """``POST /v1/reason`` on the ``/v1`` router."""
    eng = svc.engine

    @api.post("/reason", response_model=None,
              responses={200: {"description": "the synthesized answer with cited memory ids "
                                              "and the read's receipt"},
                         **errors(403, 404, 413, 501)})
    async def reason(request: Request, p: str = who) -> JSONResponse:
        """A synthesized answer instead of a ranked list: the ``/v1/context`` body with
        ``space_id`` required (no routed read) and its filters (``tag_groups`` narrows what
        the answer may read); ``{"answer", "cited_ids", "results", "receipt_id", "trace_id",
        "model", "prompt_version", "cached", "usage"}``."""
        model = model_of(svc, "reasoning")
        body = with_principal(await svc.body(request), p)
        if not body.get("space_id"):
            raise invalid("missing_field", "reason reads one named space: send space_id",
                          "space_id")
        if body.get("route") is not None:
            raise invalid("addressed_only", "reason reads one named space: send space_id, "
                          "not route", "route")
        _stable(body)
        resp = await svc.gate.run(eng.retrieve_context, {**body, "receipt": True})
        ids = [r.memory_id for r in resp.results]
        reply = await _answer(svc, model, resp,
                              answer_messages(str(body.get("query", "")), resp.context or ""),
                              ids)
        return JSONResponse({
            "answer": reply.text, "cited_ids": cited(reply.text, ids),
            "results": resp.to_dict()["results"], "receipt_id": resp.receipt_id,
            "trace_id": resp.trace_id, "model": model.model,
            "prompt_version": ANSWER_PROMPT_VERSION, "cached": reply.cached,
            "usage": {"prompt_tokens": reply.prompt_tokens,
                      "completion_tokens": reply.completion_tokens,
                      "cost_usd": reply.cost_usd}})
