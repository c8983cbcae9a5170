from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_runs"
SHARED_REAL = ROOT.parent / "shared" / "real"


def load_generator():
    spec = importlib.util.spec_from_file_location("sample_generate", SAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sample_generate"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def generator():
    return load_generator()


@pytest.fixture(scope="session")
def shared_real() -> Path:
    """../shared/real, read at test time. Skipped only outside CI."""
    if not SHARED_REAL.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SHARED_REAL} is missing under CI")
        pytest.skip(f"{SHARED_REAL} is absent (outside CI the real logs are optional)")
    return SHARED_REAL
