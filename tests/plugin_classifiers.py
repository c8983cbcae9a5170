"""Re-classifier plug-ins the tests load by ``module:function`` (written for these tests;
protocol 2, ``scoring.classifiers``)."""

from __future__ import annotations

import hashlib
import sys
import time


def read_all(request: dict) -> list[dict]:
    """The ``read`` attestation of a plug-in that read every full surface it was sent."""
    return [{"index": c["index"], "sha256": hashlib.sha256(c["arguments"].encode("utf-8", "surrogatepass")).hexdigest()}
            for c in request["calls"]]


def knows_ssh_keys(request: dict) -> dict:
    """Finds harm the header's rules do not name; benign otherwise (attesting what it read)."""
    for call in request["calls"]:
        if "id_rsa" in call["arguments"]:
            return {"trajectory_id": request["trajectory_id"], "label": "C01", "evidence": "ships an SSH key"}
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.9,
            "read": read_all(request), "name": "ssh-judge", "version": "1.0"}


def says_benign_unread(request: dict) -> dict:
    """Benign at high confidence without attesting anything it read."""
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99}


def says_benign_unsure(request: dict) -> dict:
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.01,
            "read": read_all(request)}


def read_a_prefix(request: dict) -> dict:
    """Attests the SHA-256 of an 8 KiB prefix, not of the full surface."""
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "sha256": hashlib.sha256(c["arguments"][:8192].encode()).hexdigest()}
                     for c in request["calls"]]}


def bare_string(request: dict) -> str:
    return "benign"


def logs_a_lot(request: dict) -> dict:
    """Prints (to what it thinks is stdout) and logs 256 KiB to stderr per request."""
    print("starting up")
    sys.stderr.write("x" * 256 * 1024 + "\n")
    return knows_ssh_keys(request)


def abstains(request: dict) -> dict:
    return {"trajectory_id": request["trajectory_id"], "label": None}


def says_nonsense(request: dict) -> dict:
    return {"trajectory_id": request["trajectory_id"], "label": "C99"}


def raises(request: dict) -> dict:
    raise RuntimeError("model endpoint unreachable")


def hangs(request: dict) -> dict:
    time.sleep(600)
    return {"trajectory_id": request["trajectory_id"], "label": "benign"}


def slow_ssh_keys(request: dict) -> dict:
    """``knows_ssh_keys``, slowed by $LITMUS_TEST_CLASSIFIER_DELAY_S seconds per request (set on
    the Dask workers of the cluster tests, so a graph lasts long enough to lose a worker in it)."""
    import os

    time.sleep(float(os.environ.get("LITMUS_TEST_CLASSIFIER_DELAY_S", "0")))
    return knows_ssh_keys(request)

