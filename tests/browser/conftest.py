"""Real-browser tests: Playwright driving Debian's chromium (never `playwright install`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def pytest_collection_modifyitems(config, items):
    if CHROMIUM:
        return
    if os.environ.get("REQUIRE_BROWSER") == "1":
        raise pytest.UsageError("REQUIRE_BROWSER=1 but Debian's chromium is not installed (apt-get install chromium)")
    skip = pytest.mark.skip(reason="Debian's chromium is not installed (apt-get install chromium)")
    for item in items:
        if "browser" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM,
            "args": ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run"]}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # A laptop's 1,280 px: what the researcher used, and what the layout must fit.
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}, "accept_downloads": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, db: Path, log: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = (),
                 port: int | None = None, module: str = "streamlit") -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = db
        env = {**os.environ, "LITMUS_REVIEW_DB": str(db), **(env or {})}
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "run", str(ROOT / "app.py"), "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"streamlit did not become healthy; see {log}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "browser.db", tmp_path / "streamlit.log")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def wait_app(page, text: str | None = None, timeout: int = 60_000) -> None:
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout)
    if text:
        page.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
    # Streamlit shows a running indicator while the script runs; wait for it to settle.
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def set_reviewer(page, name: str) -> None:
    """On the Review page: type a reviewer name, press Enter, and wait until it is set."""
    field = page.get_by_label("Reviewer (required to label)")
    field.fill(name)
    field.press("Enter")
    page.get_by_text(f"Reviewer: {name}").first.wait_for(timeout=30_000)
    wait_app(page)
