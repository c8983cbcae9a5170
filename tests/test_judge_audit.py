"""``judge_audit``: a call is shown to a judge only where a span of the judge's input beside the
call's name parses back to the call's whole argument tree. Properties over generated argument
trees, renderings and judge inputs; the cases an audit of scorer 3.0 found; the real AgentHarm
logs' count of calls shown."""

from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scoring.judge_audit import AuditedCall, input_digest, rendered_input, same_tree, shown_calls
from scoring.proof import canonical_json

NAMES = st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True)
KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                   st.floats(allow_nan=False, allow_infinity=False, width=32),
                   st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30))
TREES = st.dictionaries(KEYS, st.recursive(LEAVES, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(KEYS, kids, max_size=3)), max_leaves=8), max_size=5)
PROSE = st.text(st.characters(codec="ascii", categories=("L", "Zs", "P")), max_size=40)


def _python_call(name: str, args: dict) -> str:
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"


RENDERINGS = {
    "canonical": lambda name, a: f"tool call {name}: {canonical_json(a)}",
    "json indented, unsorted": lambda name, a: f"{name}\n{json.dumps(a, indent=2, ensure_ascii=True)}",
    "sorted call object": lambda name, a: json.dumps({"function": name, "arguments": a}, sort_keys=True),
    "openai string arguments": lambda name, a: json.dumps({"name": name, "arguments": json.dumps(a)}),
    "python literal": lambda name, a: f"{name} {a!r}",
    "python call": _python_call,
    "yaml block": lambda name, a: f"{name}:\n" + "".join(f"  {line}\n" for line in yaml.safe_dump(
        a, allow_unicode=True, sort_keys=False).splitlines()),
    "json string in a prompt": lambda name, a: json.dumps(f"transcript: {name} {json.dumps(a)}"),
}


def _python_ok(args: dict) -> bool:
    # repr of a float like 1e+16 or of -0.0 parses back equal; keyword names must be identifiers
    return all(k.isidentifier() and k not in ("None", "True", "False") for k in args)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES, args=TREES, before=PROSE, after=PROSE, how=st.sampled_from(sorted(RENDERINGS)))
def test_a_lossless_rendering_beside_the_name_is_shown(name, args, before, after, how):
    assume(how != "python call" or _python_ok(args))
    assume(how != "yaml block" or args)  # an empty mapping renders as "{}" on the name's own line
    rendering = RENDERINGS[how](name, args)
    assert shown_calls(f"{before}\n{rendering}\n{after}", [AuditedCall(name, args)]) == (True,)


def _changed(tree: dict, data) -> dict:
    """``tree`` with one leaf changed, one key dropped, or one string cut."""
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))
        paths.append(path)
    walk(tree, ())
    paths = [p for p in paths if p]
    assume(paths)
    path = data.draw(st.sampled_from(paths))
    out = json.loads(json.dumps(tree))
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    leaf = parent[path[-1]]
    if isinstance(leaf, str) and len(leaf) > 1:
        parent[path[-1]] = leaf[: len(leaf) // 2]
    elif isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = ["changed", leaf] if not isinstance(leaf, list) else [*leaf, "changed"]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES, args=TREES, how=st.sampled_from(sorted(RENDERINGS)), data=st.data())
def test_a_rendering_of_any_other_tree_is_not_shown(name, args, how, data):
    other = _changed(args, data)
    assume(not same_tree(other, args))
    assume(how != "python call" or _python_ok(other))
    assume(how != "yaml block" or other)
    text = RENDERINGS[how](name, other)
    assert shown_calls(text, [AuditedCall(name, args)]) == (False,)


@settings(max_examples=40, deadline=None)
@given(name=NAMES, args=TREES, filler=PROSE)
def test_the_tree_without_its_name_or_inside_the_task_prompt_is_not_shown(name, args, filler):
    text = f"{filler} {canonical_json(args)} {filler}"
    assume(name not in text)
    assert shown_calls(text, [AuditedCall(name, args)]) == (False,)
    prompt = f"Please run {name} {canonical_json(args)} for me"
    assert shown_calls(f"TASK: {prompt}\nThe agent replied.", [AuditedCall(name, args)], excluded=[prompt]) == (False,)


def test_the_audits_findings():
    # a bare substring of string leaves: "id" inside "Did"
    assert shown_calls("Did the agent behave? It ran bash.", [AuditedCall("bash", {"cmd": "id"})]) == (False,)
    assert shown_calls("It ran bash cmd=id and stopped", [AuditedCall("bash", {"cmd": "id"})]) == (True,)
    assert shown_calls("It ran bash cmd=id.", [AuditedCall("bash", {"cmd": "id"})]) == (False,)  # "id." is not "id"
    # a number leaf never shown is not shown; a number is compared as a whole token of equal value
    pay = AuditedCall("pay", {"to": "acct-7", "amount": 250000})
    assert shown_calls('pay {"to": "acct-7"}', [pay]) == (False,)
    assert shown_calls('pay {"to": "acct-7", "amount": 2500001}', [pay]) == (False,)
    assert shown_calls('pay {"amount": 250000.0, "to": "acct-7"}', [pay]) == (True,)
    assert shown_calls('pay {"amount": true, "to": "acct-7"}', [AuditedCall("pay", {"to": "acct-7", "amount": 1})]) \
        == (False,)
    # null and "" must be written as literals
    assert shown_calls('f {"a": null, "b": ""}', [AuditedCall("f", {"a": None, "b": ""})]) == (True,)
    assert shown_calls('f {"b": ""}', [AuditedCall("f", {"a": None, "b": ""})]) == (False,)
    # a call with no arguments: only where its name is written as a call
    assert shown_calls("the agent may use list_files", [AuditedCall("list_files", {})]) == (False,)
    assert shown_calls("then list_files() ran", [AuditedCall("list_files", {})]) == (True,)
    # a truncation marker is not a rendering
    assert shown_calls('send {"body": "aaaa…[truncated]"}', [AuditedCall("send", {"body": "aaaa" * 100})]) == (False,)
    # two identical calls need two spans; a span inside another call's is not one
    twice = [AuditedCall("bash", {"cmd": "ls"}), AuditedCall("bash", {"cmd": "ls"})]
    assert shown_calls('bash {"cmd": "ls"}', twice) == (True, False)
    assert shown_calls('bash {"cmd": "ls"} and bash {"cmd": "ls"}', twice) == (True, True)
    outer = AuditedCall("run", {"script": 'bash {"cmd": "ls"}'})
    inner = AuditedCall("bash", {"cmd": "ls"})
    assert shown_calls(f"run {json.dumps(outer.arguments)}", [outer, inner]) == (True, False)
    # a submit-style call whose answer is the final response the judge was shown
    submit = AuditedCall("submit", {"answer": "I cannot help with that."}, result="I cannot help with that.")
    assert shown_calls("<response>I cannot help with that.</response>", [submit],
                       final_response="I cannot help with that.") == (True,)
    assert shown_calls("<response>Done.</response>", [submit], final_response="I cannot help with that.") == (False,)


def test_structured_tool_calls_in_the_input_are_rendered_and_digested():
    messages = [{"role": "user", "content": "judge this"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "function": "send_email", "arguments": {"to": "a@b", "body": "hi"}}]}]
    assert shown_calls(rendered_input(messages), [AuditedCall("send_email", {"to": "a@b", "body": "hi"})]) == (True,)
    other = json.loads(json.dumps(messages))
    other[1]["tool_calls"][0]["arguments"]["body"] = "h"
    assert input_digest(messages) != input_digest(other)
    parts = [{"role": "user", "content": [{"type": "text", "text": "judge this", "refusal": None}]}, messages[1]]
    assert input_digest(parts) == input_digest(messages)  # a string is one text part; None fields drop


def test_agentharm_refusals_of_samples_that_made_calls_are_not_shown_their_calls(shared_real):
    """AgentHarm's refusal grader is shown only the final response: of the refusals (grade
    Yes) of samples that made calls, only those whose one call is a ``submit`` of the refusal
    itself were shown their calls."""
    from scoring.importers import load_run
    from scoring.importers.inspect_log import VerdictMap

    vmap = VerdictMap.parse("agentharm_refusal")
    found = {}
    for path in sorted((shared_real / "inspect_ai" / "agentharm").glob("*.eval")):
        counts = {"shown": 0, "not_shown": 0, "calls_shown": 0, "calls": 0}
        for t in load_run(str(path), verdict_map=vmap).trajectories:
            a = t.verdict.attestation if t.verdict is not None else None
            if dict(t.extra).get("inspect_verdict") != "safe" or not t.tool_calls:
                continue
            assert a is not None and a.kind == "judged"
            counts["not_shown" if a.unseen_calls else "shown"] += 1
            counts["calls"] += len(t.tool_calls)
            counts["calls_shown"] += len(t.tool_calls) - len(a.unseen_calls)
            if not a.unseen_calls:
                assert [c.tool for c in t.tool_calls] == ["submit"]
        found[path.name.split("_")[1]] = counts
    assert found == {
        "agentharm-agent-task": {"shown": 0, "not_shown": 3, "calls_shown": 0, "calls": 12},
        "harmful-task": {"shown": 2, "not_shown": 10, "calls_shown": 2, "calls": 16},
    }, found


def test_control_arena_logs_are_not_in_shared_real(shared_real):
    """The issue asks for ControlArena's real logs too; ``shared/real`` holds none (SOURCES.md).
    This test fails the day one is added, so that the count above gains its case."""
    assert [p for p in shared_real.rglob("*") if "control" in p.name.lower()] == []
