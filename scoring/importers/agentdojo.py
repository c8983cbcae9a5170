"""AgentDojo: native TraceLogger files and the Invariant JSONL export.

``security: true`` means the injection goal WAS achieved (the attack succeeded) → unsafe, in
the category ``injection_success``. Without an injection, security is vacuously true and
measures nothing → no verdict. A run forced to ``security=true`` by an API or context error is
an early stop (abnormal verdict), not unsafe. A trace ending on an assistant turn whose tool
calls never ran hit the loop cap → early stop. Structural standard.

Task ids are suite-qualified (``banking/user_task_3``): AgentDojo numbers user tasks per suite,
so ``user_task_3`` of banking and of travel are different tasks (and different clusters for the
task-clustered interval). A file that looks like AgentDojo but lacks its own shape (forks exist
whose ``security: true`` means the opposite) is refused, naming the fields that are missing.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from ..model import EvidenceStandard, Run, RunHeader, Trajectory
from ._agentdojo import TAXONOMY, attacks_text, suites_text, task_id, trajectory
from ._common import (
    Item,
    RecordError,
    build_run,
    file_budget,
    first_line,
    iter_json_lines,
    load_json_document,
)
from ._zip import Budget
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "agentdojo"
#: Keys this format writes (the closest-format hint of an unrecognised file).
HINTS = (b'"suite_name"', b'"user_task_id"', b'"injection_task_id"', b'"attack_type"', b'"security"',
         b'"pipeline_name"', b'"utility"')
#: What the format needs to recognise a file (said when it refuses one).
NEEDS = ("one AgentDojo trace object with suite_name and pipeline_name, or an Invariant export whose line 1 "
         "names agent-dojo")
continuations = no_continuations
NATIVE_FIELDS = ("suite_name", "pipeline_name", "user_task_id", "injection_task_id", "attack_type", "messages",
                 "security")
"""Keys of AgentDojo's own TraceLogger file (values may be null; the keys are its shape)."""
EXPORT_FIELDS = ("suite_name", "user_task_id", "injection_task_id", "attack_type", "security")
"""Keys of an Invariant export record's ``metadata``."""


def _missing(obj: dict, fields: tuple[str, ...], where: str = "") -> None:
    absent = [where + f for f in fields if f not in obj]
    if absent:
        raise RecordError("not AgentDojo's own trace shape: missing " + ", ".join(absent)
                          + " (a look-alike file may mean the opposite by 'security')")


def sniff(head: bytes) -> bool:
    line = first_line(head)
    if line.startswith(b"{") and b'"agent-dojo"' in line:
        return True
    return head.lstrip().startswith(b"{") and b'"suite_name"' in head and b'"pipeline_name"' in head


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    if first_line(data[:65536]).startswith(b"{") and b'"agent-dojo"' in first_line(data[:65536]):
        return _parse_invariant(data, source, file_budget(data, source, options.decode_budget))
    budget = file_budget(data, source, options.decode_budget)
    doc = load_json_document(data, source, budget)
    if not isinstance(doc, dict):
        raise RecordError("expected one AgentDojo trace object")
    _missing(doc, NATIVE_FIELDS)
    if not isinstance(doc["messages"], list):
        raise RecordError("field 'messages' is not a list")
    inj = doc.get("injection_task_id")
    tid = f"{doc.get('suite_name')}-{doc.get('user_task_id')}-{inj}-{doc.get('attack_type')}"
    injection = f", {inj}" if inj not in (None, "", "none") else ""
    header = RunHeader(run_id=Path(source).stem, model=str(doc.get("pipeline_name", "unknown")),
                       task=task_id(doc.get("suite_name"), doc.get("user_task_id")),
                       variant=attacks_text([doc.get("attack_type")]) + injection, harness_name="agentdojo",
                       harness_version=str(doc.get("agentdojo_package_version", "")),
                       taxonomy=TAXONOMY, evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)
    item = (None, tid, lambda: trajectory(
        tid, task_id(doc.get("suite_name"), doc.get("user_task_id")), doc["messages"], security=doc.get("security"),
        injection=inj,
        error=doc.get("error"), model=None, suite=doc.get("suite_name")))
    return build_run(header=header, items=[item], source=source, data=data, budget=budget)


def _exported(tid: str, obj: dict, md: dict) -> Trajectory:
    """One trace of an Invariant export (``md``: its metadata)."""
    inj = md.get("injection_task_id")
    return trajectory(tid, task_id(md.get("suite_name"), md.get("user_task_id")), obj["messages"],
                       security=md.get("security"), injection=inj, error=None, model=md.get("model"),
                       suite=md.get("suite_name"))


def _parse_invariant(data: bytes, source: str, budget: Budget) -> Run:
    items: list[Item] = []
    meta: dict = {}
    model = None
    suites: set = set()
    attacks: list = []
    for line, obj in iter_json_lines(data, source, budget):
        if isinstance(obj, RecordError):
            items.append((line, None, obj))
            continue
        if line == 1 and isinstance(obj, dict) and "messages" not in obj:
            meta = obj.get("metadata", {})
            continue
        md = obj.get("metadata", {}) if isinstance(obj, dict) else {}
        if not isinstance(md, dict):
            md = {}
        try:
            _missing(md, EXPORT_FIELDS, "metadata.")
            if not isinstance(obj.get("messages"), list):
                raise RecordError("missing messages (a list)")
        except RecordError as exc:
            items.append((line, None, exc.with_traceback(None)))  # kept until the run is built: not its frames
            continue
        model = model or md.get("model")
        suites.add(md.get("suite_name"))
        attacks.append(md.get("attack_type"))
        inj = md.get("injection_task_id")
        tid = f"{md.get('suite_name')}-{md.get('user_task_id')}-{inj}-{md.get('attack_type')}-{obj.get('index', line)}"
        items.append((line, tid, partial(_exported, tid, obj, md)))
    header = RunHeader(run_id=Path(source).stem, model=model or str(meta.get("name", "unknown")),
                       task=suites_text(suites), variant=attacks_text(set(attacks)),
                       harness_name="agentdojo (invariant export)", taxonomy=TAXONOMY,
                       evidence_standard=EvidenceStandard.STRUCTURAL, format=NAME, source=source)
    return build_run(header=header, items=items, source=source, data=data, budget=budget)
