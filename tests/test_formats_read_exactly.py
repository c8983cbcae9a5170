"""Reading harness logs as their harness means them: detection hints, verdict maps that never
guess, run status, LITMUS's own retry and judgement rules, AgentDojo's shape (issue 14)."""

from __future__ import annotations

import json

import pytest

from scoring.errors import InputError, UnknownFormatError
from scoring.importers import load_run

from .conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "importers"


# --- unrecognised files name the closest format -------------------------------------------


def test_unrecognised_file_names_the_closest_format_and_the_option_to_force_it(tmp_path):
    p = tmp_path / "sims.json"
    # a tau2-like document whose simulations key was renamed: tau2's other keys are there
    p.write_text(json.dumps({"runs": [{"termination_reason": "max_steps", "reward_info": {}, "messages": []}]}))
    with pytest.raises(UnknownFormatError) as info:
        load_run(p)
    assert info.value.closest == "tau2"
    assert "closest: tau2" in str(info.value) and "--format tau2" in str(info.value)
    assert "tried:" in str(info.value)  # the list of every format tried stays


def test_unrecognised_file_with_no_known_key_says_so(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"something": "else"}')
    with pytest.raises(UnknownFormatError) as info:
        load_run(p)
    assert info.value.closest is None and "none of the keys" in str(info.value)


@pytest.mark.parametrize("content", [b"", b"\n  \n"])
def test_empty_file_is_called_empty_not_unrecognised(tmp_path, content):
    p = tmp_path / "e.jsonl"
    p.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_run(p)
    assert not isinstance(info.value, UnknownFormatError)
    assert info.value.message.startswith("empty file") and info.value.source == str(p)
