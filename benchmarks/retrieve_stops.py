"""How many stops one retrieve walks: the modules a reader passes following
``MemoryEngine.retrieve`` to its response (issue 51's bar: at most 45 stops in at most 20
modules).

    python -m benchmarks.retrieve_stops [--depth 3] [--list] [--out FILE.json]
    python /path/to/benchmarks/retrieve_stops.py --tree OTHER_CHECKOUT   # the same count there

One addressed fast-mode retrieve (``limit`` 5) over a small space (30 memories, the
model-free :class:`benchmarks.hash_engine.HashEmbedder`) is traced with
:func:`sys.setprofile`, after an untimed read of another query has built the space's index and
postings (and with the response cache cleared), so the count is a warm read's, not a first
read's. Frames outside ``memory_core`` (the standard library, pydantic, numpy) belong to the
module that called them, so ``memory_core`` code pydantic calls back (a request rule) is
reached from the module that asked pydantic to parse.

- a *stop* is a distinct (calling function, called function) pair whose modules differ, at
  most ``--depth`` module changes below ``memory_core.engine`` (depth 3: the facade, the
  modules it calls, the modules they call, and theirs); comprehensions and lambdas are part
  of their function;
- *modules*: the distinct modules those stops touch (the engine included);
- *returns*: the stops into a module already passed (in the order first reached);
- *call events* and *module changes*: every call into a ``memory_core`` function during the
  retrieve, and every one whose module differs from its caller's, at any depth (a per-candidate
  loop counts each turn).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

PACKAGE = "memory_core"


@dataclass(frozen=True)
class Count:
    depth: int
    stops: int
    modules: int
    returns: int
    call_events: int
    module_changes: int
    all_modules: int
    edges: tuple[tuple[str, str, str], ...]  # (from module, to module, function)


def _module(frame: FrameType) -> str:
    return frame.f_globals.get("__name__", "")


def trace_retrieve(depth: int = 3) -> Count:
    """Build the small store, warm it, trace one retrieve (see the module docstring)."""
    from benchmarks.hash_engine import HashEmbedder
    from memory_core import MemoryEngine

    eng = MemoryEngine.open(":memory:", embedder=HashEmbedder())
    eng.create_space("s", description="notes")
    eng.write_many("s", [{"content": f"Alice moved to Berlin in May {i}. zebra {i % 3}"}
                         for i in range(30)])
    body = {"query": "Where did Alice move?", "space_id": "s", "limit": 5, "mode": "fast"}
    eng.retrieve(dict(body, query="warm up"))
    eng.cache.clear()

    stack: list[tuple[str, int, CodeType | None]] = []  # (module, depth, code) per frame
    calls: list[tuple[int, str, CodeType | None, str, CodeType]] = []
    events = changes = 0
    touched: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal events, changes
        if event == "call":
            mod = _module(frame)
            if not mod.startswith(PACKAGE):  # outside: belongs to its caller's module
                stack.append(stack[-1] if stack else ("", 0, None))
                return
            events += 1
            touched.add(mod)
            if not stack:
                stack.append((mod, 0, frame.f_code))
                return
            caller, level, code = stack[-1]
            moved = mod != caller
            changes += moved and bool(caller)
            if moved and caller:
                calls.append((level + 1, caller, code, mod, frame.f_code))
            stack.append((mod, level + moved, frame.f_code))
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        eng.retrieve(body)
    finally:
        sys.setprofile(None)
        eng.close()
    edges: list[tuple[str, str, str]] = []
    seen: set[tuple[Any, CodeType]] = set()
    for level, caller, code, mod, callee in calls:
        if level > depth or callee.co_name.startswith("<") or (code, callee) in seen:
            continue
        seen.add((code, callee))
        edges.append((caller, mod, callee.co_name))
    visited, returns = {f"{PACKAGE}.engine"}, 0
    for _, mod, _ in edges:
        returns += mod in visited
        visited.add(mod)
    return Count(depth, len(edges), len(visited), returns, events, changes, len(touched),
                 tuple(edges))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=3, help="module changes below the engine")
    ap.add_argument("--tree", type=Path, help="count the memory_core of this checkout")
    ap.add_argument("--list", action="store_true", help="print each stop")
    ap.add_argument("--out", type=Path, help="write the count as JSON")
    args = ap.parse_args(argv)
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))
    count = trace_retrieve(args.depth)
    short = len(PACKAGE) + 1
    print(f"depth <= {count.depth}: {count.stops} stops in {count.modules} modules "
          f"({count.returns} returns to a module already passed); every depth: "
          f"{count.call_events} call events, {count.module_changes} module changes, "
          f"{count.all_modules} modules")
    if args.list:
        for src, dst, name in count.edges:
            print(f"    {src[short:]} -> {dst[short:]}.{name}")
    if args.out is not None:
        args.out.write_text(json.dumps(asdict(count), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
