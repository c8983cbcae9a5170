"""What opening Safe rates on the bundled samples costs in a real browser (issue 35 item 9).

The app is started as ``make run`` starts it (``pages._shared.serve``: the app made ready while
the server starts) on a fresh workspace; Debian's chromium (Playwright) opens Safe rates at
1,280 × 900, each time in a fresh browser context (no cache, no session: a person opening a
link). In the page, from navigation (``performance.now()``), at the frame after each appears:

- **shell** (the baseline): the page's title drawn, Streamlit's shell and the script's first
  element, before any chart: the floor of anything on the page, measured in the same load;
- **first chart**: the first chart drawn, whatever its element (an image loaded, or plotly's
  ``.main-svg``), and whether it is on the first screen;
- **first plotly chart** and **every chart**: plotly.js evaluated and the first plotly chart
  drawn, then every plotly chart shown on the page.

Each figure is printed with its ratio to the shell of the same load (median of the opens, range
in brackets). The server's first session is printed apart. ``--write`` puts the table in
benches/RESULTS.md. ``benches/safe_rates_open.py`` measures the server's share.

    python benches/safe_rates_browser.py [--opens N] [--label TEXT] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_file import replace_section  # noqa: E402  (beside this file: run as a script)

BEGIN, END = "<!-- safe-rates-browser -->", "<!-- /safe-rates-browser -->"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

MARKS = """
(() => {
  const marks = {};
  window.__litmusMarks = marks;
  const at = (name, extra) => {
    if (name in marks) return;
    marks[name] = -1;  // seen: its time is the next frame's, when it is painted
    requestAnimationFrame(() => {
      marks[name] = performance.now();
      if (extra) marks[name + " on first screen"] = extra;
    });
  };
  const drawnImage = () => [...document.querySelectorAll('[data-testid="stImage"] img')]
    .find(img => img.complete && img.naturalWidth > 0);
  const check = () => {
    const title = document.querySelector('h1');
    if (title && /Safe rates/.test(title.textContent)) at("shell");
    if (!("image element" in marks) && document.querySelector('[data-testid="stImage"] img'))
      marks["image element"] = performance.now();
    if (!("metric" in marks) && document.querySelector('[data-testid="stMetric"]')) marks["metric"] = performance.now();
    const img = drawnImage();
    const plot = document.querySelector('[data-testid="stPlotlyChart"] .main-svg');
    const first = img || plot;
    if (first) at("first chart", first.getBoundingClientRect().top < innerHeight ? "yes" : "no");
    if (plot) at("first plotly chart");
    // The paired chart is the page's last element: once it is drawn every other one is on the page.
    const last = [...document.querySelectorAll(".main-svg")].some(s => /Paired difference/.test(s.textContent));
    const shown = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(e => e.offsetParent);
    if (last && shown.every(e => e.querySelector('.main-svg'))) at("every chart");
  };
  marks.longtasks = [];
  try {
    new PerformanceObserver(list => list.getEntries().forEach(e => marks.longtasks.push([Math.round(e.startTime),
      Math.round(e.duration)]))).observe({type: "longtask", buffered: true});
  } catch (e) {}
  document.addEventListener("load", e => { if (e.target.tagName === "IMG" && !("image loaded" in marks))
    marks["image loaded"] = performance.now(); }, true);
  new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true});
  document.addEventListener("load", check, true);
  setInterval(check, 50);
})();
"""
STEPS = ("shell", "first chart", "first plotly chart", "every chart")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pages._shared.serve", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, "LITMUS_REVIEW_DB": str(db)}, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"the app did not become healthy; see {log}")


def open_once(browser, url: str) -> dict[str, float | str]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        context.add_init_script(MARKS)
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("() => window.__litmusMarks['every chart'] > 0", timeout=180_000)
        return dict(page.evaluate("() => window.__litmusMarks"))
    finally:
        context.close()


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    from playwright.sync_api import sync_playwright  # optional: the bench's browser (a dev dependency)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--opens", type=int, default=7)
    ap.add_argument("--label", default="", help="what was measured (e.g. the commit), in the section's heading")
    ap.add_argument("--write", action="store_true", help="put the table in benches/RESULTS.md")
    ap.add_argument("--verbose", action="store_true", help="print each open's marks and long tasks")
    args = ap.parse_args()
    load_before = load()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        proc, url = start_server(Path(tmp) / "bench.db", Path(tmp) / "streamlit.log")
        try:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"])
            time.sleep(5)  # a person opens the page some seconds after starting the app
            first = open_once(browser, url + "/safe_rates")
            opens = [open_once(browser, url + "/safe_rates") for _ in range(args.opens)]
            browser.close()
            if args.verbose:
                for o in [first, *opens]:
                    print({k: (round(v) if isinstance(v, float) else v) for k, v in o.items()})
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    shells = [float(o["shell"]) for o in opens]
    on_screen = sorted({str(o.get("first chart on first screen", "?")) for o in opens})
    lines = [BEGIN, "## Opening Safe rates on the bundled samples: in the browser (issue 35 item 9)", "",
             f"Generated by `benches/safe_rates_browser.py` at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
             + (f" ({args.label})" if args.label else "") + f" on {platform.machine()}, {os.cpu_count()} cores, "
             f"chromium headless at 1,280 × 900, the app started by its launcher: median of {args.opens} opens, each "
             f"in a fresh browser context (range in brackets). Load average before: {load_before}; after: {load()}. "
             f"Baseline: the shell of the same load (the page's title drawn), {median(shells) / 1000:.2f} s.", "",
             "| from navigation to | seconds | ÷ shell |", "|---|---|---|"]
    for step in STEPS:
        vals = [float(o[step]) / 1000 for o in opens]
        ratios = [float(o[step]) / float(o["shell"]) for o in opens]
        lines.append(f"| {step} | {median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f}) | **{median(ratios):.2f}×** |")
    lines += ["", f"The first chart was on the first screen (1,280 × 900): {', '.join(on_screen)}. The server's first "
              f"session (opened 5 s after the start): shell {float(first['shell']) / 1000:.2f} s, first chart "
              f"{float(first['first chart']) / 1000:.2f} s, every chart {float(first['every chart']) / 1000:.2f} s.",
              END]
    print("\n".join(lines))
    if args.write:
        replace_section(lines, BEGIN, END)


if __name__ == "__main__":
    main()
