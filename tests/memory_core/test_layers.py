"""The house rules of ``memory_core/``, read from its source (``ast``, nothing imported):
no import circle (module-level and function-level imports both count, ``TYPE_CHECKING``
blocks too), no import from a higher floor, at most 22 modules at the top level and none
over 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "memory_core"

# the floors, lowest first: a module may import its own floor and those below it
FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"types", "errors", "config"}),
    frozenset({"store", "times", "trace", "validate", "redact", "entities", "embed",
               "index_files", "context", "receipts", "requests", "llm"}),
    frozenset({"filters"}),
    frozenset({"channels", "fusion", "rerank", "routing", "expansion", "results"}),
    frozenset({"pipeline"}),
    frozenset({"access", "cache", "reads", "write", "engine_routing", "serve",
               "entity_graph"}),
    frozenset({"engine"}),
    frozenset({"cli", "service", "__init__"}),
)


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def imports_of(name: str) -> set[str]:
    """The ``memory_core`` modules ``name`` imports anywhere in its source: ``import a.b``,
    ``from a import b`` (``a.b`` when it is a module, else ``a``), relative forms resolved."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    return {m for m in found if m in MODULES and m != name}


def _floor(name: str) -> int:
    top = name.split(".")[1] if "." in name else "__init__"
    for i, floor in enumerate(FLOORS):
        if top in floor:
            return i
    raise AssertionError(f"{name}: its top-level name {top!r} is on no floor of FLOORS")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    graph = {m: imports_of(m) for m in MODULES}
    assert _cycles(graph) == []


def test_the_circle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_from_a_higher_floor():
    upward = sorted(f"{m} -> {t}" for m in MODULES for t in imports_of(m)
                    if _floor(t) > _floor(m))
    assert upward == []


def test_top_level_has_at_most_22_modules():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 22, top


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
