"""``memory-core``: the command line over :class:`~memory_core.engine.MemoryEngine`.

    memory-core write   --store DIR --space ID "content" [--create-space [--description TEXT]]
    memory-core recall  --store DIR --space ID|--route auto "question" [--limit 10] [--json]
    memory-core context --store DIR --space ID "question" [--max-tokens N]
    memory-core session-context --store DIR --space ID --session-id S "question"
    memory-core receipt --store DIR TRACE_ID
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
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core.engine import MemoryEngine
from memory_core.errors import MemoryCoreError, invalid, not_found
from memory_core.request import ROUTES, TAGS_MATCH
from memory_core.service import cli as service_cli
from memory_core.types import BlockOrder, Include, Mode, Retrieval, RetrieveResponse, ScopeView

PROG = "memory-core"
# --include facts,passages -> include="both"
INCLUDE_PARTS = (Include.FACTS.value, Include.PASSAGES.value)

OpenEngine = Callable[[str], MemoryEngine]


# -- argument types (a bad value is an argparse error: exit 2, nothing opened) -----------------
def _csv(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; an empty item is an error."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _include(text: str) -> str:
    """``facts`` -> ``"facts"``, ``passages`` -> ``"passages"``, ``facts,passages`` ->
    ``"both"`` (the request field ``include``)."""
    parts = set(_csv(text))
    unknown = sorted(parts - set(INCLUDE_PARTS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(unknown)}; choose from "
                                         f"{', '.join(INCLUDE_PARTS)}")
    return Include.BOTH.value if parts == set(INCLUDE_PARTS) else parts.pop()


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


# -- parsers ------------------------------------------------------------------------------------
def _parser(**kwargs: Any) -> argparse.ArgumentParser:
    return argparse.ArgumentParser(allow_abbrev=False, **kwargs)


STORE_ENV = "MEMORY_CORE_STORE"  # the store directory when --store is not given


def _common() -> argparse.ArgumentParser:
    # required flags are checked after unknown ones (_check_args), so an unknown flag is named
    # even when a required one is missing too
    p = _parser(add_help=False)
    p.add_argument("--store", metavar="DIR",
                   help=f"the store directory (default: ${STORE_ENV})")
    p.add_argument("--url", metavar="URL", help="a running service (memory-core serve) instead "
                   "of --store")
    p.add_argument("--api-key", metavar="KEY", help="with --url: the bearer key (default "
                   "$MEMORY_CORE_API_KEY)")
    p.add_argument("--json", action="store_true",
                   help="print JSON on stdout (errors too, as {\"error\": {...}})")
    return p


def _selection() -> argparse.ArgumentParser:
    """The flags ``recall`` and ``context`` share: one per request field."""
    p = _parser(add_help=False)
    p.add_argument("query", nargs="?", help="the question")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--space", dest="space_id", metavar="ID", help="read this space")
    target.add_argument("--route", choices=ROUTES, help="let the router pick the spaces")
    p.add_argument("--limit", type=int, help="results, 1-50 (default 10)")
    p.add_argument("--mode", dest="modes", action="append", choices=MODE_CHOICES,
                   metavar="|".join(MODE_CHOICES),
                   help="scoring (accurate: cross-encoder rerank; fast: no model, positional "
                   "scores) or retrieval (hybrid | vector | bm25 | graph, the --channels "
                   "values); the two sets are disjoint, give at most one of each")
    p.add_argument("--channels", choices=[r.value for r in Retrieval],
                   help="hybrid (every channel, fused) or one channel alone")
    p.add_argument("--include", type=_include, metavar="facts,passages",
                   help="what to return: facts (observations), passages (the written "
                   "memories), or both (facts,passages; the default)")
    p.add_argument("--include-duplicates", action="store_true", default=None,
                   help="keep the results dedup would cut")
    p.add_argument("--min-score", type=float, metavar="X", help="drop results scored below X")
    p.add_argument("--as-of", "--at-instant", dest="as_of", metavar="INSTANT",
                   help="only memories recorded at or before (seed 004: --at-instant)")
    p.add_argument("--query-timestamp", metavar="INSTANT",
                   help="'now' for relative dates and time-proximity ranking")
    p.add_argument("--occurred-after", "--valid-from", dest="occurred_after", metavar="INSTANT",
                   help="event time at or after (seed 004: --valid-from)")
    p.add_argument("--occurred-before", "--valid-until", dest="occurred_before",
                   metavar="INSTANT", help="event time at or before (seed 004: --valid-until)")
    p.add_argument("--labels", type=_csv, metavar="a,b",
                   help="descriptor filter: every label as a bare tag or label:<name>")
    p.add_argument("--scope-view", choices=[v.value for v in ScopeView],
                   help="seed 004 scope view (every view resolves like strict)")
    p.add_argument("--tags", type=_csv, metavar="a,b", help="flat tag filter")
    p.add_argument("--tags-match", choices=TAGS_MATCH, help="how --tags match (default any)")
    p.add_argument("--user-id", metavar="ID")
    p.add_argument("--agent-id", metavar="ID")
    p.add_argument("--session-id", metavar="ID", help="strict scope filter; for "
                   "session-context: the session whose scope is recalled and whose latest "
                   "turns follow the block")
    p.add_argument("--lens", type=_csv, action="append", metavar="PATH[,PATH]",
                   help="scope lens; repeat for OR-ed clauses, paths in one clause are AND-ed")
    p.add_argument("--principal", metavar="WHO", help="act as this principal (default: owner)")
    p.add_argument("--expand-query", action="store_true", default=None,
                   help="retrieve each subject of a multi-subject question on its own")
    p.add_argument("--max-targets", type=int, metavar="N", help="routed reads: spaces at most")
    p.add_argument("--fallback-space-id", metavar="ID",
                   help="routed reads: search this space when the router names none")
    return p


# argparse dest -> request field, for the selection flags (dest equals the field otherwise)
_SELECTION_FIELDS = (
    "query", "space_id", "route", "limit", "mode", "channels", "include", "include_duplicates",
    "min_score", "as_of", "query_timestamp", "occurred_after", "occurred_before", "tags",
    "tags_match", "user_id", "agent_id", "session_id", "lens", "principal", "expand_query",
    "max_targets", "fallback_space_id", "labels", "scope_view",
)
# --mode takes either family: scoring modes and retrieval channels (disjoint value sets)
MODE_CHOICES = (*(m.value for m in Mode), *(r.value for r in Retrieval))


def build_parser() -> argparse.ArgumentParser:
    """The ``memory-core`` parser: four sub-commands, no abbreviations anywhere."""
    parser = _parser(prog=PROG, description="Command line over a memory_core store.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common, selection = _common(), _selection()

    recall = sub.add_parser("recall", parents=[common, selection], allow_abbrev=False,
                            help="ranked memories for a question")
    recall.add_argument("--context-hits", action="store_true", default=None,
                        help="also return neighbouring turns, sibling sections, entity cards")

    context = sub.add_parser("context", parents=[common, selection], allow_abbrev=False,
                             help="the prompt-ready block for a question")
    context.add_argument("--max-tokens", type=int, dest="context_max_tokens", metavar="N",
                         help="token budget of the block (whole memories are dropped)")
    context.add_argument("--block-order", choices=[b.value for b in BlockOrder],
                         help="relevance (numbered) or stable (record time, bullets)")

    session = sub.add_parser("session-context", parents=[common, selection],
                             allow_abbrev=False, help="the session's context: recall for the "
                             "session's scope, then its recent turns (--session-id required)")
    session.add_argument("--max-tokens", type=int, dest="context_max_tokens", metavar="N",
                         help="token budget (the recalled block first, then recent turns)")
    session.add_argument("--block-order", choices=[b.value for b in BlockOrder],
                         help="relevance (numbered) or stable (record time, bullets)")

    write = sub.add_parser("write", parents=[common], allow_abbrev=False,
                           help="store one memory; prints its id")
    write.add_argument("content", nargs="?", help="the memory's text ('-' reads it from stdin)")
    target = write.add_mutually_exclusive_group()
    target.add_argument("--space", dest="space_id", metavar="ID", help="write into this space")
    target.add_argument("--route", choices=ROUTES, help="file it into the best-fitting space")
    write.add_argument("--timestamp", metavar="INSTANT", help="when it was said (default now)")
    write.add_argument("--tags", type=_csv, metavar="a,b")
    write.add_argument("--user-id", metavar="ID")
    write.add_argument("--agent-id", metavar="ID")
    write.add_argument("--session-id", metavar="ID")
    write.add_argument("--document-id", metavar="ID")
    write.add_argument("--scopes", type=_csv, metavar="PATH[,PATH]",
                       help="scope paths a read's --lens matches (org/acme/team/payments)")
    write.add_argument("--metadata", type=_json_object, metavar="JSON",
                       help="a JSON object stored with the memory")
    write.add_argument("--principal", metavar="WHO", help="act as this principal")
    write.add_argument("--create-space", action="store_true",
                       help="create --space first when it does not exist")
    write.add_argument("--description", metavar="TEXT",
                       help="with --create-space: the new space's description")

    receipt = sub.add_parser("receipt", parents=[common], allow_abbrev=False,
                             help="print a stored receipt / trace as JSON")
    receipt.add_argument("trace_id", metavar="ID", nargs="?", help="a trace_id or receipt_id")
    service_cli.add_commands(sub, _parser)
    for sub_parser in sub.choices.values():
        sub_parser.set_defaults(command_parser=sub_parser)
    return parser


# -- commands -----------------------------------------------------------------------------------
def _fields(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The request fields the user gave (an absent flag sends nothing: the engine's default)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def split_modes(modes: Sequence[str] | None) -> dict[str, str]:
    """``--mode`` values -> request fields: ``accurate|fast`` -> ``mode``,
    ``hybrid|vector|bm25|graph`` -> ``channels`` (at most one of each; checked by
    :func:`_check_args`).

    Example:
        >>> split_modes(["fast", "bm25"])
        {'mode': 'fast', 'channels': 'bm25'}
    """
    scoring = {m.value for m in Mode}
    out: dict[str, str] = {}
    for value in modes or ():
        out["mode" if value in scoring else "channels"] = value
    return out


def _footer(resp: RetrieveResponse) -> str:
    line = f"tier={resp.tier.value} query_ms={resp.query_ms:.1f} trace_id={resp.trace_id}"
    if resp.receipt_id is not None and resp.receipt_id != resp.trace_id:
        line += f" receipt_id={resp.receipt_id}"
    return line


def _print_results(resp: RetrieveResponse) -> None:
    from rich.console import Console
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
        for name, justify in (("rank", "right"), ("score", "right"), ("space", "left"),
                              ("memory id", "left"), ("content", "left")):
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
    return {**_fields(args, (*_SELECTION_FIELDS, *extra)), **split_modes(args.modes)}


def _recall(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    fields = _selection_fields(args, "context_hits")
    resp = eng.retrieve(receipt=True, **fields)
    if args.json:
        return resp.to_dict()
    _print_results(resp)
    return None


def _context(eng: MemoryEngine, args: argparse.Namespace) -> Mapping[str, Any] | None:
    fields = _selection_fields(args, "context_max_tokens", "block_order")
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
            eng._check_item(args.space_id, 0, {"content": content, **item},
                            "1970-01-01T00:00:00Z")
            members = None if args.principal is None else {args.principal: "owner"}
            eng.create_space(args.space_id, description=args.description or "", members=members)
            created = True
        elif args.description is not None and args.description != existing.description:
            raise invalid("space_exists", f"space {args.space_id!r} already exists with another "
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


COMMANDS: dict[str, Callable[[MemoryEngine, argparse.Namespace], Mapping[str, Any] | None]] = {
    "recall": _recall, "context": _context, "session-context": _context, "write": _write,
    "receipt": _receipt,
}


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Required flags and combinations argparse cannot express (checked after unknown flags,
    so those are always named first): rejected with exit status 2."""
    if args.command in service_cli.COMMANDS:
        return
    if args.store is None and args.url is None:
        args.store = os.environ.get(STORE_ENV) or None
    if args.store is not None and args.url is not None:
        parser.error("give exactly one of --store DIR and --url URL")
    if args.api_key is not None and args.url is None:
        parser.error("--api-key applies only with --url")
    missing = [] if args.store is not None or args.url is not None else [
        f"--store (or ${STORE_ENV}) or --url"]
    positional = {"recall": "query", "context": "query", "session-context": "query",
                  "write": "content", "receipt": "trace_id"}[args.command]
    if getattr(args, positional) is None:
        missing.append(positional)
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    if args.command in ("recall", "context", "session-context", "write") and (
            args.space_id is None and args.route is None):
        parser.error("one of the arguments --space --route is required")
    if args.command == "session-context":
        if args.route is not None:
            parser.error("session-context is addressed only: give --space, not --route")
        if args.session_id is None:
            parser.error("session-context needs --session-id")
    modes = getattr(args, "modes", None) or []
    for family, values in (("scoring", [m.value for m in Mode]),
                           ("retrieval", [r.value for r in Retrieval])):
        given = [m for m in modes if m in values]
        if len(given) > 1:
            parser.error(f"--mode: at most one {family} mode, got {', '.join(given)}")
    if any(m in {r.value for r in Retrieval} for m in modes) and args.channels is not None:
        parser.error("--mode with a retrieval mode and --channels: give one of the two")
    if args.command != "write":
        return
    if args.create_space and args.url is not None:
        parser.error("--create-space works on a local --store only; over --url create the "
                     "space with POST /v1/spaces")
    if args.create_space and args.space_id is None:
        parser.error("--create-space needs --space (a routed write picks an existing space)")
    if args.description is not None and not args.create_space:
        parser.error("--description applies only with --create-space")


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
        _check_args(args.command_parser, args)
    except SystemExit as exc:  # usage errors and --help: argparse has printed the message
        return exc.code if isinstance(exc.code, int) else 2
    if args.command in service_cli.COMMANDS:
        try:
            return service_cli.run(args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 2
    if args.url is not None:
        from memory_core.service.client import RemoteEngine

        def open_engine(_: str) -> Any:
            return RemoteEngine(args.url, args.api_key)
    open_engine = open_engine or MemoryEngine.open
    try:
        creates = args.command == "write" and args.create_space
        if args.url is None and not creates and not Path(args.store).is_dir():
            raise not_found("store", args.store)
        with open_engine(args.store) as eng:
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


if __name__ == "__main__":
    sys.exit(main())
