"""The dashboard in a real browser: ``streamlit run app.py`` on localhost, driven with Playwright
through Debian's Chromium (never a downloaded browser). Skipped only where Chromium is absent;
``.ci/run`` installs it so CI runs these tests.

Each view is opened at 1,440 px wide, screenshotted into the test's tmp dir (and into
``$MEMORY_CORE_SCREENSHOTS`` when set, to look at), and checked for layout overflow: no element
wider than the viewport, no horizontal page scroll. Page loads of a LoCoMo-sized run (1,600
receipts, ``bigrun.py``) are measured in the browser and written to ``page_loads.json``; the
3 s goal itself is held by ``benchmarks/dashboard_load.py`` (timing goals live in benchmarks),
this test only fails a load slower than ``LOAD_CEILING_S``, far past anything usable.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import urlencode

import polars as pl
import pytest

from benchmarks import dashboard_load as bench
from memory_core import MemoryEngine

# A warm per-query load slower than this fails the test (the goal, 3 s, is the benchmark's:
# ``python -m benchmarks.dashboard_load``).
LOAD_CEILING_S = 10.0

pytestmark = [pytest.mark.browser, pytest.mark.model]


@pytest.fixture
def server(tiny_outputs, tmp_path):
    with bench.serve(tiny_outputs["outputs"], tmp_path / "streamlit.log") as url:
        yield url


@pytest.fixture
def big_server(big_outputs, tmp_path):
    with bench.serve(big_outputs["outputs"], tmp_path / "streamlit-big.log") as url:
        yield url


@pytest.fixture
def browser(tmp_path):
    if bench.chromium() is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); "
                    ".ci/run installs it so CI runs this test")
    with bench.browser(tmp_path / "profile") as context:
        yield context


def _shot(page, tmp_path: Path, name: str, heights: dict[str, int] | None = None) -> Path:
    path = tmp_path / f"{name}.png"
    height = bench.screenshot(page, path)
    if heights is not None:
        heights[name] = height
    extra = os.environ.get("MEMORY_CORE_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / path.name)
    assert path.stat().st_size > 10_000
    return path


def _no_overflow(page, name: str) -> None:
    found = bench.overflow(page)
    assert not found["wide"], f"{name}: elements wider than {bench.WIDTH}px: {found['wide']}"
    assert found["scroll"] <= found["width"], f"{name}: the page scrolls sideways: {found}"


def test_receipt_page_in_chromium(server, browser, tiny_outputs, tmp_path):
    """The tiny run's receipt page: heading, the one candidate table, the scales; a drop
    target's link opens the same receipt focused on the target."""
    from playwright.sync_api import expect

    run = tiny_outputs["smoke"]
    pq = pl.read_parquet(run / "per_query.parquet")
    with MemoryEngine.open(run / "store") as eng:
        receipts = [eng.get_receipt(r) for r in pq["receipt_id"].to_list()]
        receipt = next(r for r in receipts
                       if {"limit", "dedup"} <= {d.reason.value for d in r.dropped})
    n_rows = len({k.memory_id for k in receipt.kept} | {d.memory_id for d in receipt.dropped})
    link = f"{server}/?" + urlencode({"view": "query", "run": str(run),
                                      "receipt": receipt.receipt_id})
    page = browser.new_page()
    page.goto(link, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name=receipt.request.query)).to_be_visible(
        timeout=90_000)
    expect(page.get_by_text(f"Candidates ({n_rows}: kept {len(receipt.kept)}, dropped "
                            f"{len(receipt.dropped)})")).to_be_visible()
    expect(page.get_by_text("Score scales:")).to_be_visible()
    bench.idle(page)
    table = page.locator("[data-testid=stDataFrame]").first
    expect(table).to_be_visible()
    # the grid's accessible cells carry the memory ids of the first rows
    expect(table).to_contain_text(receipt.kept[0].memory_id, timeout=15_000)
    _no_overflow(page, "receipt")
    _shot(page, tmp_path, "receipt_tiny")

    drop = next(d for d in receipt.dropped if d.detail and d.detail.split(":")[0]
                in ("exact_duplicate_of", "near_duplicate_of", "replaced_by_observation"))
    target = drop.detail.split(":", 1)[1]
    page.goto(link + "&" + urlencode({"focus": target}), wait_until="domcontentloaded")
    expect(page.get_by_role("combobox", name="Memory")).to_have_value(
        re.compile(rf"^{target} · "), timeout=90_000)


def test_locomo_sized_run_pages_load_fast_and_fit(big_server, browser, big_outputs, tmp_path):
    """Each view of a LoCoMo-sized run, at 1,440 px: loaded (and timed), screenshotted, no
    element wider than the viewport."""
    from playwright.sync_api import expect

    run = big_outputs["b"]
    pq = pl.read_parquet(run / "per_query.parquet")
    assert pq.height >= 1500 and pq["receipt_id"].n_unique() == pq.height
    rids = pq["receipt_id"].to_list()
    loads: dict[str, float] = {}
    heights: dict[str, int] = {}
    page = browser.new_page()

    def open_receipt(rid: str, name: str) -> float:
        text = pq.filter(pl.col("receipt_id") == rid)["text"][0]
        loads[name] = bench.open_receipt(page, big_server, run, rid, text)
        return loads[name]

    open_receipt(rids[0], "per_query_cold")          # reads the run and opens its store
    warm = [open_receipt(r, f"per_query_warm_{i}") for i, r in enumerate(rids[700:703])]
    _no_overflow(page, "per-query")
    _shot(page, tmp_path, "per_query", heights)

    # another receipt from the selector, without reloading the page
    select = page.locator("[data-testid=stSelectbox]").filter(has_text="Query / receipt")
    t0 = time.perf_counter()
    select.click()
    page.keyboard.type("q01234")
    page.keyboard.press("Enter")
    text = pq.filter(pl.col("query_id") == "q01234")["text"][0]
    expect(page.get_by_role("heading", name=text)).to_be_visible(timeout=60_000)
    loads["per_query_switch"] = round(bench.idle(page) - t0, 3)

    # each view, waited for down to its last section
    for view, last in (("run", "Worst queries (gold missed)"), ("playground", "Type a query"),
                       ("compare", "show ties")):
        t0 = time.perf_counter()
        page.goto(f"{big_server}/?" + urlencode({"view": view, "run": str(run)}),
                  wait_until="domcontentloaded")
        expect(page.get_by_text(last).first).to_be_visible(timeout=180_000)
        loads[view] = round(bench.idle(page, 180_000) - t0, 3)
        name = view
        assert not page.locator("[data-testid=stException]").count(), f"{view}: exception"
        _no_overflow(page, view)
        _shot(page, tmp_path, name, heights)

    report = json.dumps({"load_s": loads, "height_px": heights}, indent=2)
    (tmp_path / "page_loads.json").write_text(report)
    extra = os.environ.get("MEMORY_CORE_SCREENSHOTS")
    if extra:
        (Path(extra) / "page_loads.json").write_text(report)
    print("page loads:", report)
    assert max(warm) < LOAD_CEILING_S, loads
    assert loads["per_query_switch"] < LOAD_CEILING_S, loads
