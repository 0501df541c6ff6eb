"""The dashboard in a real browser: ``streamlit run app.py`` on localhost, driven with Playwright
through Debian's Chromium (never a downloaded browser). Skipped only where Chromium is absent;
``.ci/run`` installs it so CI runs this test."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import polars as pl
import pytest

from memory_core import MemoryEngine

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]

pytestmark = [pytest.mark.browser, pytest.mark.model]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer at {url} within {timeout:.0f}s")


@pytest.fixture
def server(tiny_outputs, tmp_path):
    """``streamlit run app.py`` on a free localhost port, reading the tiny runs."""
    port = _free_port()
    env = {**os.environ, "MEMORY_CORE_OUTPUTS": str(tiny_outputs["outputs"])}
    log = (tmp_path / "streamlit.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
         "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_receipt_page_in_chromium(server, tiny_outputs, tmp_path):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); "
                    ".ci/run installs it so CI runs this test")
    from playwright.sync_api import expect, sync_playwright

    run = tiny_outputs["smoke"]
    pq = pl.read_parquet(run / "per_query.parquet")
    with MemoryEngine.open(run / "store") as eng:
        receipts = [eng.get_receipt(r) for r in pq["receipt_id"].to_list()]
        receipt = next(r for r in receipts
                       if {"limit", "dedup"} <= {d.reason.value for d in r.dropped})
        kept_text = [eng.get_memory(k.memory_id).content for k in receipt.kept]
    counts = Counter(d.reason.value for d in receipt.dropped)
    link = f"{server}/?" + urlencode({"view": "query", "run": str(run),
                                      "receipt": receipt.receipt_id})

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1600, "height": 2400})
        try:
            page = context.new_page()
            page.goto(link, wait_until="domcontentloaded")
            tables = page.locator("[data-testid=stTable]")
            # kept + one table per drop reason + the trace's candidates (in a closed expander)
            expect(tables).to_have_count(2 + len(counts), timeout=90_000)
            expect(page.get_by_role("heading", name=receipt.request["query"])).to_be_visible()
            expect(page.get_by_text(f"Kept ({len(receipt.kept)})")).to_be_visible()
            expect(page.get_by_text(f"Dropped ({len(receipt.dropped)})")).to_be_visible()
            for reason, n in counts.items():
                expect(page.get_by_text(f"{reason} · {n} cut")).to_be_visible()

            kept_table = tables.nth(0)
            for k, text in zip(receipt.kept, kept_text, strict=True):
                expect(kept_table).to_contain_text(k.memory_id)
                expect(kept_table).to_contain_text(text[:40])
            # kept rows: one body row per kept entry
            expect(kept_table.locator("tbody tr")).to_have_count(len(receipt.kept))
            dropped_text = " ".join(tables.nth(i).inner_text() for i in range(1, 1 + len(counts)))
            for d in receipt.dropped:
                assert d.memory_id in dropped_text
            block = page.locator("[data-testid=stCode]").first
            expect(block).to_contain_text("1. " + " ".join(kept_text[0].split())[:30])

            shot = tmp_path / "receipt.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            context.close()
