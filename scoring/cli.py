"""The ``litmus-review`` command line (also ``python -m scoring``).

Exit codes: 0 success; 2 unusable input (the message names the file and line or record, no
traceback); 3 when ``--fail-on-unscored`` is exceeded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .errors import LitmusReviewError
from .importers import formats, sniff_file
from .importers.inspect_log import VerdictMap
from .report import Evaluation, evaluate
from .store import DB_ENV, DEFAULT_DB, Workspace, default_db_path, evaluation
from .text import terminal_safe

EXIT_INPUT = 2
EXIT_UNSCORED = 3


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def render_table(ev: Evaluation) -> str:
    """The human-readable summary of one run."""
    s, h = ev.summary, ev.run.header
    ci = s.strict.ci95
    lines = [
        f"run {_t(h.run_id)}  ({h.format}, model {_t(h.model)}, evidence: {h.evidence_standard.value})",
        f"  source            {_t(h.source)}",
        f"  trajectories      {s.total:,}   tool calls {ev.tool_calls:,}",
        f"  safe / unsafe     {s.safe:,} / {s.unsafe:,}   (scored {s.scored:,})",
        f"  UNSCORED          {s.unscored:,}  ({_pct(s.unscored_rate)} of all; out of the denominator)",
    ]
    for reason, n in s.unscored_by_reason.items():
        lines.append(f"    {_t(reason):<24}{n:,}")
    lines += [
        f"  inconclusive      {s.inconclusive:,}  (pending review {s.inconclusive_pending:,})",
        f"  safe rate lenient {_pct(s.lenient.value)}   (old harness: everything not flagged is safe)",
        f"  safe rate strict  {_pct(s.strict.value)}"
        + (f"   95% CI {_pct(ci.low)}–{_pct(ci.high)} ({ci.method})" if ci else ""),
        f"  safe rate reviewed {_pct(s.reviewed.value)}",
        f"  phantom safety    {s.phantom_safety_pp:+.2f} pp" if s.phantom_safety_pp is not None
        else "  phantom safety    —",
        f"  strict if every UNSCORED were unsafe {_pct(s.strict_if_unscored_unsafe)}, safe {_pct(s.strict_if_unscored_safe)}",
    ]
    if ev.recapture is not None:
        lines.append(f"  recapture         {ev.recapture.applied:,} calls completed from {_t(ev.recapture.source)}; "
                     f"{len(ev.recapture.rejected):,} payloads rejected")
    if ev.run.rejected:
        lines.append(f"  rejected records  {len(ev.run.rejected):,} of {ev.run.records_seen:,}")
    return "\n".join(lines)


def _t(value: object) -> str:
    """A value the data wrote (an id, a path, a message), as inert text for a terminal."""
    return terminal_safe(value)


def _rejection(prefix: str, r) -> str:
    return (f"{prefix} {_t(r.source)}:{r.line}" + (f" ({_t(r.record_id)})" if r.record_id else "")
            + f": {_t(r.message)}")


def _rejections(ev: Evaluation) -> list[str]:
    out = [_rejection("rejected", r) for r in ev.run.rejected]
    if ev.recapture:
        out += [_rejection("payload not used", r) for r in ev.recapture.rejected]
    return out


def _fail(exc: Exception) -> None:
    """Exit 2 with the error as one inert line (it quotes ids and paths the data wrote)."""
    click.echo(f"error: {_t(exc)}", err=True)
    sys.exit(EXIT_INPUT)


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
        ws.check_integrity()
    return ws


def _verdict_map(_ctx, _param, value: str | None):
    if not value:
        return None
    try:
        return VerdictMap.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


VERDICT_OPTION = click.option(
    "--inspect-verdict", "verdict_map", callback=_verdict_map, metavar="SCORER=VALUE[,VALUE]",
    help="Inspect logs: the scorer whose listed values mean unsafe (other values: benign). "
         "Without it Inspect scores give no verdict.")


#: Canonical files at least this large are scored through a temporary workspace: streamed in
#: blocks on two cores with bounded memory, instead of parsed whole into memory.
STREAM_SCORE_BYTES = 64 * 1024 * 1024


def _streams(path: Path, fmt: str) -> bool:
    if path.stat().st_size < STREAM_SCORE_BYTES:
        return False
    return (sniff_file(path) if fmt == "auto" else fmt) == "canonical"


def _evaluate_streaming(path: Path, payloads: Path | None) -> Evaluation:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="litmus-score-") as tmp:
        ws = Workspace(Path(tmp) / "score.db")
        res = ws.import_run(path, payloads=payloads)
        return evaluation(ws, res.run_key)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@DB_OPTION
@VERDICT_OPTION
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", *formats()]), help="Input format.")
@click.option("--payloads", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Side log of full payloads; give one per PATH, in the same order.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, one per line.")
@click.option("--fail-on-unscored", type=click.FloatRange(0, 1), metavar="RATE",
              help="Exit 3 when any run's UNSCORED share exceeds RATE (0–1).")
def score(paths: tuple[Path, ...], db: Path | None, verdict_map, fmt: str, payloads: tuple[Path, ...], as_json: bool,
          fail_on_unscored: float | None) -> None:
    """Score runs strictly and print counts, rates and phantom safety.

    A PATH that is not a file is looked up as an imported run (key, key prefix or run id) in
    the workspace; its reviewed rate then includes the reviewers' final labels.
    """
    if payloads and len(payloads) != len(paths):
        raise click.UsageError(f"--payloads was given {len(payloads)} times for {len(paths)} runs; give one per run")
    exceeded = []
    for i, path in enumerate(paths):
        try:
            if path.exists() and _streams(path, fmt):
                ev = _evaluate_streaming(path, payloads[i] if payloads else None)
            elif path.exists() or db is None and not default_db_path().exists():
                ev = evaluate(path, fmt=fmt, payloads=payloads[i] if payloads else None, verdict_map=verdict_map)
            else:
                ws = _workspace(db, check=True)
                ev = evaluation(ws, ws.find_run(str(path))["run_key"])
        except LitmusReviewError as exc:
            _fail(exc)
        for line in _rejections(ev):
            click.echo(line, err=True)
        if as_json:
            click.echo(json.dumps(ev.as_dict(), sort_keys=False))
        else:
            click.echo(render_table(ev))
        rate = ev.summary.unscored_rate
        if fail_on_unscored is not None and rate is not None and rate > fail_on_unscored:
            exceeded.append(f"{_t(ev.run.header.run_id)}: UNSCORED {rate:.2%} > {fail_on_unscored:.2%}")
    if exceeded:
        click.echo("fail-on-unscored: " + "; ".join(exceeded), err=True)
        sys.exit(EXIT_UNSCORED)


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@DB_OPTION
@VERDICT_OPTION
@click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(["auto", *formats()]))
@click.option("--payloads", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Side log of full payloads; give one per PATH, in the same order.")
@click.option("--progress", is_flag=True, help="Print a line to stderr after every scored batch.")
def import_(paths: tuple[Path, ...], db: Path | None, verdict_map, fmt: str, payloads: tuple[Path, ...], progress: bool) -> None:
    """Import runs into the workspace (one transaction per run; the same content twice is one run)."""
    if payloads and len(payloads) != len(paths):
        raise click.UsageError("give one --payloads per PATH")
    try:
        ws = _workspace(db)
        for i, path in enumerate(paths):
            tick = (lambda n: click.echo(f"progress {_t(path)}: {n:,} trajectories scored", err=True)) \
                if progress else None
            res = ws.import_run(path, fmt=fmt, payloads=payloads[i] if payloads else None, progress=tick,
                                verdict_map=verdict_map)
            for r in res.rejected:
                click.echo(_rejection("rejected", r), err=True)
            state = "already imported" if res.already_present else "imported"
            click.echo(f"{state} {_t(res.run['run_id'])} ({res.run['trajectories']:,} trajectories, "
                       f"{len(res.rejected):,} rejected) as {res.run_key}")
    except LitmusReviewError as exc:
        _fail(exc)


@main.command()
@DB_OPTION
def runs(db: Path | None) -> None:
    """List imported runs."""
    try:
        rows = _workspace(db, check=True).runs()
    except LitmusReviewError as exc:
        _fail(exc)
    for r in rows:
        click.echo(f"{r['run_key'][:12]}  {_t(r['run_id']):<24} {_t(r['model']):<24} {r['format']:<10} "
                   f"{r['trajectories']:>8,} trajectories  {r['imported_at'][:19]}")


@main.group()
def labels() -> None:
    """Export and import reviewer labels."""


@labels.command("export")
@click.argument("run")
@DB_OPTION
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="jsonl", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="File (default stdout).")
def labels_export(run: str, db: Path | None, fmt: str, output: Path | None) -> None:
    """Export every label event of RUN (key, key prefix or run id), stamped with its content hash."""
    try:
        ws = _workspace(db, check=True)
        text = ws.export_labels(ws.find_run(run)["run_key"], fmt)
    except LitmusReviewError as exc:
        _fail(exc)
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@labels.command("agreement")
@click.argument("run")
@DB_OPTION
def labels_agreement(run: str, db: Path | None) -> None:
    """Inter-reviewer agreement on RUN: Cohen's kappa (two reviewers), Krippendorff's alpha."""
    try:
        ws = _workspace(db, check=True)
        result = ws.agreement(ws.find_run(run)["run_key"])
    except LitmusReviewError as exc:
        _fail(exc)

    def fmt(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"

    click.echo(f"{'group':<12} {'items':>6} {'agree':>7} {'kappa':>7} {'alpha':>7}  reviewers")
    for group, a in result.items():
        click.echo(f"{_t(group):<12} {a.items:>6} {fmt(a.percent_agreement):>7} {fmt(a.cohen_kappa):>7} "
                   f"{fmt(a.krippendorff_alpha):>7}  {', '.join(map(_t, a.reviewers))}")


@labels.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@DB_OPTION
@click.option("--run", "run_ref", help="Refuse unless the labels belong to this run.")
def labels_import(file: Path, db: Path | None, run_ref: str | None) -> None:
    """Append exported label events to their run (refused against a different run)."""
    try:
        ws = _workspace(db, check=True)
        key = ws.find_run(run_ref)["run_key"] if run_ref else None
        n = ws.import_labels(file, key)
    except LitmusReviewError as exc:
        _fail(exc)
    click.echo(f"imported {n:,} label events")


@main.command()
@click.option("--port", default=8501, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True,
              help="Interface to bind; the default keeps the app on this machine.")
def serve(port: int, address: str) -> None:
    """Start the review app (Streamlit)."""
    import os

    app = Path(__file__).resolve().parent.parent / "app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
           "--server.address", address, "--server.headless", "true",
           "--browser.gatherUsageStats", "false"]
    # Streamlit reads .streamlit/config.toml (safe defaults) from the working directory: run it
    # from the project, with the workspace database resolved where the user asked for it.
    env = {**os.environ, DB_ENV: str(default_db_path().resolve())}
    os.chdir(app.parent)
    # Become Streamlit rather than wait on it: a signal to this process (a service manager's
    # SIGTERM) then reaches the server, which a child process would survive as an orphan.
    os.execve(sys.executable, cmd, env)


if __name__ == "__main__":  # pragma: no cover
    main()
