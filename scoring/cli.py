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
from .importers import formats
from .report import Evaluation, evaluate

EXIT_INPUT = 2
EXIT_UNSCORED = 3


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def render_table(ev: Evaluation) -> str:
    """The human-readable summary of one run."""
    s, h = ev.summary, ev.run.header
    ci = s.strict.ci95
    lines = [
        f"run {h.run_id}  ({h.format}, model {h.model}, evidence: {h.evidence_standard.value})",
        f"  source            {h.source}",
        f"  trajectories      {s.total:,}   tool calls {ev.run.tool_call_count:,}",
        f"  safe / unsafe     {s.safe:,} / {s.unsafe:,}   (scored {s.scored:,})",
        f"  UNSCORED          {s.unscored:,}  ({_pct(s.unscored_rate)} of all; out of the denominator)",
    ]
    for reason, n in s.unscored_by_reason.items():
        lines.append(f"    {reason:<24}{n:,}")
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
        lines.append(f"  recapture         {ev.recapture.applied:,} calls completed from {ev.recapture.source}; "
                     f"{len(ev.recapture.rejected):,} payloads rejected")
    if ev.run.rejected:
        lines.append(f"  rejected records  {len(ev.run.rejected):,} of {ev.run.records_seen:,}")
    return "\n".join(lines)


def _rejections(ev: Evaluation) -> list[str]:
    out = [f"rejected {r.source}:{r.line}" + (f" ({r.record_id})" if r.record_id else "") + f": {r.message}"
           for r in ev.run.rejected]
    if ev.recapture:
        out += [f"payload not used {ev.recapture.source}:{r.line}"
                + (f" ({r.record_id})" if r.record_id else "") + f": {r.message}" for r in ev.recapture.rejected]
    return out


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="litmus-review")
def main() -> None:
    """Strict, capture-aware scoring of agent safety benchmark runs."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", *formats()]), help="Input format.")
@click.option("--payloads", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Side log of full payloads; give one per PATH, in the same order.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per run, one per line.")
@click.option("--fail-on-unscored", type=click.FloatRange(0, 1), metavar="RATE",
              help="Exit 3 when any run's UNSCORED share exceeds RATE (0–1).")
def score(paths: tuple[Path, ...], fmt: str, payloads: tuple[Path, ...], as_json: bool,
          fail_on_unscored: float | None) -> None:
    """Score runs strictly and print counts, rates and phantom safety."""
    if payloads and len(payloads) != len(paths):
        raise click.UsageError(f"--payloads was given {len(payloads)} times for {len(paths)} runs; give one per run")
    exceeded = []
    for i, path in enumerate(paths):
        try:
            ev = evaluate(path, fmt=fmt, payloads=payloads[i] if payloads else None)
        except LitmusReviewError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_INPUT)
        for line in _rejections(ev):
            click.echo(line, err=True)
        if as_json:
            click.echo(json.dumps(ev.as_dict(), sort_keys=False))
        else:
            click.echo(render_table(ev))
        rate = ev.summary.unscored_rate
        if fail_on_unscored is not None and rate is not None and rate > fail_on_unscored:
            exceeded.append(f"{ev.run.header.run_id}: UNSCORED {rate:.2%} > {fail_on_unscored:.2%}")
    if exceeded:
        click.echo("fail-on-unscored: " + "; ".join(exceeded), err=True)
        sys.exit(EXIT_UNSCORED)


@main.command()
@click.option("--port", default=8501, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True,
              help="Interface to bind; the default keeps the app on this machine.")
def serve(port: int, address: str) -> None:
    """Start the review app (Streamlit)."""
    import subprocess

    app = Path(__file__).resolve().parent.parent / "app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(port),
           "--server.address", address, "--server.headless", "true",
           "--browser.gatherUsageStats", "false"]
    sys.exit(subprocess.call(cmd))


if __name__ == "__main__":  # pragma: no cover
    main()
