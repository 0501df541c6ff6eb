"""The README's layout table is complete and true; the README starts with the two commands."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_ROW = re.compile(r"^\| `(?P<path>[^`]+)` \| (?P<what>.*) \|$")
_TOKEN = re.compile(r"`([^`\s]+)`")
_PATHLIKE = re.compile(r"^[\w./-]+(/|\.(py|toml|yaml|md|ipynb|json))$|^(Makefile|run)$")


def layout_rows(text: str) -> dict[str, str]:
    """``path -> what`` for the rows of the "## Layout" table."""
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = _ROW.match(line.strip())
        if m:
            rows[m["path"]] = m["what"]
    return rows


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return out.stdout.splitlines()


def test_readme_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert lines[2:6] == [
        "```bash",
        "make run    # creates .venv if missing, installs, runs `python -m experiments.run` on "
        "the synthetic world",
        "make test   # same set-up, then the test suite",
        "```",
    ]


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= 180


def test_layout_table_names_only_paths_that_exist():
    rows = layout_rows(README.read_text())
    assert rows, "no layout table under '## Layout'"
    missing = []
    for path, what in rows.items():
        base = ROOT / path
        if not base.exists():
            missing.append(path)
        # a file named in the description exists at the root or under the row's own path
        for token in _TOKEN.findall(what):
            if not _PATHLIKE.match(token):
                continue
            where = [ROOT / token, base / token] if base.is_dir() else [ROOT / token]
            if not any(p.exists() for p in where):
                missing.append(f"{token} (row {path})")
    assert missing == [], f"the layout table names paths that do not exist: {missing}"


def test_layout_table_lists_every_top_level_dir_package_and_engine_module():
    rows = layout_rows(README.read_text())
    named = set(rows) | {f"{p.rstrip('/')}/{t}" for p, w in rows.items()
                         for t in _TOKEN.findall(w)}
    files = tracked_files()
    top_dirs = {f.split("/")[0] + "/" for f in files if "/" in f}
    packages = {str(Path(f).parent) + "/" for f in files
                if f.endswith("/__init__.py") and f.count("/") == 2}
    modules = {Path(f).name for f in files
               if f.startswith("memory_core/") and f.count("/") == 1 and f.endswith(".py")
               and not f.endswith("__init__.py")}
    engine_row = rows.get("memory_core/", "")
    unlisted = sorted(d for d in top_dirs | packages if d not in rows and d not in named)
    unlisted += sorted(f"memory_core/{m}" for m in modules if f"`{m}`" not in engine_row)
    assert unlisted == [], f"add these to the README's layout table: {unlisted}"
