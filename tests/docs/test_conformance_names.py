"""``docs/conformance.md`` names code that exists: in each row's "implemented in" cell, every
code name after a module path (`memory_core/x.py` `Class.method`, `function`) imports from that
module (a name after "settings", "config", "key", "reason", ... is a setting or a wire name,
not code), every path it names exists, and every test it names (`tests/...py::test_x`,
`::test_y` for the same file) is a test function of that file."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "conformance.md"
CODE = re.compile(r"`([^`]+)`")
MODULE = re.compile(r"^(memory_core|experiments)(/\w+)*\.py$")
NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
# a name after one of these words is a setting, a wire key or a column, not code
RESET = re.compile(r"\b(settings?|config|weight|field|column|key|reason|stage)\b")
TEST = re.compile(r"^(tests/[\w/]+\.py)?::(\w+)$")


def _tokens(cell: str) -> list[tuple[str, str]]:
    """Each code token of a cell with the text between it and the one before."""
    out, end = [], 0
    for m in CODE.finditer(cell):
        out.append((cell[end:m.start()], m.group(1)))
        end = m.end()
    return out


def _rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 4 and cells[0].isdigit():
            rows.append(cells)
    return rows


def _module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def code_names() -> list[tuple[str, str]]:
    """(module, dotted name) for every name the "implemented in" cells give after a module."""
    out = []
    for cells in _rows():
        module = None
        for gap, token in _tokens(cells[2]):
            token = token.split("(", 1)[0].strip()
            if RESET.search(gap):
                module = None
            if MODULE.match(token):
                module = _module_name(token)
            elif module is not None and NAME.match(token):
                out.append((module, token))
    return sorted(set(out))


def named_tests() -> list[tuple[str, str]]:
    """(test file, function) for every test the "test" cells name."""
    out = []
    for cells in _rows():
        path = None
        for token in CODE.findall(cells[3]):
            m = TEST.match(token.strip())
            if m is None:
                continue
            path = m.group(1) or path
            assert path is not None, f"{token} names no file"
            out.append((path, m.group(2)))
    return sorted(set(out))


def test_the_document_names_code():
    assert len(code_names()) >= 20 and len(named_tests()) >= 20


@pytest.mark.parametrize(("module", "name"), code_names())
def test_named_code_imports(module, name):
    obj = importlib.import_module(module)
    for part in name.split("."):
        assert hasattr(obj, part), f"docs/conformance.md: {module} has no {name}"
        obj = getattr(obj, part)


@pytest.mark.parametrize(("path", "name"), named_tests())
def test_named_tests_exist(path, name):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert name in defined, f"docs/conformance.md: {path} has no {name}"


def test_named_paths_exist():
    text = DOC.read_text(encoding="utf-8")
    paths = {t.split("::")[0] for t in CODE.findall(text)
             if re.match(r"^(memory_core|tests|experiments|benchmarks)/[\w/.]*$", t.split("::")[0])}
    assert paths and sorted(p for p in paths if not (ROOT / p).exists()) == []
