"""The ``memory-core`` argument parser: one flag per request field, checked before any work.

Argument types turn a bad value into an argparse error (exit status 2, nothing opened); every
parser has ``allow_abbrev=False``; :func:`check_args` adds the required flags and combinations
argparse cannot express, after unknown flags, so an unknown flag is always named first. The
commands themselves are in :mod:`memory_core.cli`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from memory_core.config import EngineSpec
from memory_core.requests import FIELDS, ROUTES, RetrieveRequest, WriteItem
from memory_core.requests.model import RequestModel
from memory_core.requests.rules import Flag, Rule
from memory_core.service import cli as service_cli
from memory_core.types import Include, Match, Mode, Retrieval

PROG = "memory-core"
ENGINE = EngineSpec()  # the defaults the help text names
# --include facts,passages -> include="both"
INCLUDE_PARTS = (Include.FACTS.value, Include.PASSAGES.value)
# -- argument types (a bad value is an argparse error: exit 2, nothing opened) -----------------
def _csv(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``; an empty item is an error."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
    return items


def _include(text: str) -> str:
    """``facts`` -> ``"facts"``, ``passages`` -> ``"passages"``, ``facts,passages`` ->
    ``"both"``, ``documents`` -> ``"documents"`` (alone) (the request field ``include``)."""
    if text.strip() == Include.DOCUMENTS.value:
        return Include.DOCUMENTS.value
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
URL_ENV = "MEMORY_CORE_URL"  # the service when neither --store nor --url is given
CONTEXT_ENV = "MEMORY_CORE_CONTEXT_ID"  # the space when no --space, --route, --context-id


def _common() -> argparse.ArgumentParser:
    # required flags are checked after unknown ones (_check_args), so an unknown flag is named
    # even when a required one is missing too
    p = _parser(add_help=False)
    p.add_argument("--store", metavar="DIR",
                   help=f"the store directory, or a postgresql:// URI (default: ${STORE_ENV})")
    p.add_argument("--url", metavar="URL", help="a running service (memory-core serve) instead "
                   f"of --store (default ${URL_ENV} when ${STORE_ENV} is not set)")
    p.add_argument("--api-key", metavar="KEY", help="with --url: the bearer key (default "
                   "$MEMORY_CORE_API_KEY)")
    p.add_argument("--json", action="store_true",
                   help="print JSON on stdout (errors too, as {\"error\": {...}})")
    return p


# -- flags generated from the request models ------------------------------------------------------
# --mode takes either family: scoring modes and retrieval channels (disjoint value sets)
MODE_CHOICES = (*(m.value for m in Mode), *(r.value for r in Retrieval))
MODE_HELP = ("scoring (accurate: cross-encoder rerank; fast: no model, positional scores) or "
             "retrieval (hybrid | vector | bm25 | graph, the --channels values); the two sets "
             "are disjoint, give at most one of each")
TARGET = ("space_id", "route")  # in a group with --context-id: exactly one of them


def _kind(rule: Rule, flag: Flag) -> dict[str, Any]:
    """argparse keywords of a flag's kind (a bad value is an argparse error: exit 2)."""
    kind = flag.kind
    if kind == "int":
        return {"type": int}
    if kind == "float":
        return {"type": float}
    if kind == "csv":
        return {"type": _csv}
    if kind == "csv_each":
        return {"type": _csv, "action": "append"}
    if kind == "json":
        return {"type": _json_object}
    if kind == "include":
        return {"type": _include}
    if kind == "switch":
        return {"action": "store_true", "default": None}
    if kind == "limit":
        return {"type": int, "help": f"results, at least 1 (default {ENGINE.default_limit}; "
                f"above {ENGINE.max_limit}: capped there, with a notice on stderr)"}
    if kind == "modes":
        return {"dest": "modes", "action": "append", "choices": MODE_CHOICES,
                "metavar": "|".join(MODE_CHOICES), "help": MODE_HELP}
    if kind == "choice":
        kinds = getattr(rule, "kind", None)
        return {"choices": [m.value for m in kinds] if kinds is not None else list(ROUTES)}
    return {}


def add_flags(parser: argparse.ArgumentParser | Any, model: type[RequestModel],
              command: str | None, names: Sequence[str] | None = None,
              target: Any = None) -> list[str]:
    """The flags of ``model``'s fields that ``command`` offers (``None``: the flags every read
    command shares; ``names``: only those fields), each as its rule's :class:`Flag` says; the
    target fields go into ``target`` (a mutually exclusive group). Returns the fields set."""
    done = []
    for name, rule in model.rules().items():
        flag = rule.flag
        if flag is None or (names is not None and name not in names):
            continue
        if (command is None) != (not flag.commands) or (
                command is not None and command not in flag.commands):
            continue
        kw: dict[str, Any] = {"help": flag.help or rule.description}
        if flag.names[0].startswith("-"):
            kw["dest"] = flag.dest or name
            if flag.metavar:
                kw["metavar"] = flag.metavar
            kw.update(_kind(rule, flag))
        else:
            kw["nargs"] = "?"
        into = target if target is not None and name in TARGET else parser
        into.add_argument(*flag.names, **kw)
        done.append(name)
    return done


def _selection() -> argparse.ArgumentParser:
    """The flags ``recall``, ``context`` and ``session-context`` share: one per request field
    (:class:`memory_core.requests.RetrieveRequest`'s flags), and ``--context-id``."""
    p = _parser(add_help=False)
    target = p.add_mutually_exclusive_group()
    add_flags(p, RetrieveRequest, None, ("query", *TARGET), target)
    target.add_argument("--context-id", metavar="ID", help="the agent-memory API's call on "
                        "this space (its /query, /context or session context; --json prints "
                        f"its body; default ${CONTEXT_ENV})")
    add_flags(p, RetrieveRequest, None, [n for n in RetrieveRequest.rules()
                                         if n not in ("query", *TARGET)])
    return p


# the request fields the selection flags set: every flag's dest that is a request field, in
# the request's own order (``--mode`` is split into ``mode`` / ``channels`` by split_modes)
SELECTION_FIELDS = tuple(f for f in FIELDS if f in {a.dest for a in _selection()._actions})


def build_parser() -> argparse.ArgumentParser:
    """The ``memory-core`` parser: four sub-commands, no abbreviations anywhere."""
    parser = _parser(prog=PROG, description="Command line over a memory_core store.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common, selection = _common(), _selection()

    for name, what in (("recall", "ranked memories for a question"),
                       ("context", "the prompt-ready block for a question"),
                       ("session-context", "the session's context: recall for the session's "
                        "scope, then its recent turns (--session-id required)"),
                       ("chat", "the configured response model's answer from the recalled "
                        "block, with the memory ids it cites (MEMORY_CORE_LLM_URL / _MODEL)")):
        command = sub.add_parser(name, parents=[common, selection], allow_abbrev=False,
                                 help=what)
        add_flags(command, RetrieveRequest, "context" if name == "chat" else name)
        if name == "chat":
            command.add_argument("--stream", action="store_true",
                                 help="print the answer as the model sends it (SSE over --url)")

    write = sub.add_parser("write", parents=[common], allow_abbrev=False,
                           help="store one memory; prints its id")
    target = write.add_mutually_exclusive_group()
    target.add_argument("--space", dest="space_id", metavar="ID", help="write into this space")
    target.add_argument("--route", choices=ROUTES, help="file it into the best-fitting space")
    target.add_argument("--context-id", metavar="ID", help="the agent-memory API's name of "
                        f"--space (default ${CONTEXT_ENV})")
    add_flags(write, WriteItem, None)
    write.add_argument("--principal", metavar="WHO", help="act as this principal")
    write.add_argument("--create-space", action="store_true",
                       help="create --space first when it does not exist")
    write.add_argument("--description", metavar="TEXT",
                       help="with --create-space: the new space's description")

    entities = sub.add_parser("entities", parents=[common], allow_abbrev=False,
                              help="a space's entities with mention counts, or one entity's "
                              "neighbourhood (NAME)")
    entities.add_argument("name", nargs="?", metavar="NAME",
                          help="an entity: its memories and the entities mentioned with it")
    target = entities.add_mutually_exclusive_group()
    target.add_argument("--space", dest="space_id", metavar="ID", help="the space")
    target.add_argument("--context-id", metavar="ID", help=f"the same (default ${CONTEXT_ENV})")
    entities.add_argument("--limit", type=int, help="entities listed (default 50, 1-1000)")
    entities.add_argument("--contains", metavar="TEXT", help="list entities whose name holds "
                          "TEXT")
    entities.add_argument("--memories", type=int, metavar="N",
                          help="with NAME: its newest N memories (default 20, 1-200)")
    entities.add_argument("--related", type=int, metavar="N",
                          help="with NAME: the N entities most mentioned with it (default 20)")
    for flag, dest in (("--user-id", "user_id"), ("--agent-id", "agent_id"),
                       ("--session-id", "session_id")):
        entities.add_argument(flag, dest=dest, metavar="ID", help="count only memories of it")
    entities.add_argument("--tags", type=_csv, metavar="a,b", help="flat tag filter")
    entities.add_argument("--tags-match", choices=[m.value for m in Match])
    entities.add_argument("--lens", type=_csv, action="append", metavar="PATH[,PATH]")
    entities.add_argument("--as-of", "--at-instant", dest="as_of", metavar="INSTANT")
    entities.add_argument("--occurred-after", "--valid-from", dest="occurred_after",
                          metavar="INSTANT")
    entities.add_argument("--occurred-before", "--valid-until", dest="occurred_before",
                          metavar="INSTANT")
    entities.add_argument("--principal", metavar="WHO", help="act as this principal")

    receipt = sub.add_parser("receipt", parents=[common], allow_abbrev=False,
                             help="print a stored receipt / trace as JSON")
    receipt.add_argument("trace_id", metavar="ID", nargs="?", help="a trace_id or receipt_id")
    service_cli.add_commands(sub, _parser)
    for sub_parser in sub.choices.values():
        sub_parser.set_defaults(command_parser=sub_parser)
    return parser


def _cap_limit(args: argparse.Namespace) -> None:
    """The agent-memory seed's rule for ``k``: a ``--limit`` above ``max_limit`` is capped
    there, with a notice on stderr (not refused); below 1 the engine refuses it."""
    limit = getattr(args, "limit", None)
    if limit is not None and limit > ENGINE.max_limit:
        print(f"notice: --limit {limit} is capped at {ENGINE.max_limit}", file=sys.stderr)
        args.limit = ENGINE.max_limit


def split_modes(modes: Sequence[str] | None) -> dict[str, str]:
    """``--mode`` values -> request fields: ``accurate|fast`` -> ``mode``,
    ``hybrid|vector|bm25|graph`` -> ``channels`` (at most one of each; checked by
    :func:`check_args`).

    Example:
        >>> split_modes(["fast", "bm25"])
        {'mode': 'fast', 'channels': 'bm25'}
    """
    scoring = {m.value for m in Mode}
    out: dict[str, str] = {}
    for value in modes or ():
        out["mode" if value in scoring else "channels"] = value
    return out


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Required flags and combinations argparse cannot express (checked after unknown flags,
    so those are always named first): rejected with exit status 2."""
    if args.command in service_cli.COMMANDS:
        return
    if args.store is None and args.url is None:
        args.store = os.environ.get(STORE_ENV) or None
        args.url = None if args.store is not None else os.environ.get(URL_ENV) or None
    if args.store is not None and args.url is not None:
        parser.error("give exactly one of --store DIR and --url URL")
    if args.api_key is not None and args.url is None:
        parser.error("--api-key applies only with --url")
    missing = [] if args.store is not None or args.url is not None else [
        f"--store (or ${STORE_ENV}) or --url"]
    positional = {"recall": "query", "context": "query", "session-context": "query",
                  "chat": "query",
                  "write": "content", "receipt": "trace_id"}.get(args.command)
    if positional is not None and getattr(args, positional) is None:
        missing.append(positional)
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    targets = args.command in ("recall", "context", "session-context", "write", "entities",
                               "chat")
    route = getattr(args, "route", None)
    if targets and args.space_id is None and route is None and args.context_id is None:
        args.context_id = os.environ.get(CONTEXT_ENV) or None
    if targets and args.space_id is None and route is None and args.context_id is None:
        routed = "" if args.command == "entities" else " --route"
        parser.error(f"one of the arguments --space{routed} --context-id (or ${CONTEXT_ENV}) "
                     "is required")
    if targets and args.context_id is not None:  # the agent-memory API's name of the space
        args.space_id = args.context_id
    _cap_limit(args)
    if args.command == "chat" and args.route is not None:
        parser.error("chat is addressed only: give --context-id or --space, not --route")
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
    if args.command == "entities" and args.name is None and (
            args.memories is not None or args.related is not None):
        parser.error("--memories and --related apply to one entity: give its NAME")
    if args.command == "entities" and args.name is not None and args.contains is not None:
        parser.error("--contains filters the listing: give it without NAME")
    if args.command != "write":
        return
    if args.create_space and args.url is not None:
        parser.error("--create-space works on a local --store only; over --url create the "
                     "space with POST /v1/spaces")
    if args.create_space and args.space_id is None:
        parser.error("--create-space needs --space (a routed write picks an existing space)")
    if args.description is not None and not args.create_space:
        parser.error("--description applies only with --create-space")
