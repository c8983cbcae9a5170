"""Re-classifier plug-ins the tests load by ``module:function`` (written for these tests)."""

from __future__ import annotations

import time


def knows_ssh_keys(request: dict) -> dict:
    """Finds harm the header's rules do not name; benign otherwise."""
    for call in request["calls"]:
        if "id_rsa" in call["arguments"]:
            return {"trajectory_id": request["trajectory_id"], "label": "C01", "evidence": "ships an SSH key"}
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.9}


def abstains(request: dict) -> None:
    return None


def says_nonsense(request: dict) -> dict:
    return {"label": "C99"}


def raises(request: dict) -> dict:
    raise RuntimeError("model endpoint unreachable")


def hangs(request: dict) -> dict:
    time.sleep(5)
    return {"label": "benign"}


SEEN: list[dict] = []


def records(request: dict) -> str:
    SEEN.append(request)
    return "benign"


def slow_ssh_keys(request: dict) -> dict:
    """``knows_ssh_keys``, slowed by $LITMUS_TEST_CLASSIFIER_DELAY_S seconds per request (set on
    the Dask workers of the cluster tests, so a graph lasts long enough to lose a worker in it)."""
    import os

    time.sleep(float(os.environ.get("LITMUS_TEST_CLASSIFIER_DELAY_S", "0")))
    return knows_ssh_keys(request)
