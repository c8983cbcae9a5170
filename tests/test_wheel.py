"""The wheel carries the review app: `litmus-review serve` works from an install outside the
checkout (it once found app.py by a path relative to scoring/, which only a checkout has)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import free_port, wait_for_health

ROOT = Path(__file__).resolve().parent.parent


def _uv() -> str:
    uv = ROOT / ".tools" / "bin" / "uv"
    found = str(uv) if uv.is_file() else shutil.which("uv")
    if found is None:
        pytest.fail("uv is needed to build the wheel (make sync installs it in .tools/)")
    return found


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv, outside the checkout, holding the wheel built from it and the locked
    dependencies (installed by uv from its cache or the package registry)."""
    tmp = tmp_path_factory.mktemp("wheel")
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT")}
    _run(uv, "build", "--wheel", "--out-dir", tmp / "dist", ROOT, cwd=tmp, env=env)
    (wheel,) = (tmp / "dist").glob("litmus_review-*.whl")
    _run(uv, "venv", "--quiet", "--python", sys.executable, tmp / "venv", cwd=tmp, env=env)
    _run(uv, "export", "--project", ROOT, "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--quiet",
         "-o", tmp / "requirements.txt", cwd=tmp, env=env)
    _run(uv, "pip", "install", "--quiet", "--python", tmp / "venv" / "bin" / "python", "-r", tmp / "requirements.txt",
         wheel, cwd=tmp, env=env)
    return tmp


def _clean_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["LITMUS_REVIEW_DB"] = str(tmp / "workspace.db")
    return env


def test_the_installed_cli_finds_the_app_it_carries(installed):
    venv = installed / "venv"
    env = _clean_env(installed)
    assert "Start the review app" in _run(venv / "bin" / "litmus-review", "serve", "--help", cwd=installed, env=env)
    out = _run(venv / "bin" / "python", "-c",
               "import scoring; from scoring.cli import app_script; "
               "print(app_script()); print(scoring.__file__)",
               cwd=installed, env=env).split()
    app, scoring_init = Path(out[0]), Path(out[1])
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert app == site / "litmus_review_app" / "app.py"
    assert scoring_init.is_relative_to(site), "the test must exercise the installed scoring, not the checkout"
    for beside in ("pages/_shared/router.py", ".streamlit/config.toml", "sample_runs/observed-m1.jsonl"):
        assert (app.parent / beside).is_file(), beside


def test_serve_from_the_wheel_answers_health(installed):
    port = free_port()
    log = (installed / "serve.log").open("w")
    proc = subprocess.Popen([str(installed / "venv" / "bin" / "litmus-review"), "serve", "--port", str(port)],
                            cwd=installed, env=_clean_env(installed), stdout=log, stderr=subprocess.STDOUT)
    try:
        def alive() -> None:
            assert proc.poll() is None, (installed / "serve.log").read_text()

        if not wait_for_health(port, 90, alive):
            pytest.fail("the installed app did not answer /_stcore/health within 90 s:\n"
                        + (installed / "serve.log").read_text())
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


def test_the_installed_app_runs_its_pages(installed):
    """The app script of the wheel runs under AppTest in the installed venv: its pages and sample
    runs are found beside it, with no exception."""
    script = (
        "from streamlit.testing.v1 import AppTest\n"
        "from scoring.cli import app_script\n"
        "at = AppTest.from_file(str(app_script()), default_timeout=120)\n"
        "at.run()\n"
        "assert not at.exception, [e.value for e in at.exception]\n"
        "print(*[t.value for t in at.title])\n"
    )
    out = _run(installed / "venv" / "bin" / "python", "-c", script, cwd=installed, env=_clean_env(installed))
    assert "Safe rates" in out


def test_a_checkout_serves_its_own_app():
    from scoring.cli import app_script

    assert app_script() == ROOT / "app.py"
