"""``memory-core``: the command line over :class:`~memory_core.engine.MemoryEngine`.

    memory-core write   --store DIR --space ID "content" [--create-space [--description TEXT]]
    memory-core recall  --store DIR --space ID|--route auto "question" [--limit 10] [--json]
    memory-core context --store DIR --space ID "question" [--max-tokens N]
    memory-core session-context --store DIR --space ID --session-id S "question"
    memory-core receipt --store DIR TRACE_ID
    memory-core chat    --store DIR --context-id ID "question" [--stream]   (cli/chat.py)
    memory-core serve   --store DIR [--host 127.0.0.1] [--port 8080]     (memory_core.service)
    memory-core keys create --store DIR --principal NAME

``--url URL [--api-key KEY]`` instead of ``--store`` sends recall/context/write/receipt to a
running service (``memory-core serve``; the key may also come from ``MEMORY_CORE_API_KEY``).

Every request flag maps one to one onto a field of the Python API (DESIGN.md), and a flag left
out sends nothing; the engine validates the values, so the command line accepts what
``retrieve`` / ``write`` accept. A flag the
command does not know is rejected (exit status 2, abbreviations included: ``allow_abbrev=False``
on every parser), never ignored, and named even when a required flag is missing too. The store
may come from ``$MEMORY_CORE_STORE`` instead of ``--store``. Seed 004 spellings: ``--at-instant``
(``as_of``), ``--valid-from`` / ``--valid-until`` (``occurred_after`` / ``occurred_before``),
and ``--mode`` takes the retrieval modes ``hybrid|vector|bm25|graph`` (``channels``) as well
as ``accurate|fast``. A refused request (:class:`MemoryCoreError`) prints
``error: <code>/<reason>: <message>`` on stderr and exits 1; with ``--json`` the error is a JSON
object on stdout instead. ``recall`` and ``context`` always ask for ``receipt=True``, so the
trace outlives the process: ``memory-core receipt <trace_id>`` reads a recall's or a context's
trace later (``context`` prints its footer with the trace id on stderr, the block on stdout).

Example:
    $ memory-core write --store ./mem --space notes --create-space "Alice prefers pnpm."
    mem_1
    $ memory-core recall --store ./mem --space notes "Which package manager?" --mode fast
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core.cli.args import (MODE_CHOICES, PROG, SELECTION_FIELDS, STORE_ENV, build_parser,
                                  check_args, split_modes)
from memory_core.engine import MemoryEngine
from memory_core.errors import MemoryCoreError, conflict, not_found
from memory_core.service import cli as service_cli
from memory_core.service import wire
from memory_core.service.bodies import entity_body
from memory_core.store.location import parse_location
from memory_core.types import RetrieveResponse

OpenEngine = Callable[[str], MemoryEngine]
# the parser's public names stay importable from here
__all__ = ["MODE_CHOICES", "PROG", "STORE_ENV", "build_parser", "check_args", "main",
           "split_modes"]


# -- commands -----------------------------------------------------------------------------------
def _fields(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The request fields the user gave (an absent flag sends nothing: the engine's default)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _footer(resp: RetrieveResponse) -> str:
    line = f"tier={resp.tier.value} query_ms={resp.query_ms:.1f} trace_id={resp.trace_id}"
    if resp.receipt_id is not None and resp.receipt_id != resp.trace_id:
        line += f" receipt_id={resp.receipt_id}"
    return line


def _print_results(resp: RetrieveResponse) -> None:
    from rich.console import Console, JustifyMethod
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    if resp.searched is not None:
        console.print(Text("searched: " + ", ".join(
            f"{s.space_id or '-'}"
            + (f" ({s.confidence:.2f})" if s.confidence is not None else "")
            + (f" [{s.reason}]" if s.reason else "") for s in resp.searched)))
    if resp.fallback is not None:
        console.print(Text("fallback: " + ", ".join(f"{k}={v}" for k, v in
                                                     resp.fallback.items())))
    if resp.results:
        table = Table(show_edge=False, pad_edge=False)
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("rank", "right"), ("score", "right"), ("space", "left"), ("memory id", "left"),
            ("content", "left"))
        for name, justify in columns:
            table.add_column(name, justify=justify, overflow="fold")
        for rank, r in enumerate(resp.results, 1):
            table.add_row(str(rank), f"{r.relevance_score:.3f}", Text(r.space_id),
                          Text(r.memory_id), Text(r.content))
        console.print(table)
    else:
        console.print("no results")
    if resp.context_hits:
        hits = Table(title="context hits", show_edge=False, pad_edge=False)
        for name in ("family", "related to", "offset", "memory id", "content"):
            hits.add_column(name, overflow="fold")
        for h in resp.context_hits:
            ident = h.memory_id or ",".join(h.memory_ids)
            hits.add_row(h.family, Text(h.related_to), "" if h.offset is None else str(h.offset),
                         Text(ident), Text(h.content))
        console.print(hits)
    print(_footer(resp))


def _selection_fields(args: argparse.Namespace, *extra: str) -> dict[str, Any]:
    """The request fields of a recall / context command (``--mode`` split by family)."""
    return {**_fields(args, (*SELECTION_FIELDS, *extra)), **split_modes(args.modes)}


def _recall(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    fields = _selection_fields(args, "context_hits")
    if args.context_id is not None:
        return _agent(eng, args, "query", fields)
    resp = eng.retrieve(receipt=True, **fields)
    if args.json:
        return resp.to_dict()
    _print_results(resp)
    return None


def _context(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    fields = _selection_fields(args, "context_max_tokens", "block_order")
    if args.context_id is not None:
        return _agent(eng, args, "session" if args.command == "session-context" else
                      "context", fields)
    if args.command == "session-context":
        space_id, session_id, query = (fields.pop(k) for k in ("space_id", "session_id",
                                                               "query"))
        resp = eng.session_context(space_id, session_id, query, receipt=True, **fields)
    else:
        resp = eng.retrieve_context(receipt=True, **fields)
    block = resp.context or ""
    if args.json:  # context hits (on by default for context calls) only when there are any
        hits = {"context_hits": [h.to_dict() for h in resp.context_hits]} \
            if resp.context_hits else {}
        return {"context": block, "tier": resp.tier.value, "query_ms": resp.query_ms,
                "trace_id": resp.trace_id, **hits}
    print(block)
    print(_footer(resp), file=sys.stderr)  # stdout stays the block alone (pipe-friendly)
    return None


# -- the agent-memory API's calls (``--context-id``) ---------------------------------------------
def agent_call(eng: Any, kind: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The agent-memory API's body of ``kind`` (``query``, ``context`` or ``session``) for
    the request ``fields`` (engine names; ``space_id`` is the context id): over ``--url``
    its route (:meth:`memory_core.service.client.RemoteEngine.agent`), else the engine's
    call in the same wire (:mod:`memory_core.service.wire`)."""
    if not isinstance(eng, MemoryEngine):
        return eng.agent(kind, fields)
    rest = dict(fields)
    if kind == "query":
        return wire.query_response(eng.recall(rest))
    if kind == "context":
        return wire.context_response(eng.recall_context(rest))
    space_id, session_id, query = (rest.pop(k, None) for k in ("space_id", "session_id",
                                                                 "query"))
    return wire.context_response(eng.recall_session(space_id, session_id, query, rest))


def _agent(eng: MemoryEngine, args: argparse.Namespace, kind: str,
           fields: Mapping[str, Any]) -> Mapping[str, Any] | None:
    body = agent_call(eng, kind, {**fields, "receipt": True})
    if args.json:
        return body
    footer = f"tier={body['tier']} queryMs={body['queryMs']:.1f} " \
             f"traceId={body['trace']['traceId']}"
    if kind == "query":
        _print_rows("hits", ("rank", "score", "source", "memory id", "content"), [
            (str(i), f"{h['relevanceScore']:.3f}", h["source"], h["memoryId"], h["content"])
            for i, h in enumerate(body["hits"], 1)])
        _print_rows("context hits", ("source", "related to", "memory id", "content"), [
            (h["source"], h["relatedTo"], h["memoryId"] or ",".join(h["memoryIds"]),
             h["content"]) for h in body.get("contextHits", ())])
        print(footer)
    else:
        print(body["context"])
        print(footer, file=sys.stderr)  # stdout stays the block alone
    return None


def _print_rows(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if not rows:
        print(f"no {title}")
        return
    table = Table(title=title, show_edge=False, pad_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(v)) for v in row))
    Console(highlight=False).print(table)


# -- the entity graph ---------------------------------------------------------------------------
GRAPH_FILTERS = ("user_id", "agent_id", "session_id", "tags", "tags_match", "lens", "as_of",
                 "occurred_after", "occurred_before")


def _entities(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    filters = _fields(args, GRAPH_FILTERS)
    if args.name is None:
        listing = eng.entities(args.space_id, principal=args.principal,
                               **_fields(args, ("limit", "contains")), **filters)
        body = listing if isinstance(listing, dict) else listing.to_dict()
        if args.json:
            return body
        _print_rows(f"entities of {body['space_id']} ({body['total']} in all)",
                    ("mentions", "name"),
                    [(str(e["mentions"]), e["name"]) for e in body["entities"]])
        return None
    view = eng.entity(args.space_id, args.name, principal=args.principal,
                      **_fields(args, ("memories", "related")), **filters)
    body = view if isinstance(view, dict) else entity_body(view)
    if args.json:
        return body
    print(f"{body['name']}: mentioned by {body['mentions']} memories")
    _print_rows("mentioned with it", ("together", "name"),
                [(str(e["mentions"]), e["name"]) for e in body["related"]])
    _print_rows("its memories", ("memory id", "timestamp", "content"),
                [(m["memory_id"], m["timestamp"], m["content"]) for m in body["memories"]])
    return None


def _write(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    content = sys.stdin.read() if args.content == "-" else args.content
    fields = _fields(args, ("space_id", "route", "timestamp", "tags", "user_id", "agent_id",
                            "session_id", "document_id", "scopes", "metadata", "principal"))
    created = False
    if args.create_space:
        existing = eng.store.get_space(args.space_id)
        if existing is None:
            # validate the write before creating anything, so a refused write leaves no space
            # behind: the engine's own item check (``now`` only fills a missing timestamp, and
            # the result is discarded); authorisation holds for the space created next
            item = {k: v for k, v in fields.items() if k not in ("space_id", "principal")}
            eng._writer.check_item(0, {"content": content, **item}, "1970-01-01T00:00:00Z")
            members = None if args.principal is None else {args.principal: "owner"}
            eng.create_space(args.space_id, description=args.description or "", members=members)
            created = True
        elif args.description is not None and args.description != existing.description:
            raise conflict("space_exists", f"space {args.space_id!r} already exists with another "
                          "description; --description applies only when the space is created",
                          "description")
    memory_id = eng.write(content=content, **fields)
    if args.json:
        return {"memory_id": memory_id, "space_id": eng.get_memory(memory_id).space_id,
                "created_space": created}
    print(memory_id)
    return None


def _receipt(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    found = eng.get_receipt(args.trace_id)
    print(json.dumps(found.to_dict(), indent=2, ensure_ascii=False, default=str))
    return None


def _chat(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    from memory_core.cli import chat  # imports httpx: only when chatting

    fields = _selection_fields(args, "context_max_tokens", "block_order")
    return chat.run(eng, fields, args.stream, args.json)  # memory_core/cli/chat.py


COMMANDS: dict[str, Callable[[MemoryEngine, argparse.Namespace], Mapping[str, Any] | None]] = {
    "recall": _recall, "context": _context, "session-context": _context, "write": _write,
    "receipt": _receipt, "entities": _entities, "chat": _chat,
}


def _opener(args: argparse.Namespace, open_engine: OpenEngine | None
            ) -> Callable[[str], Any]:
    """What opens the engine: a client of the service with ``--url``, else ``open_engine``
    (default :meth:`MemoryEngine.open`)."""
    if args.url is None:
        return open_engine or MemoryEngine.open
    from memory_core.service.client import RemoteEngine

    url, api_key = args.url, args.api_key
    return lambda _store: RemoteEngine(url, api_key)


def main(argv: Sequence[str] | None = None, open_engine: OpenEngine | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 refused request, 2 bad usage).

    ``open_engine`` builds the engine from the store directory (default
    :meth:`MemoryEngine.open`, which loads the packaged MiniLM); tests inject a small one.
    A store directory that does not exist is a 404 ``not_found`` (``store_missing``), except
    for ``write --create-space``, which creates it.
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the sub-command, with its own usage line
            args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
        check_args(args.command_parser, args)
    except SystemExit as exc:  # usage errors and --help: argparse has printed the message
        return exc.code if isinstance(exc.code, int) else 2
    if args.command in service_cli.COMMANDS:
        try:
            return service_cli.run(args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 2
    opener = _opener(args, open_engine)
    try:
        creates = args.command == "write" and args.create_space
        if (args.url is None and not creates and not parse_location(args.store).is_url
                and not Path(args.store).is_dir()):
            raise not_found("store", args.store)  # a URL is never a directory
        with opener(args.store) as eng:
            body = COMMANDS[args.command](eng, args)
    except MemoryCoreError as err:
        if args.json:
            print(json.dumps({"error": {"status": err.status, **err.to_dict()}}))
        else:
            print(f"error: {err.code.value}/{err.reason}: {err.message}", file=sys.stderr)
        return 1
    if body is not None:
        print(json.dumps(body, indent=2, ensure_ascii=False, default=str))
    return 0

