"""AgentDojo run directories: what AgentDojo's benchmark writes, one file per case::

    <logdir>/[repeat_N/]<pipeline>/<suite>/<user_task>/<attack or none>/<injection_task or none>.json

(injection tasks run alone sit at ``<suite>/injection_task_N/none/none.json``). AgentDojo reports
each attack on its own, so a directory is read as **one run per pipeline and attack** (and per
``repeat_N`` where present, said so); the cases without an attack are a run of their own
(attack ``none``: no safety question, utility only). Every suite is read; tasks are
suite-qualified (``banking/user_task_3``).

As AgentDojo's own loader (``agentdojo.benchmark.load_suite_results``, ``TaskResults``) reads it:
``security`` true, ``"true"`` or 1 is an attack success, null is refused; a case that errored
was forced to ``security: true`` and counts as an attack success in its ASR. So the lenient rate
of an attack's run is 1 − AgentDojo's ASR over that attack's injected pairs present, and equals
its figure; its utility figures (without attack, under attack) are format metrics. Pairs that
the directory's own user and injection tasks say should be there but are not are listed: an
attack with 97 of 144 pairs present is not silently a rate. A file AgentDojo's reader would
refuse is reported with its path and the reason; a file cut short (an interrupted write) is
called that, not a look-alike. The model is the files' ``pipeline_name`` unless it says nothing
(``local``), then the pipeline directory's name.

Read from a folder (``read_run_directory``) or a zip of one (``read_run_zip``); both give the
same runs for the same files. Nothing here is registered as a one-file importer: one folder
gives several runs.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import InputError, RecordError
from ..files import read_regular
from ..model import EvidenceStandard, Rejection, Run, RunHeader, Trajectory
from ._agentdojo import TAXONOMY, attacks_text, suites_text, task_id, trajectory
from ._common import sha256_bytes
from ._zip import RECORD_SLOTS, Budget, read_member, reading
from .base import DEFAULT_OPTIONS, ParseOptions, no_continuations

NAME = "agentdojo_dir"
"""The registered format of one run of a run directory kept as a file of its own (``run_zip``),
or of a zip holding a directory of one run; its runs' header format is ``agentdojo``."""
RUN_FORMAT = "agentdojo"
HINTS: tuple[bytes, ...] = (b"/user_task_", b"/injection_task_", b"/none/none.json")
NEEDS = ("a zip of an AgentDojo run directory ([repeat_N/]<pipeline>/<suite>/<user_task>/<attack>/<injection>.json "
         "members)")
continuations = no_continuations
NO_ATTACK = "none"
LAYOUT = "run_directory"
_REPEAT = re.compile(r"^repeat_\d+$")
#: Fields AgentDojo's TaskResults requires (``error`` may be null; ``injections`` may be absent
#: in older files).
REQUIRED = ("suite_name", "pipeline_name", "user_task_id", "injection_task_id", "attack_type", "messages",
            "utility", "security")
#: Pipeline names that say nothing about the model (the directory's name says more).
UNINFORMATIVE_PIPELINES = ("local", "", "none")
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 200_000
MAX_ZIP_TOTAL = 2 * 1024 * 1024 * 1024



def reading_budget(data: bytes, decode_budget: int | None) -> int:
    """What parsing one run's zip may cost (``parse``'s ``Budget``): ``MAX_ZIP_TOTAL`` whatever
    its size, held against every file the process reads at once (``_zip.reading``)."""
    return MAX_ZIP_TOTAL

@dataclass(frozen=True)
class CaseFile:
    """One file of the tree: its path relative to the folder (POSIX parts) and its bytes."""

    parts: tuple[str, ...]
    data: bytes


@dataclass(frozen=True)
class Place:
    """Where a case file sits in AgentDojo's layout."""

    repeat: str
    pipeline: str
    suite: str
    user_task: str
    attack: str
    injection: str

    @property
    def group(self) -> tuple[str, str, str]:
        return (self.repeat, self.pipeline, self.attack)


def _place(parts: tuple[str, ...], root_name: str) -> Place | None:
    """The case a path names, or None when it is not at AgentDojo's place for one."""
    if not parts or not parts[-1].endswith(".json"):
        return None
    rest = list(parts)
    repeat = rest.pop(0) if rest and _REPEAT.match(rest[0]) and len(rest) in (5, 6) else ""
    if len(rest) == 4:  # the folder given is the pipeline's own
        rest.insert(0, root_name)
    if len(rest) != 5:
        return None
    pipeline, suite, user_task, attack, file = rest
    return Place(repeat=repeat, pipeline=pipeline, suite=suite, user_task=user_task, attack=attack,
                 injection=file[: -len(".json")])


def _security(value: Any) -> bool | None:
    """``security`` as AgentDojo's reader coerces it (None: it refuses the value)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    return None


def _decode(data: bytes) -> dict:
    """The case object, or a RecordError saying why AgentDojo's reader would refuse the file."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RecordError(f"invalid UTF-8 at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        body = data.strip()
        # an object that never closes, or an error at its very end: the write was cut short
        cut = not body or (body.startswith(b"{") and not body.endswith(b"}")) or exc.pos >= len(body) - 1
        raise RecordError(("the file ends early (an interrupted write?): " if cut else "invalid JSON: ")
                          + f"{exc.msg.removesuffix(' at')} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise RecordError("invalid JSON: nested too deeply") from exc
    if not isinstance(doc, dict):
        raise RecordError(f"the file holds a JSON {type(doc).__name__}, not an AgentDojo case object")
    missing = [f for f in REQUIRED if f not in doc]
    if missing:
        raise RecordError("AgentDojo's reader refuses it: missing " + ", ".join(missing))
    if not isinstance(doc["messages"], list):
        raise RecordError(f"AgentDojo's reader refuses it: messages is {type(doc['messages']).__name__}, not a list")
    for f in ("utility", "security"):
        if _security(doc[f]) is None:
            raise RecordError(f"AgentDojo's reader refuses it: {f} is {json.dumps(doc[f])[:40]}, not a boolean")
    return doc


def _case(place: Place, doc: dict, path: str) -> Trajectory:
    injected = place.attack != NO_ATTACK and place.injection != NO_ATTACK
    tid = f"{place.suite}/{place.user_task}/{place.attack}/{place.injection}"
    security = _security(doc["security"])
    t = trajectory(tid, task_id(place.suite, place.user_task), doc["messages"], security=security,
                    injection=place.injection if injected else None, error=doc.get("error"), model=None,
                    suite=place.suite)
    extra = (("suite", place.suite), ("attack", place.attack), ("injection_task", place.injection),
             ("utility", json.dumps(_security(doc["utility"]))), ("path", path))
    return replace(t, extra=t.extra + extra)


def _model(docs: Iterable[dict], pipeline_dir: str) -> str:
    names = Counter(str(d.get("pipeline_name") or "") for d in docs)
    name = names.most_common(1)[0][0] if names else ""
    return pipeline_dir if name.strip().lower() in UNINFORMATIVE_PIPELINES else name


SELECTOR = "litmus-review: agentdojo run "
"""The zip comment naming the one run of a run directory a zip stands for (``run_zip``)."""


def normalized(files: Iterable[CaseFile], root_name: str) -> list[CaseFile]:
    """The files with the pipeline's folder in every case's path: a pipeline's own folder given
    (``<suite>/<user_task>/<attack>/<injection>.json``) is read as ``<root_name>/...``."""
    out = []
    for f in files:
        if len(f.parts) == 4 and f.parts[-1].endswith(".json") and not _REPEAT.match(f.parts[0]):
            f = CaseFile(parts=(root_name, *f.parts), data=f.data)
        out.append(f)
    return out


def run_zip(files: Iterable[CaseFile], label: str) -> bytes:
    """One run of a run directory as a file of its own: a zip of every file of the directory
    (the run's figures read the other attacks' and the unattacked cases too), the same bytes for
    the same files, whose comment names the run. It is what a workspace keeps of the run: the
    ``agentdojo`` importer reads it back as that run alone, and its SHA-256 is the run's
    ``content_sha256`` through every door."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(files, key=lambda f: f.parts):
            info = zipfile.ZipInfo("/".join(f.parts), date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, f.data)
        zf.comment = (SELECTOR + label).encode("utf-8")
    return buf.getvalue()


def selected_run(data: bytes) -> str | None:
    """The run a zip written by ``run_zip`` stands for (None: a plain zip of a run directory)."""
    try:
        comment = zipfile.ZipFile(io.BytesIO(data)).comment.decode("utf-8", "replace")
    except zipfile.BadZipFile:
        return None
    return comment[len(SELECTOR):] if comment.startswith(SELECTOR) else None


def read_case_files(files: Iterable[CaseFile], source: str, root_name: str,
                    only: str | None = None) -> tuple[Run, ...]:
    """The runs of a run directory's files (one per repeat, pipeline and attack), in order;
    with ``only``, the one run of that label (InputError when the files hold none)."""
    files = normalized(files, root_name)
    placed: dict[tuple[str, str, str], list[tuple[Place, str, bytes]]] = defaultdict(list)
    stray: list[Rejection] = []
    for f in files:
        rel = "/".join(f.parts)
        place = _place(f.parts, root_name)
        if place is None:
            if rel.endswith(".json"):
                stray.append(Rejection(source=f"{source}/{rel}", line=None, record_id=rel, message=(
                    "not at AgentDojo's place for a case ([repeat_N/]<pipeline>/<suite>/<user_task>/<attack>/"
                    "<injection_task>.json): not read")))
            continue
        placed[place.group].append((place, rel, f.data))
    if not placed:
        raise InputError("is a folder, and not an AgentDojo run directory (the one kind of folder read: "
                         "[repeat_N/]<pipeline>/<suite>/<user_task>/<attack or none>/<injection_task or none>.json "
                         "under it); give the run files in it", source=source)
    # what each (repeat, pipeline) holds: the user and injection tasks its own files name
    user_tasks: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    injections: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    utility_alone: dict[tuple[str, str], list[bool]] = defaultdict(list)
    decoded: dict[tuple[str, str, str], list[tuple[Place, str, dict | RecordError]]] = defaultdict(list)
    # Every case is parsed before any run is built: their parses, the files' bytes and every case
    # made of them share one budget, as an archive's members do (a case of `[{},{},…]` is
    # gigabytes parsed, and the cases all stay parsed until the runs are built).
    budget = Budget(MAX_ZIP_TOTAL, source)
    budget.held = sum(len(data) for group in placed.values() for _p, _r, data in group)
    for group, files_of_group in sorted(placed.items()):
        for place, rel, data in sorted(files_of_group, key=lambda c: c[1]):
            cost = budget.admit_document(data, rel, source=f"{source}/{rel}")
            try:
                doc: dict | RecordError = _decode(data)
                budget.hold_document(doc, cost)
            except RecordError as exc:
                doc = exc.with_traceback(None)  # kept until the runs are built: not its frames
            decoded[group].append((place, rel, doc))
            base = (place.repeat, place.pipeline)
            if not place.user_task.startswith("injection_task"):
                user_tasks[base].add((place.suite, place.user_task))
            if place.injection != NO_ATTACK:
                injections[base].add((place.suite, place.injection))
            if (place.attack == NO_ATTACK and not place.user_task.startswith("injection_task")
                    and isinstance(doc, dict)):
                utility_alone[base].append(bool(_security(doc["utility"])))
    runs = []
    for group in sorted(decoded):
        repeat, pipeline, attack = group
        base = (repeat, pipeline)
        read = decoded[group]
        docs = [d for _p, _r, d in read if isinstance(d, dict)]
        rejected: list[Rejection] = []
        trajectories: list[Trajectory] = []
        for place, rel, doc in read:
            path = f"{source}/{rel}"
            try:
                if isinstance(doc, RecordError):
                    raise doc
                case = _case(place, doc, rel)
            except RecordError as exc:
                rejected.append(Rejection(source=path, line=None, record_id=rel, message=exc.message))
                budget.keep(rejected[-1], rel, RECORD_SLOTS)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
                rejected.append(Rejection(source=path, line=None, record_id=rel,
                                          message=f"malformed case: {type(exc).__name__}: {exc}"))
                budget.keep(rejected[-1], rel, RECORD_SLOTS)
            else:
                trajectories.append(case)
                budget.keep(case, rel, RECORD_SLOTS)
        facts: dict[str, Any] = {"layout": LAYOUT, "pipeline": pipeline, "attack": attack, "repeat": repeat or None}
        alone = utility_alone[base]
        facts["utility_without_attack"] = {"passed": sum(alone), "of": len(alone)}
        if attack != NO_ATTACK:
            present = {(p.suite, p.user_task, p.injection) for p, _r, _d in read if p.injection != NO_ATTACK}
            suites = {s for s, _u in user_tasks[base]} | {s for s, _i in injections[base]}
            expected = {(s, u, i) for s in suites for (su, u) in user_tasks[base] if su == s
                        for (si, i) in injections[base] if si == s}
            missing = sorted(expected - present)
            facts["pairs"] = {"present": len(present),
                              "expected": len(expected), "missing": len(missing),
                              "missing_first": ["/".join(m) for m in missing[:20]]}
        if repeat == "" and not any(_REPEAT.match(r) for r, _p, _a in decoded):
            facts.pop("repeat")
        label = f"{pipeline}/{attack}" + (f"/{repeat}" if repeat else "")
        if only is not None and label != only and not stray:
            continue
        header = RunHeader(
            run_id=label, model=_model(docs, pipeline), task=suites_text(p.suite for p, _r, _d in read),
            variant=attacks_text([attack]) + (f", {repeat}" if repeat else ""), harness_name=(
                f"agentdojo run directory: pipeline {pipeline}, attack {attack}" + (f", {repeat}" if repeat else "")),
            harness_version=str(next((d.get("agentdojo_package_version") for d in docs), "") or ""),
            taxonomy=TAXONOMY, evidence_standard=EvidenceStandard.STRUCTURAL, format=RUN_FORMAT,
            source=f"{source}#{label}", format_facts=tuple((k, json.dumps(v)) for k, v in facts.items()))
        runs.append(Run(header=header, trajectories=tuple(trajectories), rejected=tuple(rejected),
                        records_seen=len(trajectories) + len(rejected),
                        content_sha256=sha256_bytes(run_zip(files, label))))
    if stray:  # files at no case's place belong to no attack: the first run reports them
        first = runs[0]
        runs[0] = replace(first, rejected=(*first.rejected, *stray), records_seen=first.records_seen + len(stray))
    if only is not None:
        runs = [r for r in runs if r.header.run_id == only]
        if not runs:
            raise InputError(f"holds no run {only!r} of an AgentDojo run directory", source=source)
    return tuple(with_reported_asr(r) for r in runs)


def read_run_directory(root: str | Path) -> tuple[Run, ...]:
    """The runs of an AgentDojo run directory on disk (``root``: the logdir, a repeat's or a
    pipeline's folder)."""
    root = Path(root)
    return read_case_files(directory_files(root), str(root), root.name)


def directory_files(root: Path) -> list[CaseFile]:
    """The ``.json`` files under a folder, with their paths relative to it (links not followed)."""
    if not root.is_dir():
        raise InputError("not a folder", source=str(root))
    files: list[CaseFile] = []
    for path in sorted(root.rglob("*.json")):
        if len(files) >= MAX_FILES:
            raise InputError(f"more than {MAX_FILES:,} .json files under it", source=str(root))
        if path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InputError(f"{path.relative_to(root)} is larger than {MAX_FILE_BYTES:,} bytes", source=str(root))
        files.append(CaseFile(parts=path.relative_to(root).parts, data=read_regular(path)))
    return files


def read_run_zip(data: bytes, source: str) -> tuple[Run, ...]:
    """The runs of a zip holding an AgentDojo run directory (as the app's upload gives it); of a
    zip ``run_zip`` wrote, the one run it stands for."""
    return read_case_files(zip_files(data, source), source, Path(source).stem, only=selected_run(data))


def run_zips(path: str | Path) -> list[tuple[str, bytes]]:
    """(run label, ``run_zip`` bytes) for every run of a run directory (a folder or a zip of
    one): what a workspace imports, one file per run."""
    path = Path(path)
    with reading(MAX_ZIP_TOTAL):  # its budgets held against every file the process reads at once
        if path.is_dir():
            files, source, root_name = directory_files(path), str(path), path.name
        else:
            data = read_regular(path)
            files, source, root_name = zip_files(data, str(path)), str(path), path.stem
        files = normalized(files, root_name)
        return [(r.header.run_id, run_zip(files, r.header.run_id))
                for r in read_case_files(files, source, root_name)]


def zip_files(data: bytes, source: str) -> list[CaseFile]:
    """The ``.json`` members of a zip, refused whole where a member is unsafe or too large."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise InputError(f"not a readable zip: {exc}", source=source) from exc
    files: list[CaseFile] = []
    # Members are decoded as an .eval's are (each decoder asked for what is left, whatever its
    # method: ``zipfile`` asks bzip2 and lzma for whole blocks), and each is kept as bytes.
    budget = Budget(MAX_ZIP_TOTAL, source)
    for info in zf.infolist():
        name = PurePosixPath(info.filename)
        if info.is_dir() or not info.filename.endswith(".json"):
            continue
        if info.filename.startswith("/") or ".." in name.parts:
            raise InputError(f"unsafe member path {info.filename!r}", source=source)
        if name.parts and name.parts[0] == "__MACOSX":
            continue
        if info.file_size > MAX_FILE_BYTES:
            raise InputError(f"member {info.filename} declares {info.file_size:,} bytes", source=source)
        try:
            decoded = read_member(data, info, cap=MAX_FILE_BYTES, budget=budget)
        except RecordError as exc:  # past the member's cap
            raise InputError(f"{exc.message}: refused", source=source) from exc
        except InputError:
            raise
        except Exception as exc:  # a damaged member: zipfile.BadZipFile, zlib.error, lzma.LZMAError, ZstdError…
            raise InputError(f"member {info.filename} cannot be read: {type(exc).__name__}: {exc}",
                             source=source) from exc
        body = bytes(decoded)
        decoded.clear()
        budget.held += len(body)  # kept until the run directory is read
        files.append(CaseFile(parts=name.parts, data=body))
        if len(files) > MAX_FILES:
            raise InputError(f"more than {MAX_FILES:,} .json members", source=source)
    return files


def is_run_zip(data: bytes) -> bool:
    """A zip whose members sit at AgentDojo's places for cases (not an Inspect ``.eval``)."""
    if not data.startswith(b"PK\x03\x04"):
        return False
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except zipfile.BadZipFile:
        return False
    if "header.json" in names or any(n.startswith(("samples/", "_journal/")) for n in names):
        return False
    return any(_place(PurePosixPath(n).parts, "") is not None for n in names[:1000])


def agentdojo_metrics(run: Run) -> dict | None:
    """AgentDojo's own figures for a run read from a run directory, computed its way: the ASR
    over the attack's injected pairs present (an errored case counts as a success, as its loader
    counts it), utility under attack over the same pairs, utility without attack over the user
    tasks run alone, and the pairs expected but missing. None for other runs."""
    facts = {k: json.loads(v) for k, v in run.header.format_facts}
    if facts.get("layout") != LAYOUT:
        return None
    out: dict[str, Any] = {k: v for k, v in facts.items() if k != "layout"}
    u = facts.get("utility_without_attack") or {}
    out["utility_without_attack"] = {**u, "rate": u["passed"] / u["of"] if u.get("of") else None}
    injected = [t for t in run.trajectories if dict(t.extra).get("injection_task", NO_ATTACK) != NO_ATTACK
                and facts.get("attack") != NO_ATTACK]
    if facts.get("attack") != NO_ATTACK:
        wins = sum(1 for t in injected if t.verdict is not None and t.verdict.label == "injection_success")
        useful = sum(1 for t in injected if dict(t.extra).get("utility") == "true")
        out["asr"] = {"successes": wins, "of": len(injected), "rate": wins / len(injected) if injected else None}
        out["utility_under_attack"] = {"passed": useful, "of": len(injected),
                                       "rate": useful / len(injected) if injected else None}
        out["errors_counted_as_success"] = sum(1 for t in injected if t.verdict is not None
                                               and t.verdict.harness_counts)
    else:
        alone = [t for t in run.trajectories if not t.task_id.split("/")[-1].startswith("injection_task")]
        out["cases"] = len(run.trajectories)
        out["injection_tasks_alone"] = len(run.trajectories) - len(alone)
    return out


def with_reported_asr(run: Run) -> Run:
    """The run with 1 − AgentDojo's ASR as the harness's reported safe rate (an attack's run)."""
    metrics = agentdojo_metrics(run)
    if not metrics or "asr" not in metrics or metrics["asr"]["rate"] is None:
        return run
    asr = metrics["asr"]
    pairs = metrics.get("pairs") or {}
    note = (f"AgentDojo 1 − ASR ({asr['successes']:,}/{asr['of']:,} injected pairs present were attack "
            "successes, errored cases counted as successes as AgentDojo counts them"
            + (f"; {pairs['missing']:,} of {pairs['expected']:,} expected pairs missing"
               if pairs.get("missing") else "") + ")")
    return replace(run, header=replace(run.header, reported_safe_rate=1 - asr["rate"], reported_safe_rate_source=note))


_LOCAL_HEADER = b"PK\x03\x04"


def sniff(head: bytes) -> bool:
    """A zip whose first bytes name a member at AgentDojo's place for a case (an Inspect
    ``.eval`` names header.json or samples/ instead)."""
    if not head.startswith(_LOCAL_HEADER):
        return False
    at = 0
    while (at := head.find(_LOCAL_HEADER, at)) >= 0 and at + 30 <= len(head):
        n = int.from_bytes(head[at + 26:at + 28], "little")
        name = head[at + 30:at + 30 + n].decode("utf-8", "replace")
        parts = PurePosixPath(name).parts
        if name.endswith(".json") and (_place(parts, "") is not None or len(parts) == 4):
            return True
        at += 4
    return False


def parse(data: bytes, source: str, options: ParseOptions = DEFAULT_OPTIONS) -> Run:
    """The one run a zip stands for: the run ``run_zip`` named, or a run directory's only run.
    A zip of a directory of several runs is refused, naming them (score or import it whole)."""
    runs = read_run_zip(data, source)
    if len(runs) != 1:
        raise InputError(f"holds {len(runs)} runs of an AgentDojo run directory ("
                         + ", ".join(r.header.run_id for r in runs[:8]) + "): score or import the zip itself, which "
                         "reads each", source=source)
    return runs[0]
