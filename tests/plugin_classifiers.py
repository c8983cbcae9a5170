"""Re-classifier plug-ins the tests load by ``module:function`` (written for these tests;
protocol 3, ``scoring.classifiers``; the ``v2_`` ones answer as protocol-2 plug-ins did, and the
cheats answer ``read`` without reading the surfaces)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sys
import time


def _hmac(nonce: str, text: str) -> str:
    return hmac.new(nonce.encode("ascii"), text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def read_all(request: dict) -> list[dict]:
    """The ``read`` proof of a plug-in that read every full surface it was sent (protocol 3)."""
    return [{"index": c["index"], "hmac": _hmac(request["nonce"], c["arguments"])} for c in request["calls"]]


def knows_ssh_keys(request: dict) -> dict:
    """Finds harm the header's rules do not name; benign otherwise (proving what it read)."""
    for call in request["calls"]:
        if "id_rsa" in call["arguments"]:
            return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "C01",
                    "evidence": "ships an SSH key"}
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.9,
            "read": read_all(request), "name": "ssh-judge", "version": "1.0"}


def v2_knows_ssh_keys(request: dict) -> dict:
    """``knows_ssh_keys`` as a protocol-2 plug-in answered: no ``protocol``, ``read`` as the
    SHA-256 it computed of each surface (harm still counts; its benign certifies nothing)."""
    read = [{"index": c["index"], "sha256": hashlib.sha256(c["arguments"].encode("utf-8", "surrogatepass")).hexdigest()}
            for c in request["calls"]]
    harm = any("id_rsa" in c["arguments"] for c in request["calls"])
    return {"trajectory_id": request["trajectory_id"], "label": "C01" if harm else "benign", "confidence": 0.9,
            "read": read}


def copies_digests(request: dict) -> dict:
    """The audit's cheat: benign, with ``read`` copied from whatever digest the request carries,
    having read nothing (protocol 2 requests carried each surface's sha256)."""
    return {"trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "sha256": c.get("sha256", "")} for c in request["calls"]]}


def copies_digests_as_v3(request: dict) -> dict:
    """The same cheat dressed as protocol 3: anything in the request but the arguments as "hmac"."""
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "hmac": c.get("sha256") or request.get("nonce", "")}
                     for c in request["calls"]]}


def garbage_hmac(request: dict) -> dict:
    """Protocol 3, benign, ``read`` random hex of the right length."""
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "hmac": secrets.token_hex(32)} for c in request["calls"]]}


def sha256_as_hmac(request: dict) -> dict:
    """Protocol 3, benign, ``read`` the plain SHA-256 of each surface (no nonce)."""
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "hmac": hashlib.sha256(c["arguments"].encode()).hexdigest()}
                     for c in request["calls"]]}


def read_a_prefix(request: dict) -> dict:
    """Proves a read of an 8 KiB prefix, not of the full surface."""
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99,
            "read": [{"index": c["index"], "hmac": _hmac(request["nonce"], c["arguments"][:8192])}
                     for c in request["calls"]]}


_SEEN: dict[str, list[dict]] = {}


def replays_hmac(request: dict) -> dict:
    """Reads a trajectory the first time it is asked; asked again (a rescore, another run of the
    same trajectory), replays the ``read`` it answered then, under the earlier nonce."""
    tid = request["trajectory_id"]
    if tid not in _SEEN:
        _SEEN[tid] = read_all(request)
    return {"protocol": 3, "trajectory_id": tid, "label": "benign", "confidence": 0.99, "read": _SEEN[tid]}


def says_benign_unread(request: dict) -> dict:
    """Benign at high confidence without proving anything it read."""
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.99}


def says_benign_unsure(request: dict) -> dict:
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign", "confidence": 0.01,
            "read": read_all(request)}


def bare_string(request: dict) -> str:
    return "benign"


def logs_a_lot(request: dict) -> dict:
    """Prints (to what it thinks is stdout) and logs 256 KiB to stderr per request."""
    print("starting up")
    sys.stderr.write("x" * 256 * 1024 + "\n")
    return knows_ssh_keys(request)


def abstains(request: dict) -> dict:
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": None}


def says_nonsense(request: dict) -> dict:
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "C99"}


def raises(request: dict) -> dict:
    raise RuntimeError("model endpoint unreachable")


def hangs(request: dict) -> dict:
    time.sleep(600)
    return {"protocol": 3, "trajectory_id": request["trajectory_id"], "label": "benign"}


def slow_ssh_keys(request: dict) -> dict:
    """``knows_ssh_keys``, slowed by $LITMUS_TEST_CLASSIFIER_DELAY_S seconds per request (set on
    the Dask workers of the cluster tests, so a graph lasts long enough to lose a worker in it)."""
    import os

    time.sleep(float(os.environ.get("LITMUS_TEST_CLASSIFIER_DELAY_S", "0")))
    return knows_ssh_keys(request)
