"""``memory-core serve`` and ``memory-core keys create`` (added to :mod:`memory_core.cli`).

    memory-core keys create --store DIR|URI --principal NAME   # the key is stdout's last line
    memory-core serve --store DIR [--host 127.0.0.1] [--port 8080]
    memory-core serve --store postgresql://...   # a database store: keys in its api_keys table
    memory-core migrate --from DIR --to postgresql://...   # copy a store, its keys included
    memory-core mcp --store DIR|URI [--principal NAME] [--list-tools]  # MCP over stdio

Nothing here imports FastAPI, uvicorn or the MCP SDK until ``serve`` or ``mcp`` runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from memory_core.errors import MemoryCoreError

COMMANDS = ("serve", "keys", "migrate", "mcp")
KEYS_HELP = ("an API keys file to use instead of the store's own keys (default: keys.json in "
             "the store directory; a postgresql:// store's api_keys table)")


def add_commands(sub: Any, make_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``serve`` and ``keys`` to the ``memory-core`` sub-command set."""
    from memory_core.service.server import DEFAULT_HOST, DEFAULT_PORT

    serve = sub.add_parser("serve", allow_abbrev=False,
                           help="serve a store over HTTP (both seeds' APIs, bearer keys)")
    serve.add_argument("--store", required=True, metavar="DIR|URI",
                       help="the store directory, or a postgresql:// URI")
    serve.add_argument("--keys", metavar="FILE", help=KEYS_HELP)
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help=f"address to listen on (default {DEFAULT_HOST}: this machine only)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help=f"port (default {DEFAULT_PORT})")
    serve.add_argument("--max-body-bytes", type=int, metavar="N",
                       help="larger request bodies are 413 (default 1 MiB)")
    serve.add_argument("--cache-mb", type=float, metavar="MB",
                       help="what this process keeps per space (keyword postings, vector "
                       "indexes), least recently used first out (store.cache_mb; default "
                       "2048)")
    serve.add_argument("--engine-factory", metavar="MODULE:CALLABLE",
                       help="build the engine with this callable(store_dir) instead of "
                       "MemoryEngine.open (e.g. a model-free embedder for load tests)")

    keys = sub.add_parser("keys", allow_abbrev=False, help="API keys of a store's service")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys_sub.add_parser("create", allow_abbrev=False,
                                 help="create a key for a principal; prints it once")
    create.add_argument("--store", required=True, metavar="DIR|URI",
                        help="the store directory, or a postgresql:// URI")
    create.add_argument("--keys", metavar="FILE", help=KEYS_HELP)
    create.add_argument("--principal", required=True, metavar="NAME",
                        help="who the key acts as (space members name principals)")
    migrate = sub.add_parser("migrate", allow_abbrev=False,
                             help="copy a store directory into an empty PostgreSQL database "
                             "(same ids and vectors: nothing is embedded again)")
    migrate.add_argument("--from", dest="source", required=True, metavar="DIR",
                         help="the store directory to copy")
    migrate.add_argument("--to", dest="target", required=True, metavar="URI",
                         help="an empty PostgreSQL database (postgresql://...)")
    migrate.add_argument("--keys", metavar="FILE",
                         help="also copy the directory's API keys file here (the keys are "
                         "copied into the database in any case)")
    mcp = sub.add_parser("mcp", allow_abbrev=False,
                         help="serve a store's tools over MCP on stdin/stdout (an agent's "
                         "client starts this; `memory-core serve` serves them at /mcp)")
    mcp.add_argument("--store", required=True, metavar="DIR|URI",
                     help="the store directory, or a postgresql:// URI")
    mcp.add_argument("--principal", metavar="NAME",
                     help="who the tool calls act as (default: the store's owner)")
    mcp.add_argument("--list-tools", action="store_true",
                     help="print the tools and their fields (asked over MCP) and exit")
    mcp.add_argument("--engine-factory", metavar="MODULE:CALLABLE",
                     help="build the engine with this callable(store_dir) instead of "
                     "MemoryEngine.open (tests: a model-free embedder)")
    for parser in (serve, keys, create, migrate, mcp):
        parser.set_defaults(command_parser=parser)


def run(args: argparse.Namespace) -> int:
    """Run ``serve`` or ``keys create``; returns the exit status."""
    if args.command == "serve":
        from memory_core.service.server import serve

        if not 0 < args.port < 65536:
            args.command_parser.error(f"--port must be 1-65535, got {args.port}")
        if args.max_body_bytes is not None and args.max_body_bytes < 1:
            args.command_parser.error("--max-body-bytes must be >= 1")
        if args.cache_mb is not None and not 0 <= args.cache_mb <= 2**40:
            args.command_parser.error("--cache-mb must be >= 0")
        try:
            serve(args.store, args.host, args.port, args.engine_factory, args.max_body_bytes,
                  args.keys, args.cache_mb)
        except ValueError as exc:  # a bad --engine-factory or a damaged keys file
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except MemoryCoreError as err:  # a store it cannot open (an unsupported URL)
            print(f"error: {err.code.value}/{err.reason}: {err.message}", file=sys.stderr)
            return 1
        return 0
    if args.command == "migrate":
        return _migrate(args)
    if args.command == "mcp":
        return _mcp(args)
    from memory_core.service.keys import KeyStore

    try:
        store = KeyStore.for_store(args.store, args.keys)
        try:
            key = store.create(args.principal)
        finally:
            store.close()
    except MemoryCoreError as err:
        print(f"error: {err.code.value}/{err.reason}: {err.message}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"API key for principal {args.principal!r}, shown once (stored hashed in "
          f"{store.path}):", file=sys.stderr)
    print(key)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    """``memory-core migrate``: rows copied per table on stderr, the summary on stdout."""
    import shutil
    from dataclasses import astuple
    from pathlib import Path

    from memory_core.service.keys import KEYS_FILE, KeyStore
    from memory_core.store.location import StoreKind, parse_location
    from memory_core.store.uri import redact_url

    try:
        if parse_location(args.target).kind is not StoreKind.POSTGRESQL:
            args.command_parser.error("--to must be a postgresql:// URI")
        if parse_location(args.source).kind is not StoreKind.DIRECTORY:
            args.command_parser.error("--from must be a store directory")
        from memory_core.store.pg.migrate import migrate

        keys = Path(args.source) / KEYS_FILE
        records = KeyStore(keys).records()  # none without the file; a damaged one refuses
        counts = migrate(args.source, args.target,
                         lambda table, n: print(f"{table}: {n} rows", file=sys.stderr),
                         [astuple(r) for r in records])
    except MemoryCoreError as err:
        print(f"error: {err.code.value}/{err.reason}: {err.message}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a damaged keys file: nothing copied
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.keys is not None and keys.is_file():
        shutil.copyfile(keys, args.keys)
    print(f"copied {counts['memories']} memories in {counts['spaces']} spaces "
          f"({counts['receipts']} receipts, {counts['api_keys']} API keys) to "
          f"{redact_url(args.target)}")
    return 0



def _mcp(args: argparse.Namespace) -> int:
    """``memory-core mcp``: stdout carries the protocol alone; errors go to stderr."""
    from pathlib import Path

    from memory_core.service.mcp_server import run_stdio
    from memory_core.service.server import resolve_factory
    from memory_core.store.location import parse_location

    if not parse_location(args.store).is_url and not Path(args.store).is_dir():
        print(f"error: not_found/store_missing: no store directory {args.store!r}",
              file=sys.stderr)
        return 1
    try:
        run_stdio(args.store, resolve_factory(args.engine_factory), args.principal,
                  args.list_tools)
    except ValueError as exc:  # a bad --engine-factory
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except MemoryCoreError as err:  # a store it cannot open
        print(f"error: {err.code.value}/{err.reason}: {err.message}", file=sys.stderr)
        return 1
    return 0
