"""Run keys are the stored runs' names: the typed scoring request (issue 36) must give every run
the key it had before it. The keys were computed by the code before the request existed
(``fixtures/run_keys_before_request.json``) for the bundled samples and the real logs, with no
option, with ``--require-proof``, with a verdict map (Inspect logs) and with the side log
beside a sample; here the same runs are keyed again through ``score FILE`` and ``import``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoring.importers.inspect_log import VerdictMap
from scoring.report import evaluate_all
from scoring.request import ScoringRequest
from scoring.workspace import Workspace

from .conftest import SAMPLES

BEFORE = json.loads((Path(__file__).parent / "fixtures" / "run_keys_before_request.json").read_text())["keys"]
OPTION_SETS = {"": {}, "require_proof": {"require_proof": True},
               "verdict=agentharm_refusal": {"verdict_map": "agentharm_refusal"}, "payloads": None}


def _options(name: str, path: Path) -> dict:
    if name == "payloads":
        return {"payloads": path.with_name(path.stem + ".payloads.jsonl")}
    return dict(OPTION_SETS[name])


def _keys(path: Path, options: dict, tmp_path: Path) -> dict[str, list[str]]:
    # the verdict map is given as the CLI gives it (parsed) to one door and as text to the other
    text = dict(options)
    if isinstance(options.get("verdict_map"), str):
        options = options | {"verdict_map": VerdictMap.parse(options["verdict_map"])}
    ws = Workspace(tmp_path / f"w{len(list(tmp_path.iterdir()))}.db")
    return {"score": [ev.run.content_sha256 for ev in evaluate_all(path, **options)],
            "import": [r.run_key for r in ws.import_runs(path, ScoringRequest.of(**text))]}


def _cases(kind: str) -> list[tuple[str, str]]:
    return [tuple(k.split(":", 1)[1].split("|")) for k in sorted(BEFORE) if k.startswith(kind + ":")]


@pytest.mark.parametrize(("rel", "option_set"), _cases("samples"))
def test_a_bundled_samples_run_key_is_the_one_it_had_before_the_request(rel, option_set, tmp_path):
    path = SAMPLES / rel
    assert _keys(path, _options(option_set, path), tmp_path) == BEFORE[f"samples:{rel}|{option_set}"]


@pytest.mark.parametrize(("rel", "option_set"), _cases("real"))
def test_a_real_logs_run_key_is_the_one_it_had_before_the_request(rel, option_set, shared_real, tmp_path):
    path = shared_real / rel
    assert _keys(path, _options(option_set, path), tmp_path) == BEFORE[f"real:{rel}|{option_set}"]


def test_the_fixture_covers_every_option_set_and_both_kinds_of_log():
    names = {k.rsplit("|", 1)[1] for k in BEFORE}
    assert names == set(OPTION_SETS)
    assert len(_cases("samples")) >= 5 and len(_cases("real")) >= 30
