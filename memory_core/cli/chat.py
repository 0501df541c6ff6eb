"""``memory-core chat``: the agent-memory API's ``/chat`` from the command line.

    memory-core chat --store DIR --context-id ID "question" [--stream] [--json]
    memory-core chat --url URL --context-id ID "question" [--stream]

In-process (``--store``) it recalls as ``context`` does and asks the response model named by
``MEMORY_CORE_LLM_URL`` / ``_MODEL`` (key in ``_API_KEY``) with the service's prompt; over
``--url`` it posts to the service's ``/chat`` (``--stream``: reads its server-sent events).
The answer goes to stdout (streamed piece by piece with ``--stream``), the cited memory ids and
the trace id to stderr; ``--json`` prints the body ``/chat`` answers. In-process, the answer
(or the model's refusal) is recorded in the recall's stored receipt, as ``/chat`` records it
(:func:`memory_core.service.routes_answer.answer_record`). No model configured:
the service's refusal, 501 ``not_implemented`` / ``no_response_model``, exit status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

from memory_core.engine import MemoryEngine
from memory_core.errors import MemoryCoreError
from memory_core.llm import LLMSpec, Reply, from_env, response_model
from memory_core.llm.prompts import answer_messages
from memory_core.service import wire
from memory_core.service.client import RemoteError
from memory_core.service.routes_answer import answer_record, chat_answer


def _local(eng: MemoryEngine, fields: Mapping[str, Any], stream: bool) -> Iterator[
        tuple[str, Any]]:
    """``("token", piece)`` events, then ``("done", body)``: the body ``/chat`` answers."""
    spec = from_env(LLMSpec())
    model = response_model(spec)
    if model is None:
        raise RemoteError(501, {"code": "not_implemented", "reason": "no_response_model",
                                "message": "chat needs a response model: "
                                + spec.why_not(also=None)})
    with model:
        resp = eng.recall_context({**fields, "receipt": True})
        ids = [r.memory_id for r in resp.results]
        messages = answer_messages(str(fields.get("query", "")), resp.context or "")
        done: list[Reply] = []
        parts: list[str] = []
        try:
            if stream:
                for piece in model.stream(messages, on_reply=done.append):
                    parts.append(piece)
                    yield "token", piece
            else:
                done.append(model.complete(messages))
        except MemoryCoreError as exc:
            eng.record_answer(resp.trace_id, answer_record(model, None, ids, stream, exc,
                                                           "".join(parts)), True)
            raise
        eng.record_answer(resp.trace_id, answer_record(model, done[0], ids, stream), True)
        yield "done", {**chat_answer(model, done[0], ids), **wire.context_response(resp)}


def run(eng: Any, fields: Mapping[str, Any], stream: bool, as_json: bool
        ) -> Mapping[str, Any] | None:
    """The ``chat`` command (module docstring); returns the body to print with ``--json``."""
    stream = stream and not as_json
    if isinstance(eng, MemoryEngine):
        events = _local(eng, fields, stream)
    else:
        events = eng.chat(fields, stream)
    body: dict[str, Any] = {}
    for kind, data in events:
        if kind == "token":
            print(data, end="", flush=True)
        elif kind == "done":
            body.update(data)
    if as_json:
        return body
    print("" if stream else body["answer"])
    print(f"cited={','.join(body['citedIds']) or '-'} model={body['model']} "
          f"cached={body['cached']} traceId={body.get('trace', {}).get('traceId')}",
          file=sys.stderr)
    return None
