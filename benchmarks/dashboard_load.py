"""``python -m benchmarks.dashboard_load RUN_DIR``: how fast the dashboard's per-query page is
interactive in a real browser, on a warm server.

Starts ``streamlit run app.py`` (settings from ``.streamlit/config.toml``) on a free localhost
port with the run's outputs directory, drives Debian's Chromium through Playwright at 1,440 px,
opens the run's per-query page once (cold: reads the run, opens its store) and then
``--receipts`` receipts spread over the run by deep link (warm). A page counts as interactive
when the query's heading, the candidate table and its score-scale caption are shown and the
script run is over (Streamlit's status widget stays away for a settling moment, not counted).

Prints and writes (``--out``, default ``outputs/bench/dashboard_<time>.json``) every load in
seconds, their median and max, and the page height; exits 1 when the warm median exceeds
``--goal`` (default 3 s, the issue's bar). Timing goals live here, never in unit tests; the
browser test (tests/app/test_browser.py) reuses these helpers with a loose ceiling.

    python -m benchmarks.dashboard_load outputs/locomo/runs/<time> --receipts 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
WIDTH = 1440
GOAL_S = 3.0
SETTLE_MS = 1200
"""The status widget shows a run only after a moment: the page is idle once it has stayed
away this long (not counted in the measured load)."""

IDLE_JS = "() => !document.querySelector('[data-testid=stStatusWidget]')"
# Elements wider than the viewport, and the page's horizontal overflow. An element inside a
# scroll box that fits the viewport (a table grid, a code block) scrolls within it and is not
# an overflow of the page; anything else wider than the viewport is.
OVERFLOW_JS = """() => {
  const w = window.innerWidth;
  const clipped = (el) => {
    for (let a = el.parentElement; a; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (['auto', 'scroll', 'hidden', 'clip'].includes(o)
          && a.getBoundingClientRect().width <= w + 1) return true;
    }
    return false;
  };
  const wide = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width > w + 1 && !clipped(el)) wide.push(`${el.tagName}.${el.className}`.slice(0, 120));
  }
  return {wide: wide.slice(0, 10), scroll: document.documentElement.scrollWidth, width: w};
}"""
HEIGHT_JS = """() => Math.max(...[...document.querySelectorAll(
  '[data-testid=stMain], [data-testid=stMainBlockContainer], [data-testid=stAppViewContainer]')
].map(e => e.scrollHeight), document.documentElement.scrollHeight)"""
SHOT_MAX_HEIGHT = 12_000


def chromium() -> str | None:
    """Debian's Chromium (``apt-get install chromium``), never a downloaded browser."""
    return shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
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


@contextmanager
def serve(outputs: Path, log_path: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free localhost port reading ``outputs``; yields its URL.
    The server log must not show the file watcher's "Inotify" flood."""
    port = free_port()
    env = {**os.environ, "MEMORY_CORE_OUTPUTS": str(outputs)}
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
             "--server.port", str(port), "--server.address", "127.0.0.1"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if "Inotify" in log_path.read_text():
        raise AssertionError("the file watcher is on (see .streamlit/config.toml)")


@contextmanager
def browser(profile: Path) -> Iterator[object]:
    """A headless Chromium context at 1,440 x 1,000."""
    from playwright.sync_api import sync_playwright

    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=exe, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": WIDTH, "height": 1000})
        try:
            yield context
        finally:
            context.close()


def idle(page, timeout_ms: float = 90_000) -> float:
    """Wait until the script run is over; ``time.perf_counter()`` when it was first seen over
    (before the settling wait)."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.wait_for_function(IDLE_JS, timeout=timeout_ms)
        done = time.perf_counter()
        page.wait_for_timeout(SETTLE_MS)
        if page.evaluate(IDLE_JS):
            return done
        if time.monotonic() > deadline:
            raise TimeoutError("the app kept running")


def overflow(page) -> dict:
    """``{"wide": [elements wider than the viewport], "scroll": px, "width": px}``."""
    return page.evaluate(OVERFLOW_JS)


def screenshot(page, path: Path) -> int:
    """The whole page (Streamlit scrolls inside its main block, so the viewport is grown to the
    content's height for the shot and put back after); returns that height in px."""
    height = int(page.evaluate(HEIGHT_JS))
    page.set_viewport_size({"width": WIDTH, "height": min(height, SHOT_MAX_HEIGHT)})
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    return height


def open_receipt(page, server: str, run: Path, receipt_id: str, query: str,
                 timeout_ms: float = 120_000) -> float:
    """Load one receipt's per-query page by deep link; seconds until it is interactive."""
    from playwright.sync_api import expect

    url = f"{server}/?" + urlencode({"view": "query", "run": str(run), "receipt": receipt_id})
    t0 = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name=query)).to_be_visible(timeout=timeout_ms)
    expect(page.locator("[data-testid=stDataFrame]").first).to_be_visible(timeout=timeout_ms)
    expect(page.get_by_text("Score scales:")).to_be_visible(timeout=timeout_ms)
    return round(idle(page, timeout_ms) - t0, 3)


def main(argv: list[str] | None = None) -> int:
    import polars as pl

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run directory (metrics.json, per_query.parquet)")
    ap.add_argument("--receipts", type=int, default=10, help="warm loads to time")
    ap.add_argument("--goal", type=float, default=GOAL_S, help="warm median goal, seconds")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    run = args.run.resolve()
    pq = pl.read_parquet(run / "per_query.parquet").filter(pl.col("receipt_id").is_not_null())
    if pq.is_empty():
        print(f"{run}: no receipt to open", file=sys.stderr)
        return 2
    step = max(1, pq.height // (args.receipts + 1))
    picks = pq[::step].head(args.receipts + 1)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or ROOT / "outputs" / "bench" / f"dashboard_{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.with_suffix("")
    work.mkdir(parents=True, exist_ok=True)
    loads: list[float] = []
    with serve(run.parent.parent.parent, work / "streamlit.log") as url, \
            browser(work / "profile") as context:
        page = context.new_page()  # type: ignore[attr-defined]
        rows = list(picks.iter_rows(named=True))
        cold = open_receipt(page, url, run, rows[0]["receipt_id"], rows[0]["text"])
        for i, r in enumerate(rows[1:], start=1):
            loads.append(open_receipt(page, url, run, r["receipt_id"], r["text"]))
            print(f"warm load {i}/{len(rows) - 1}: {loads[-1]:.2f}s", file=sys.stderr)
        found = overflow(page)
        height = screenshot(page, work / "per_query.png")
    report = {"run": str(run), "receipts_in_run": pq.height, "cold_s": cold, "warm_s": loads,
              "warm_median_s": statistics.median(loads), "warm_max_s": max(loads),
              "goal_s": args.goal, "page_height_px": height, "overflow": found,
              "screenshot": str(work / "per_query.png")}
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0 if report["warm_median_s"] <= args.goal and not found["wide"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
