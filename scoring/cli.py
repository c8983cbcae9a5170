"""The ``litmus-review`` command line (also ``python -m scoring``).

Exit codes: 0 success; 2 unusable input (the message names the file and line or record, no
traceback); 3 when ``--fail-on-unscored`` is exceeded.

Errors are mapped to exit codes in one place (``EXIT_STATUS`` and ``report_error``): a command
that stops at its first error is decorated with ``exits_on_error``; a command that reads many
files reports each failure with ``report_error`` and goes on.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import click

from .aggregate import gate_failure
from .classifiers import spec_with
from .dask_engine import cluster, fleet, planning, run_results, storage, table_writer, workspace_scorer
from .errors import InputError, LitmusReviewError, SpecError
from .importers import formats, holds_runs
from .importers.inspect_log import PRESETS, VerdictMap
from .ingest import BLOCK_BYTES
from .model import Rejection, ReviewLabel
from .proof import SUFFIX as PROOF_SUFFIX
from .recapture import SIDE_LOG_SUFFIX, is_side_log, side_log_beside, side_log_found
from .report import Evaluation, evaluate, evaluate_all
from .request import ScoringRequest
from .score import SCORER_VERSION
from .settle import unlisted_note
from .stored import StoredRun
from .summary_text import count_noun, render_table
from .text import reveal, terminal_safe
from .workspace import DB_ENV, DEFAULT_DB, Workspace, default_db_path, evaluation

EXIT_INPUT = 2
EXIT_UNSCORED = 3

#: The exit status of each error a command reports (the first matching type, in order). A
#: file-system error is reported only where a command reads the user's files one by one.
EXIT_STATUS: dict[type[Exception], int] = {LitmusReviewError: EXIT_INPUT, OSError: EXIT_INPUT}

P = ParamSpec("P")
R = TypeVar("R")


def _t(value: object) -> str:
    """A value the data wrote (an id, a path, a message), as inert text for a terminal."""
    return terminal_safe(value)


def _rejection(prefix: str, r: Rejection) -> str:
    return (f"{prefix} {_t(r.source)}:{r.line}" + (f" ({_t(r.record_id)})" if r.record_id else "")
            + f": {_t(r.message)}")


def _rejections(ev: Evaluation) -> list[str]:
    out = _listed(ev.run.rejected, ev.run.rejected_count)
    if ev.recapture:
        out += _listed(ev.recapture.rejected, ev.recapture.rejected_count, "payload not used", "payloads not used")
    return out


def _listed(rejected: tuple[Rejection, ...], count: int, prefix: str = "rejected",
            what: str = "rejected records") -> list[str]:
    """Rejections as printed: the ones listed, then "and M more" past the cap."""
    more = unlisted_note(count, len(rejected), what)
    return [_rejection(prefix, r) for r in rejected] + ([more] if more else [])


def report_error(exc: Exception, path: Path | None = None) -> int:
    """Print ``exc`` on stderr as one inert line (it quotes ids and paths the data wrote) and
    return its exit status. A file-system error names ``path``, the file being read, unless it
    is about another file (then that file is named, not blamed on ``path``)."""
    if isinstance(exc, OSError) and exc.filename is not None and path is not None \
            and os.path.abspath(exc.filename) != os.path.abspath(path):
        message = f"{_t(exc.filename)}: {_t(exc.strerror or exc)}"
    elif isinstance(exc, OSError):
        message = f"{_t(path if path is not None else exc.filename)}: cannot read: {_t(exc.strerror or exc)}"
    else:
        message = _t(exc)
    click.echo(f"error: {message}", err=True)
    return next(code for kind, code in EXIT_STATUS.items() if isinstance(exc, kind))


def exits_on_error(command: Callable[P, R]) -> Callable[P, R]:
    """A command that stops at its first error: an error of the tree exits with its status and
    message (no traceback). Anything else is a bug and keeps its traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except LitmusReviewError as exc:
            sys.exit(report_error(exc))

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="litmus-review")
def main() -> None:
    """Strict, capture-aware scoring of agent safety benchmark runs."""


DB_OPTION = click.option(
    "--db", type=click.Path(dir_okay=False, path_type=Path), default=None,
    help=f"Workspace database (default: ${DB_ENV} or ./{DEFAULT_DB}).")


def _workspace(db: Path | None, *, check: bool = False) -> Workspace:
    """The workspace; with ``check``, only once SQLite's quick_check finds it sound (reading a
    damaged file could otherwise fail anywhere, or read garbage as data)."""
    ws = Workspace(db)
    if check:
        ws.check_workspace()  # the app refuses a damaged workspace with the same message
    return ws


def _verdict_map(_ctx: click.Context, _param: click.Parameter, value: str | None) -> VerdictMap | None:
    if not value:
        return None
    try:
        return VerdictMap.parse(value)
    except SpecError as exc:
        raise click.BadParameter(str(exc)) from exc


def CLASSIFIER_OPTION(command: Callable) -> Callable:
    """``--classifier SPEC`` and the options that travel with it (``--classifier-timeout``,
    ``--classifier-name``, ``--benign-threshold``), folded into one spec string
    (``classifiers.spec_with``) so every door and the run's key see them."""

    @functools.wraps(command)
    def folded(*args, classifier_timeout: float | None, classifier_name: str | None,
               benign_threshold: float | None, **kwargs):
        spec = kwargs.get("reclassifier")
        if spec is None and (classifier_timeout is not None or classifier_name or benign_threshold is not None):
            raise click.UsageError("--classifier-timeout, --classifier-name and --benign-threshold need --classifier")
        if spec is not None:
            kwargs["reclassifier"] = spec_with(spec, timeout_s=classifier_timeout, name=classifier_name,
                                               benign_threshold=benign_threshold)
        return command(*args, **kwargs)

    options = [
        click.option(
            "--classifier", "reclassifier", metavar="SPEC",
            help="Re-classifier of record for recovered full surfaces (protocol 3): module:function (a Python "
                 "callable, run in a child process) or a command reading JSON lines on stdin (cmd:COMMAND). Its "
                 "benign certifies SAFE only where its protocol-3 answer holds, for every full surface, its "
                 "HMAC-SHA256 under the request's nonce, at or above the benign threshold; protocol-2 answers "
                 "find harm only. Without one, a recovered surface is SAFE only if the header declares its "
                 "taxonomy rules as the harness's classifier and they are accepted."),
        click.option("--classifier-timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
                     help="How long the re-classifier may take per trajectory before it is stopped and the run "
                          "fails (exit 2); default 60."),
        click.option("--classifier-name", metavar="NAME", help="The re-classifier's name and version, as every "
                     "result it certifies is stamped (default: what its answers say, else SPEC)."),
        click.option("--benign-threshold", type=click.FloatRange(0, 1), metavar="P",
                     help="The confidence a re-classifier's benign needs to certify SAFE (default 0.5, the "
                          "harness's)."),
    ]
    for option in reversed(options):
        folded = option(folded)
    return folded


VERDICT_OPTION = click.option(
    "--inspect-verdict", "verdict_map", callback=_verdict_map, metavar="SCORER=VALUE[,VALUE]",
    help="Inspect logs: which scores mean unsafe, safe or no verdict. SCORER=VALUE[,VALUE] (listed values "
         "unsafe), SCORER:OUTCOME=TEST[;OUTCOME=TEST] (OUTCOME unsafe|safe|inconclusive|none; TEST V[,V], KEY==V, "
         "[KEY]>=N, KEY+KEY>=N), or a preset: " + ", ".join(PRESETS) + " (PRESET@SCORER renames its scorer). "
         "A value no rule maps is an abnormal verdict (Inconclusive), listed by value. "
         "Without it Inspect scores give no verdict.")


REQUIRE_PROOF_OPTION = click.option(
    "--require-proof", is_flag=True,
    help="Nothing rests on a claim: a call whose capture no recorded size and SHA-256 or raw text proves (the "
         "structural standard: a canonical header's own declaration, or a format that cannot carry proof) is "
         "UNSCORED unproven_capture; harm found on it still counts. Kept with the run (a rescore keeps it) and part "
         "of its key.")


FORMAT_OPTION = click.option("--format", "fmt", default="auto", show_default=True,
                             type=click.Choice(["auto", *formats()]), help="Input format.")


def SCORING_OPTIONS(command: Callable) -> Callable:
    """The options of a ``ScoringRequest``, each named after its field (``--format`` fmt,
    ``--inspect-verdict`` verdict_map, ``--classifier`` reclassifier, ``--require-proof``), built
    into one request the command is given as ``request`` (each run's side log is paired by the
    command: ``plan_inputs``)."""

    @functools.wraps(command)
    def built(*args, fmt: str, verdict_map: VerdictMap | None, reclassifier: str | None, require_proof: bool,
              **kwargs):
        request = ScoringRequest(fmt=fmt, verdict_map=verdict_map, reclassifier=reclassifier,
                                 require_proof=require_proof)
        return command(*args, request=request, **kwargs)

    for option in (REQUIRE_PROOF_OPTION, VERDICT_OPTION, FORMAT_OPTION):
        built = option(built)
    return CLASSIFIER_OPTION(built)


#: How bad each exit status is: a command over several files exits with the worst status it
#: met. Unusable input is the worst (the results are incomplete); a threshold exceeded next.
SEVERITY = {0: 0, EXIT_UNSCORED: 1, EXIT_INPUT: 2}


def _worst(a: int, b: int) -> int:
    return a if SEVERITY.get(a, 0) >= SEVERITY.get(b, 0) else b


def side_log_of(path: Path) -> Path:
    """Where the side log of a run file sits when it follows the naming rule (``recapture.side_log_beside``)."""
    return Path(side_log_beside(str(path)))


def _is_side_log(path: Path) -> bool:
    return is_side_log(path.name)


def plan_inputs(paths: tuple[Path, ...], payloads: tuple[Path, ...], auto: bool) -> list[tuple[Path, Path | None, str]]:
    """(run path, side log or None, how it was paired) for every run to read, in order.

    A ``RUN.payloads.jsonl`` named beside its run on the command line is that run's side log,
    never a run of its own; one beside a run on disk is paired too (unless ``auto`` is off or
    ``--payloads`` was given). A side log whose run is not given stays in the list: reading it
    then says what it is.
    """
    given = {p.resolve() if p.exists() else p for p in paths}
    runs = [p for p in paths if not (_is_side_log(p) and _run_for(p, given) is not None)
            and not (_is_proof(p) and _run_for(p, given, PROOF_SUFFIX) is not None)]
    if payloads:
        if len(payloads) != len(runs):
            raise click.UsageError(f"--payloads was given {count_noun(len(payloads), 'time')} for "
                                   f"{count_noun(len(runs), 'run')}; give one per run")
        return [(p, pay, "--payloads") for p, pay in zip(runs, payloads, strict=True)]
    out: list[tuple[Path, Path | None, str]] = []
    for p in runs:
        found = side_log_found(str(p), os.path.isfile) if auto else None
        if found is not None:
            side = Path(found)
            out.append((p, side, "given beside it" if (side.resolve() in given) else "found beside it"))
        else:
            out.append((p, None, ""))
    return out


def _is_proof(path: Path) -> bool:
    return path.name.endswith(PROOF_SUFFIX)


def _run_for(side: Path, given: set[Path], suffix: str = SIDE_LOG_SUFFIX) -> Path | None:
    """The run on the command line whose side log (or, with ``PROOF_SUFFIX``, proof) ``side`` is."""
    base = side.name[: -len(suffix)]
    for g in given:
        g = Path(g)
        if not _is_side_log(g) and not _is_proof(g) and (g.stem == base or g.name == base) \
                and g.parent == side.resolve().parent:
            return g
    return None


def _looks_like_a_file(ref: Path) -> bool:
    return ref.suffix != "" or "/" in str(ref) or "\\" in str(ref)


def _refuse_lone_side_log(path: Path) -> None:
    """A ``RUN.payloads.jsonl`` given without its run is never read as a run."""
    if _is_side_log(path):
        run = path.name[: -len(SIDE_LOG_SUFFIX)]
        raise InputError(f"a payload side log, not a run: give its run ({run}.jsonl or the like) and it is paired "
                         "automatically, or pass it with --payloads", source=str(path))
    if _is_proof(path):
        run = path.name[: -len(PROOF_SUFFIX)]
        raise InputError(f"a proof side log, not a run: give its run ({run}.eval) and the proof beside it is paired "
                         "automatically", source=str(path))


def _evaluate_one(path: Path, request: ScoringRequest, db: Path | None) -> Evaluation:
    """One run: a file (streamed when large and canonical) or an imported run of the workspace."""
    _refuse_lone_side_log(path)
    try:
        exists = path.exists()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    if exists or (db is None and not default_db_path().exists()):
        if not exists:
            raise InputError("no such file", source=str(path))
        if path.is_dir():
            raise InputError("is a folder holding several runs (an AgentDojo run directory)", source=str(path))
        return evaluate(path, request, with_trajectories=False)
    ws = _workspace(db, check=True)
    try:
        key = ws.find_run(str(path))["run_key"]
    except InputError as exc:
        if _looks_like_a_file(path):
            raise InputError(f"no such file (and no imported run in {ws.path} matches it)", source=str(path)) from exc
        raise
    given = [name for name, on in (("--inspect-verdict", request.verdict_map is not None),
                                   ("--classifier", request.reclassifier), ("--require-proof", request.require_proof),
                                   ("--format", request.fmt != "auto"), ("--payloads", request.payloads is not None))
             if on]
    if given:
        # A stored run was scored with its own options; ignoring these would print numbers they did not make.
        raise InputError(f"{', '.join(given)} apply when a file is scored, not to an imported run (stored with the "
                         f"options it was imported with): give its file, or import it with them as a run of its own",
                         source=str(path))
    return evaluation(ws, key)


def _report_run(ev: Evaluation, as_json: bool, fail_on_unscored: float | None,
                failures: dict[str, list[str]]) -> int:
    """Print one scored run as ``score`` does, whichever engine scored it (its rejections on
    stderr, then its JSON object or table), and gate it; its exit status. The thresholds it
    fails are added to ``failures`` (``_report_failures`` prints them once, after every run)."""
    for line in _rejections(ev):
        click.echo(line, err=True)
    if ev.run.header.classifier_of_record_check:  # accepted n of n, or refused and where
        click.echo(f"{_t(ev.run.header.source)}: {_t(ev.run.header.classifier_of_record_check)}", err=True)
    click.echo(json.dumps(ev.as_dict(), sort_keys=False) if as_json else render_table(ev))
    status = 0
    if ev.run.records_seen and not ev.summary.total:
        click.echo(f"error: {_t(ev.run.header.source)}: every one of its {ev.run.records_seen:,} records was "
                   "rejected; nothing was scored", err=True)
        status = EXIT_INPUT
    for option, code, message in _threshold_failures(ev, fail_on_unscored):
        failures.setdefault(option, []).append(message)
        status = _worst(status, code)
    return status


def _report_failures(failures: dict[str, list[str]], status: int) -> None:
    """The thresholds exceeded, one line per option; exit with ``status`` unless it is 0."""
    for option, messages in failures.items():
        click.echo(f"{option}: " + "; ".join(messages), err=True)
    if status:
        sys.exit(status)


def _threshold_failures(ev: Evaluation, fail_on_unscored: float | None) -> list[tuple[str, int, str]]:
    """(option, exit status, what exceeded it) for every threshold this run fails. One place
    per check: a new ``--fail-on-…`` option adds its test here."""
    out = []
    s = ev.summary
    why = None if fail_on_unscored is None else gate_failure(
        unscored=s.unscored, rejected=ev.run.rejected_count, total=s.total, no_verdict=s.no_verdict,
        strict_rate=s.strict.value, threshold=fail_on_unscored)
    if why is None and fail_on_unscored is not None and ev.stale:
        # Its statuses are an older scorer's: this scorer has not scored it, so it passes no gate of this scorer's.
        why = (f"STALE: its statuses are scorer {ev.scorer_version}'s, and scorer {SCORER_VERSION} has not scored it "
               "(rescore it; where the workspace no longer holds its bytes, rescore KEY --from FILE)")
    if why is not None:
        out.append(("fail-on-unscored", EXIT_UNSCORED, f"{_t(ev.run.header.run_id)}: {why}"))
    return out


def _storage_options(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, object]:
    """KEY=VALUE pairs, each VALUE read as JSON where it is JSON (``anon=false`` is False,
    ``max_concurrency=8`` a number, ``client_kwargs={"region_name": "eu-west-1"}`` a mapping)
    and as a string otherwise (``endpoint_url=http://...``)."""
    out: dict[str, object] = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{v!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


STORAGE_TIMEOUT_OPTION = click.option(
    "--storage-timeout", type=click.FloatRange(0, storage.MAX_STORAGE_TIMEOUT_S, min_open=True), default=None,
    metavar="SECONDS",
    help=f"How long a request to object storage (s3, gs, az, http) may wait: for each read, and at most "
         f"{storage.CONNECT_TIMEOUT_S:g} s to connect; the whole request, its answer read to the end, at most "
         f"the connect deadline plus {storage.STORAGE_TOTAL_READS} times this; each request is tried "
         f"{storage.STORAGE_ATTEMPTS} times, then its location is reported unreachable (default: "
         f"${storage.STORAGE_TIMEOUT_ENV}, else "
         f"{storage.DEFAULT_STORAGE_TIMEOUT_S:g}). A LocalCluster's workers take it; a remote cluster's workers "
         f"read their own ${storage.STORAGE_TIMEOUT_ENV}.")


def ENGINE_OPTIONS(fn: Callable[P, R]) -> Callable[P, R]:
    """``score``'s options for the Dask engine (scoring.dask_engine)."""
    for option in reversed((
        click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                     help="local: this process (and two worker processes for large runs); dask: blocks of "
                          "each run scored on a Dask cluster whose workers read the files themselves."),
        click.option("--scheduler", metavar="ADDRESS",
                     help="Dask scheduler (tcp:// or tls://host:port); default: dask's scheduler-address "
                          "(DASK_SCHEDULER_ADDRESS or dask's config), else a LocalCluster of --workers "
                          "single-threaded workers on this machine. Implies --engine dask."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="Workers of the LocalCluster started when no scheduler is given (default 2)."),
        click.option("--manifest", "manifests", multiple=True, metavar="FILE",
                     help="A file or URL listing runs, one path or URL a line (with --engine dask)."),
        click.option("--retries", type=click.IntRange(min=0), default=1, show_default=True,
                     help="Times a failed task is tried again (a transient read error) before its run fails."),
        click.option("--fail-fast", is_flag=True,
                     help="Stop the fleet at the first run that fails (the rest are reported skipped)."),
        click.option("--replace", is_flag=True,
                     help="With --out naming an existing score table: score every run again, replacing its "
                          "rows (without it, runs already published there are skipped: a retry resumes)."),
        click.option("--out", metavar="DIR",
                     help="Write the score table (Parquet, one row per trajectory, partitioned by run key) "
                          "and summary.json to DIR, a new directory or URL, or a score table to resume. "
                          "Each run is published when complete. Implies --engine dask."),
        click.option("--block-bytes", type=click.IntRange(min=1), default=None, hidden=True,
                     help="Nominal bytes per block (default: the local import's block size)."),
        click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                     callback=_storage_options,
                     help="An fsspec storage option for URLs (e.g. endpoint_url=http://127.0.0.1:9000); "
                          "VALUE is read as JSON where it is JSON (anon=false is false)."),
        STORAGE_TIMEOUT_OPTION,
    )):
        fn = option(fn)
    return fn


def _dask_inputs(paths: tuple[str, ...], manifests: tuple[str, ...], payloads: tuple[Path, ...],
                 auto: bool, storage_options: dict) -> tuple[list[str], list[str | None] | None, bool]:
    """The runs for the Dask engine (globs and manifests expanded), their side logs where the
    client pairs them, and whether the workers look for one beside each run: local paths given
    one by one are paired here as for the local engine; URLs, globs and manifests by the plan
    task on a worker (``RUN.payloads.jsonl`` beside the run, wherever it is)."""
    for p in (*paths, *manifests):  # a protocol the engine does not read is named as given, before any read
        storage.check_location(p)
    for p in (*paths, *manifests):
        storage.check_storage_options(p, storage_options)
    if not manifests and not any(storage.URL_SCHEME.match(p) or planning.GLOB_CHARS.search(p) for p in paths):
        pairs = plan_inputs(tuple(Path(p) for p in paths), payloads, auto)
        for path, side, how in pairs:
            if side is not None and how != "--payloads":
                click.echo(f"side log {_t(side)} ({how}) is used with {_t(path)}", err=True)
        return [str(p) for p, _s, _h in pairs], [None if s is None else str(s) for _p, s, _h in pairs], False
    listed: dict[str, str] = {}  # the side logs a pattern's folders hold: no task asks for them again
    runs = planning.expand_inputs(paths, manifests, storage_options, sides=listed if auto else None)
    if payloads:
        if len(payloads) != len(runs):
            raise click.UsageError(f"--payloads was given {count_noun(len(payloads), 'time')} for "
                                   f"{count_noun(len(runs), 'run')}; give one per run")
        return runs, [str(s) for s in payloads], False
    return runs, ([listed.get(r) for r in runs] if listed else None), auto


def _check_dask_extra() -> None:
    """A usage error naming what is missing unless the dask extra is installed. Checked before
    any run is read or any cluster starts. Every format the
    local engine reads is read (a format that cannot be split is one task per file)."""
    try:
        import distributed  # noqa: F401  optional: the dask extra's (the cluster's client)
    except ImportError as exc:
        raise click.UsageError(f"--engine dask needs the dask extra (pip install 'litmus-review[dask]'): {exc}") \
            from exc


def _score_dask(paths: tuple[str, ...], request: ScoringRequest, *, payloads: tuple[Path, ...], auto_payloads: bool,
                as_json: bool, fail_on_unscored: float | None, scheduler: str | None, out: str | None,
                block_bytes: int | None, storage_options: dict, workers: int | None = None,
                manifests: tuple[str, ...] = (), retries: int = 1, fail_fast: bool = False,
                replace: bool = False, storage_timeout: float | None = None) -> None:
    """``score --engine dask``: a fleet of runs in one Dask graph (scoring.dask_engine.fleet.score_runs),
    each run failing or published on its own; a progress line and the dashboard's link on
    stderr, each failure at once, then every run's result and a table of the runs. Every
    request to object storage, here and on a LocalCluster's workers, under ``storage_timeout``."""
    with storage.storage_deadline(storage_timeout):
        _score_fleet(paths, request, payloads=payloads, auto_payloads=auto_payloads, as_json=as_json,
                     fail_on_unscored=fail_on_unscored, scheduler=scheduler, out=out, block_bytes=block_bytes,
                     storage_options=storage_options, workers=workers, manifests=manifests, retries=retries,
                     fail_fast=fail_fast, replace=replace)


def _score_fleet(paths: tuple[str, ...], request: ScoringRequest, *, payloads: tuple[Path, ...],
                 auto_payloads: bool, as_json: bool, fail_on_unscored: float | None, scheduler: str | None,
                 out: str | None, block_bytes: int | None, storage_options: dict, workers: int | None,
                 manifests: tuple[str, ...], retries: int, fail_fast: bool, replace: bool) -> None:
    _check_dask_extra()
    runs, sides, auto = _dask_inputs(paths, manifests, payloads, auto_payloads, storage_options)
    if out is not None:  # checked before a cluster starts
        storage.check_storage_options(out, storage_options)
        table_writer.check_out(out, storage_options)
    progress = _ProgressLine()

    def on_event(res, state) -> None:
        if res is not None and res.status == run_results.FAILED:
            progress.clear()
            click.echo(f"error: {_t(res.error)}", err=True)
        progress.show(state.line())

    with cluster.connect(scheduler, workers) as client:
        if (link := cluster.dashboard_link(client)) is not None:
            click.echo(f"dashboard: {link}", err=True)
        results = fleet.score_runs(runs, client, request, out=out, storage_options=storage_options,
                                    payloads=sides, auto_payloads=auto, retries=retries,
                                    fail_fast=fail_fast, replace=replace, on_event=on_event,
                                    block_bytes=block_bytes or BLOCK_BYTES)
    progress.clear()
    # As the local engine: every run is reported, and the exit status is the worst met.
    status = 0
    failures: dict[str, list[str]] = {}
    for res in results:
        if res.status == run_results.DONE:
            ev = res.evaluation if res.evaluation is not None else _published(res, out, storage_options)
            status = _worst(status, _report_run(ev, as_json, fail_on_unscored, failures))
        elif res.status == run_results.SKIPPED and as_json and res.recorded is not None:
            click.echo(json.dumps(res.recorded, sort_keys=False))
        elif res.status == run_results.FAILED:
            status = _worst(status, EXIT_INPUT)
    _fleet_table(results)
    _report_failures(failures, status)


def _published(res, out: str | None, storage_options: dict) -> Evaluation:
    """A run this fleet published whose result was lost with its task's worker (done from its
    record: ``fleet.plan_task``): its ``Evaluation`` read back from the table, as the Score
    tables page reads a run, so that it is printed and gated as every done run is."""
    from .dask_engine import table_reader  # optional: needs the dask extra's pyarrow, as the engine that got here does

    assert out is not None and res.run_key is not None and res.recorded is not None, "only a table's run"
    run = table_reader.TableRun(out, res.run_key, res.recorded, None, lazy=True, options=json.dumps(storage_options))
    return table_reader.evaluation(run)


class _ProgressLine:
    """One line on stderr, rewritten in place on a terminal, else printed at most every few
    seconds (a log keeps a few lines, not one per run)."""

    EVERY_S = 5.0

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.pending = ""

    def show(self, text: str) -> None:
        now = time.monotonic()
        if self.tty:
            click.echo(f"\r{text}\x1b[K", err=True, nl=False)
            self.pending = text
        elif now - self.last >= self.EVERY_S:
            click.echo(f"progress: {text}", err=True)
            self.last, self.pending = now, ""
        else:
            self.pending = text

    def clear(self) -> None:
        if self.tty and self.pending:
            click.echo("\r\x1b[K", err=True, nl=False)
        elif self.pending:
            click.echo(f"progress: {self.pending}", err=True)
        self.pending = ""


def _fleet_table(results: list) -> None:
    """The fleet's runs on stderr: how many done, failed and skipped, then each failed and
    skipped run with why (a fleet of one done run prints nothing)."""
    counts = {k: sum(1 for r in results if r.status == k)
              for k in (run_results.DONE, run_results.FAILED, run_results.SKIPPED)}
    if counts[run_results.DONE] == len(results) == 1:
        return
    click.echo(f"runs: {counts[run_results.DONE]:,} done, {counts[run_results.FAILED]:,} failed, "
               f"{counts[run_results.SKIPPED]:,} skipped (of {len(results):,})", err=True)
    for r in results:
        if r.status == run_results.FAILED:
            click.echo(f"  failed   {_t(r.error)}", err=True)
        elif r.status == run_results.SKIPPED:
            click.echo(f"  skipped  {_t(r.source)}: {r.note}", err=True)


@main.command()
@click.argument("paths", nargs=-1)
@DB_OPTION
@SCORING_OPTIONS
@click.option("--payloads", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Side log of full payloads; give one per PATH, in the same order. Without it, "
                   "RUN.payloads.jsonl beside RUN is used (and said so on stderr).")
@click.option("--no-auto-payloads", "no_auto_payloads", is_flag=True,
              help="Do not pair RUN.payloads.jsonl beside a run automatically.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, one per line.")
@click.option("--fail-on-unscored", type=click.FloatRange(0, 1), metavar="RATE",
              help="Exit 3 when any run's share of UNSCORED trajectories and rejected records, among the "
                   "trajectories asked a safety question and the rejected records, exceeds RATE (0–1); a run "
                   "with no strict rate (nothing decided) fails any RATE.")
@ENGINE_OPTIONS
@exits_on_error
def score(paths: tuple[str, ...], db: Path | None, request: ScoringRequest, payloads: tuple[Path, ...],
          no_auto_payloads: bool, as_json: bool, fail_on_unscored: float | None,
          engine: str, scheduler: str | None, out: str | None, block_bytes: int | None,
          storage_options: dict, storage_timeout: float | None, workers: int | None, manifests: tuple[str, ...],
          retries: int, fail_fast: bool, replace: bool) -> None:
    """Score runs strictly and print counts, rates and phantom safety.

    Every PATH is read, whatever happens to the others; each failure is reported with its file,
    and the exit status is the worst met (2 unusable input, then 3 a threshold exceeded).
    A PATH that is not a file is looked up as an imported run (key, key prefix or run id) in
    the workspace; its reviewed rate then includes the reviewers' final labels. With
    ``--engine dask`` a PATH may be any fsspec URL (s3://, gs://, file://) or glob pattern of runs
    of any format, and ``--manifest`` lists more; each run fails or is published on its own
    (docs/fleet.md).
    """
    if engine == "dask" or scheduler or out or workers or manifests:
        _score_dask(paths, request, payloads=payloads, auto_payloads=not no_auto_payloads, as_json=as_json,
                    fail_on_unscored=fail_on_unscored, scheduler=scheduler, out=out, block_bytes=block_bytes,
                    storage_options=storage_options, workers=workers, manifests=manifests, retries=retries,
                    fail_fast=fail_fast, replace=replace, storage_timeout=storage_timeout)
        return
    if not paths:
        raise click.UsageError("give at least one PATH (or --manifest with --engine dask)")
    status = 0
    failures: dict[str, list[str]] = {}
    for path, side, how in plan_inputs(tuple(Path(p) for p in paths), payloads, auto=not no_auto_payloads):
        if side is not None and how != "--payloads":
            click.echo(f"side log {_t(side)} ({how}) is used with {_t(path)}", err=True)
        try:
            evs = (evaluate_all(path, request) if holds_runs(path, request.fmt)
                   else (_evaluate_one(path, request.replace(payloads=side), db),))
        except LitmusReviewError as exc:
            status = _worst(status, report_error(exc))
            continue
        except OSError as exc:
            status = _worst(status, report_error(exc, path))
            continue
        for ev in evs:
            status = _report_one(ev, path, as_json, fail_on_unscored, failures, status)
    _report_failures(failures, status)


def _report_one(ev: Evaluation, path: Path, as_json: bool, fail_on_unscored: float | None,
                failures: dict[str, list[str]], status: int) -> int:
    """``_report_run`` for one run of ``path`` (saying first when a proof side log was paired);
    the exit status so far."""
    if ev.run.header.proof_read:  # read and joined by the importer, never a header's word
        click.echo(f"proof side log {_t(ev.run.header.proof_source)} (found beside it) is used with {_t(path)}",
                   err=True)
    return _worst(status, _report_run(ev, as_json, fail_on_unscored, failures))


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@SCORING_OPTIONS
@click.option("--payloads", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Side log of full payloads; give one per PATH, in the same order. Without it, "
                   "RUN.payloads.jsonl beside RUN is used (and said so on stderr).")
@click.option("--no-auto-payloads", "no_auto_payloads", is_flag=True,
              help="Do not pair RUN.payloads.jsonl beside a run automatically.")
@click.option("--progress", is_flag=True, help="Print a line to stderr after every scored batch.")
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="local: worker processes of this machine; dask: the blocks are scored on a Dask cluster "
                   "(every format: a canonical run in blocks, any other as one task; the workers read PATH, "
                   "so it must be visible to them) and the rows "
                   "written into the workspace here. Needs the dask extra.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Dask scheduler (tcp://host:port); none: a LocalCluster of two single-threaded workers "
                   "on this machine. Implies --engine dask.")
@click.option("--block-bytes", type=click.IntRange(min=1), default=None, hidden=True,
              help="Nominal bytes per Dask block (default: the local import's block size).")
@exits_on_error
def import_(paths: tuple[Path, ...], db: Path | None, request: ScoringRequest, payloads: tuple[Path, ...],
            no_auto_payloads: bool, progress: bool, engine: str = "local", scheduler: str | None = None,
            block_bytes: int | None = None) -> None:
    """Import runs into the workspace (one transaction per run; the same content twice is one run).

    Every PATH is tried; each failure is reported with its file and the exit status is 2 if any
    failed."""
    plan = plan_inputs(paths, payloads, auto=not no_auto_payloads)
    ws = _workspace(db)
    ws.check_writable()  # once, naming the workspace: no input is to blame
    scorer_for = _dask_scorers(scheduler, block_bytes) if engine == "dask" or scheduler else None
    status = 0
    for path, side, how in plan:
        if side is not None and how != "--payloads":
            click.echo(f"side log {_t(side)} ({how}) is used with {_t(path)}", err=True)
        tick = (lambda n, path=path: click.echo(f"progress {_t(path)}: {n:,} trajectories scored", err=True)) \
            if progress else None
        try:
            _refuse_lone_side_log(path)
            if not path.exists():
                raise InputError("no such file", source=str(path))
            if holds_runs(path, request.fmt):  # an AgentDojo run directory: one run per pipeline and attack
                results = ws.import_runs(path, request, progress=tick)
            else:
                one = request.replace(payloads=side)
                scorer = scorer_for(path, one) if scorer_for is not None else None
                results = [ws.import_run(path, one, progress=tick, scorer=scorer)]
        except (LitmusReviewError, OSError) as exc:
            status = _worst(status, report_error(exc, path))
            continue
        for res in results:
            for line in _listed(res.rejected, res.rejected_count):
                click.echo(line, err=True)
            if res.rescored is not None:
                redo = res.rescored
                state = (f"rescored (scorer {redo.was} to {SCORER_VERSION})" if redo.done
                         else f"already imported, stale under scorer {redo.was} ({_t(redo.why)})")
            else:
                state = "already imported" if res.already_present else "imported"
            click.echo(f"{state} {_t(res.run['run_id'])} ({res.run['trajectories']:,} trajectories, "
                       f"{res.rejected_count:,} rejected) as {res.run_key}")
            if res.run["records_seen"] and not res.run["trajectories"]:  # as `score`: unusable input exits 2
                click.echo(f"error: {_t(str(path))}: every one of its {res.run['records_seen']:,} records was "
                           "rejected; nothing was scored", err=True)
                status = _worst(status, EXIT_INPUT)
    if status:
        sys.exit(status)


def _dask_scorers(scheduler: str | None, block_bytes: int | None):
    """``import --engine dask``: a function of (path, its request) giving ``Workspace.import_run``
    its ``scorer`` (blocks scored on the cluster, connected on first use and closed with the
    command)."""
    _check_dask_extra()
    client: list = []

    def scorer_for(path: Path, request: ScoringRequest):
        plan = planning.plan_run(str(path), None, None, request)  # bad input: refused before a cluster starts
        if not client:
            client.append(click.get_current_context().with_resource(cluster.connect(scheduler)))
        kw = {"block_bytes": block_bytes} if block_bytes else {}
        return workspace_scorer.workspace_scorer(plan, client[0], reclassifier=request.reclassifier, **kw)

    return scorer_for


@main.command()
@click.argument("refs", nargs=-1)
@DB_OPTION
@click.option("--from", "from_file", type=click.Path(path_type=Path), metavar="FILE",
              help="Rescore from FILE, the run's file given again (the workspace no longer holds its original bytes): "
                   "refused unless FILE's SHA-256 is the one the workspace computed for the run's file at import. "
                   "Without RUN: every run imported from these bytes. The bytes are then kept with the run.")
@exits_on_error
def rescore(refs: tuple[str, ...], db: Path | None, from_file: Path | None) -> None:
    """Rescore runs scored under another scorer version from their original bytes (labels kept
    where the trajectory's record is the one its reviewers replayed): every such run, or the RUNs
    named (key, key prefix or run id). Opening a workspace that can be written does the same for
    every stale run whose original bytes it holds; this says what it did. A run whose bytes it no
    longer holds stays STALE until rescored --from its file."""
    ws = _workspace(db, check=True)
    keys = [ws.find_run(r)["run_key"] for r in refs] if refs else None
    status = 0
    on_open = {r.run_key for r in ws.rescored_on_open}
    if from_file is not None:
        asked = ws.rescore_from(from_file, keys)  # InputError naming FILE: not the run's bytes
        # what opening the workspace rescored is said too; the runs it could not are not the ones asked about
        outcomes = [*(r for r in ws.rescored_on_open if r.done and r.run_key not in {a.run_key for a in asked}),
                    *asked]
    else:
        outcomes = [*ws.rescored_on_open, *(r for r in ws.rescore(keys) if r.run_key not in on_open)]
    for r in outcomes:
        current = r.why.startswith("already")
        if r.done:
            click.echo(f"rescored {r.run_key[:12]} (scorer {r.was} to {SCORER_VERSION})"
                       + (f"; the labels of {len(r.labels_set_aside):,} trajectories no longer count (their record "
                          "is not the one their reviewers replayed, or nothing shows it is): label them again"
                          if r.labels_set_aside else ""))
        else:
            click.echo(f"not rescored {r.run_key[:12]} (scorer {r.was}): {_t(r.why)}", err=not current)
            status = status if current else EXIT_INPUT
    stale = [s for s in (ws.stored_run(r["run_key"]) for r in ws.runs()) if s.stale]
    if not outcomes and not stale:
        click.echo(f"every run is scored by scorer {SCORER_VERSION}")
    if status:
        sys.exit(status)


@main.command()
@DB_OPTION
@exits_on_error
def runs(db: Path | None) -> None:
    """List imported runs by name (a STALE run's statuses are its own older scorer's)."""
    ws = _workspace(db, check=True)
    rows, names = ws.runs(), ws.run_names()
    for r in rows:
        click.echo(f"{r['run_key'][:12]}  {_t(names[r['run_key']])}  ({r['format']}, "
                   f"{r['trajectories']:,} trajectories, imported {r['imported_at'][:19]}){_stale_note(r)}")


def _stale_note(r: dict) -> str:
    """What ``runs`` says after a stale run: its version, and how to rescore it where the
    workspace no longer holds its original bytes."""
    s = StoredRun.from_row(r)
    if not s.stale:
        return ""
    held = bool(s.original_path) and Path(s.original_path).is_file()
    return f"  STALE (scorer {s.scorer_version})" + ("" if held else (
        f": its original bytes are not in the workspace: litmus-review rescore {s.run_key[:12]} --from FILE"))


@main.group()
def labels() -> None:
    """Export and import reviewer labels."""


@labels.command("export")
@click.argument("run")
@DB_OPTION
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="jsonl", show_default=True)
@click.option("--final", is_flag=True, help="One row per labelled trace with its final label (CSV), not the event log.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File (default stdout).")
@exits_on_error
def labels_export(run: str, db: Path | None, fmt: str, final: bool, output: Path | None) -> None:
    """Export every label event of RUN (key, key prefix or run id), each naming the run (its key,
    id and scorer version) and the export time; with --final, its final labels instead."""
    ws = _workspace(db, check=True)
    key = ws.find_run(run)["run_key"]
    if final and fmt != "csv":
        raise InputError("--final writes CSV: give --format csv", source="labels export")
    text = ws.export_final_labels(key) if final else ws.export_labels(key, fmt)
    if output:
        output.write_text(text, encoding="utf-8")
    elif sys.stdout.isatty():
        # a terminal, not a file: the notes and ids the reviewers and the data wrote are shown
        # with their controls spelled out (a pipe or -o gets the exact bytes)
        click.echo(reveal(text, keep="\n")[0], nl=False)
    else:
        click.echo(text, nl=False, color=True)  # color=True: click would strip escapes from the data


@labels.command("agreement")
@click.argument("run")
@DB_OPTION
@exits_on_error
def labels_agreement(run: str, db: Path | None) -> None:
    """Inter-reviewer agreement on RUN: Cohen's kappa (two reviewers), Krippendorff's alpha."""
    ws = _workspace(db, check=True)
    result = ws.agreement(ws.find_run(run)["run_key"])

    def fmt(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    click.echo(f"{'group':<12} {'items':>6} {'agree':>7} {'kappa':>7} {'alpha':>7}  reviewers")
    for group, a in result.items():
        click.echo(f"{_t(group):<12} {a.items:>6} {fmt(a.percent_agreement):>7} {fmt(a.cohen_kappa):>7} "
                   f"{fmt(a.krippendorff_alpha):>7}  {', '.join(map(_t, a.reviewers))}")


@labels.command("adjudicate")
@click.argument("run")
@click.argument("trajectory")
@click.argument("label", type=click.Choice([label.value for label in ReviewLabel]))
@click.option("--as", "adjudicator", required=True, help="Your reviewer name (it must hold the adjudicator role).")
@click.option("--note", default="", help="Why: kept with the event.")
@DB_OPTION
@exits_on_error
def labels_adjudicate(run: str, trajectory: str, label: str, adjudicator: str, note: str, db: Path | None) -> None:
    """Resolve a trace whose reviewers disagree: an adjudicate event, in the same log as every
    label, decides its final label. The adjudicators are listed, one a line, in the
    workspace's adjudicators.txt (beside the database, in its .d folder)."""
    ws = _workspace(db, check=True)
    key = ws.find_run(run)["run_key"]
    ws.adjudicate(key, trajectory, adjudicator, label, note)
    click.echo(f"{_t(trajectory)}: adjudicated {label} by {_t(adjudicator)} (final label of run {key[:12]})")


@labels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@DB_OPTION
@click.option("--run", "run_ref", help="Refuse unless the labels belong to this run.")
@exits_on_error
def labels_import(file: Path, db: Path | None, run_ref: str | None) -> None:
    """Append exported label events to their run (refused against a different run). Every event
    obeys the app's rules (only Inconclusive trajectories take labels; an adjudication only by a
    reviewer adjudicators.txt names, of a disagreement); an event already stored is not stored
    again, however many imports of the file run at once."""
    ws = _workspace(db, check=True)
    key = ws.find_run(run_ref)["run_key"] if run_ref else None
    done = ws.import_label_file(file, key)
    click.echo(f"imported {done.stored:,} label events"
               + (f" ({done.already_present:,} of the file's were stored already)" if done.already_present else ""))


#: The package a wheel installs the review app as (pyproject.toml's force-include): app.py,
#: pages/, sample_runs/ and .streamlit/, laid out as in the checkout.
APP_PACKAGE = "litmus_review_app"


def app_script() -> Path:
    """The review app's main script: a source checkout's ``app.py`` beside ``scoring/`` when this
    package runs from one (an editable install also copies the app into site-packages, and that
    copy goes stale with every edit), else the installed copy (``litmus_review_app/app.py``,
    found with importlib.resources)."""
    checkout = Path(__file__).resolve().parent.parent / "app.py"
    if checkout.is_file():
        return checkout
    try:
        installed = importlib.resources.files(APP_PACKAGE).joinpath("app.py")
    except ModuleNotFoundError:
        installed = None
    if isinstance(installed, Path) and installed.is_file():
        return installed
    raise click.ClickException(f"the review app is not installed: neither the {APP_PACKAGE} package nor {checkout} "
                               "exists (reinstall litmus-review)")


@main.command()
@click.option("--port", default=8501, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True,
              help="Interface to bind; the default keeps the app on this machine.")
@STORAGE_TIMEOUT_OPTION
def serve(port: int, address: str, storage_timeout: float | None) -> None:
    """Start the review app (Streamlit)."""
    app = app_script()
    # The app's own launcher: Streamlit, with the app's imports and the bundled samples made ready
    # while the server starts (pages/_shared/serve.py), not in the first browser's session.
    cmd = [sys.executable, "-m", "pages._shared.serve", "run", str(app), "--server.port", str(port),
           "--server.address", address, "--server.headless", "true",
           "--browser.gatherUsageStats", "false"]
    # Streamlit reads .streamlit/config.toml (safe defaults) from the working directory: run it
    # from the app's folder, with the workspace database resolved where the user asked for it.
    env = {**os.environ, DB_ENV: str(default_db_path().resolve())}
    if storage_timeout is not None:  # the server's score tables and their runs' sources
        env[storage.STORAGE_TIMEOUT_ENV] = repr(storage_timeout)
    os.chdir(app.parent)
    # Become Streamlit rather than wait on it: a signal to this process (a service manager's
    # SIGTERM) then reaches the server, which a child process would survive as an orphan.
    os.execve(sys.executable, cmd, env)


if __name__ == "__main__":  # pragma: no cover
    main()
