"""Report exports: pure functions from evaluations and figures to bytes (no Streamlit)."""

from __future__ import annotations

import html
import io
import json
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone

import pandas as pd
import plotly.graph_objects as go

from scoring.report import Evaluation
from scoring.score import SCORER_VERSION
from scoring.text import csv_safe, reveal, safe_file_name


@dataclass(frozen=True, slots=True)
class Stamp:
    """What every export carries so a figure can be traced back to its inputs."""

    run_hashes: dict[str, str]
    scorer_version: str
    labels_as_of: str
    generated_at: str
    provenance: tuple[str, ...] = ()
    """Per run: the file's own SHA-256, an upload's original name, the side log, the run status."""

    def lines(self) -> list[str]:
        return ([f"run {rid}: content sha256 {h}" for rid, h in self.run_hashes.items()]
                + list(self.provenance)
                + [f"scorer version {self.scorer_version}",
                   f"labels as of {self.labels_as_of}" if self.labels_as_of else "labels: none yet",
                   f"generated {self.generated_at}"])


def make_stamp(evaluations: list[Evaluation], labels_as_of: str | None) -> Stamp:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return Stamp({ev.run.header.run_id: ev.run.content_sha256 for ev in evaluations}, SCORER_VERSION,
                 labels_as_of or "", now, tuple(line for ev in evaluations for line in provenance_lines(ev)))


def source_line(ev: Evaluation) -> str:
    """One line under a run's rates: the harness's run status, the side log, the file's hash."""
    h = ev.run.header
    status = (f"harness run status: {h.run_status}" + (f" ({h.run_status_detail})" if h.run_status_detail else "")
              if h.run_status else "harness run status: not recorded by the format")
    side = (f"side log: {ev.side_log['source']}" if ev.side_log else "side log: none")
    return f"{status} · {side} · file sha256 {ev.file_sha256[:16] + '…' if ev.file_sha256 else 'unknown'}"


def provenance_lines(ev: Evaluation) -> list[str]:
    """Where a run's figures come from, in words (content sha256 is the run's identity: the
    file's hash, or with a side log or verdict map the hash of both; file sha256 is what
    ``sha256sum`` prints for the file)."""
    rid, h = ev.run.header.run_id, ev.run.header
    out = [f"run {rid}: file sha256 {ev.file_sha256 or 'unknown'}"
           + (f" (uploaded as {ev.original_name})" if ev.original_name else "")]
    out.append(f"run {rid}: side log " + (f"{ev.side_log['source']} (sha256 {ev.side_log['sha256']})"
                                           if ev.side_log else "none used"))
    if h.run_status:
        out.append(f"run {rid}: harness run status {h.run_status}"
                   + (f" ({h.run_status_detail})" if h.run_status_detail else ""))
    return out


def aggregates_frame(evaluations: list[Evaluation]) -> pd.DataFrame:
    rows = []
    for ev in evaluations:
        d = ev.as_dict()
        rows.append({k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in d.items()})
    return pd.DataFrame(rows)


def aggregates_json(evaluations: list[Evaluation], stamp: Stamp) -> str:
    return json.dumps({"stamp": _stamp_dict(stamp), "runs": [ev.as_dict() for ev in evaluations]}, indent=2)


def _stamp_dict(stamp: Stamp) -> dict:
    return {"run_hashes": stamp.run_hashes, "scorer_version": stamp.scorer_version,
            "labels_as_of": stamp.labels_as_of, "generated_at": stamp.generated_at}


def labels_file_name(run_id: str, run_key: str) -> str:
    """The label CSV's download name: the run id (data-written) sanitised and cut to 60
    characters, then the key's first 8 hex digits."""
    return f"labels-{safe_file_name(run_id, '', 60)}-{run_key[:8]}.csv"


def stamped_csv(frame: pd.DataFrame, stamp: Stamp) -> str:
    """CSV with the stamp as leading ``#`` comment lines (pandas reads it with comment='#').

    Formula-safe: a text cell starting with = + - @ tab or CR (a run id, a model) gets a
    leading apostrophe, and a stamp line cannot end its comment (its controls are spelled out)."""
    safe = frame.map(csv_safe) if hasattr(frame, "map") else frame.applymap(csv_safe)
    return "".join(f"# {reveal(line, keep='')[0]}\n" for line in stamp.lines()) + safe.to_csv(index=False)


def html_report(evaluations: list[Evaluation], figures: list[tuple[str, go.Figure]], stamp: Stamp) -> str:
    """A self-contained offline HTML report: plotly.js embedded once, no network requests.

    Every string that came from a run (ids, models, reasons) is HTML-escaped.
    """
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
             "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">",
             "<title>litmus-review report</title>",
             "<style>body{font-family:Helvetica,Arial,sans-serif;margin:2em;max-width:1200px}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
             "th{background:#f4f4f4}.stamp{color:#555;font-size:12px}</style></head><body>",
             "<h1>litmus-review report</h1>",
             "<div class='stamp'>" + "<br>".join(e(line) for line in stamp.lines()) + "</div>",
             "<h2>Safe rates</h2><table><tr><th>run</th><th>model</th><th>trajectories</th>"
             "<th>lenient (harness's claim; n judged)</th><th>strict</th><th>reviewed</th><th>UNSCORED</th>"
             "<th>rejected records</th><th>no safety verdict</th><th>Inconclusive (pending)</th>"
             "<th>phantom safety (capture loss + hidden harm)</th><th>pending review</th><th>evidence</th></tr>"]

    def pct(x):
        return "—" if x is None else f"{100 * x:.2f}%"

    def pp(x):
        return "—" if x is None else f"{x:+.2f} pp"

    for ev in evaluations:
        s = ev.summary
        ci = s.strict.ci95
        standard = ev.run.header.evidence_standard.value
        parts.append(
            f"<tr><td>{e(ev.run.header.run_id)}</td><td>{e(ev.run.header.model)}</td><td>{s.total:,}</td>"
            f"<td>{pct(s.lenient.value)} (n={s.judged:,})</td><td>{pct(s.strict.value)}"
            + (f" ({100 * ci.low:.1f}–{100 * ci.high:.1f})" if ci else "") + "</td>"
            f"<td>{pct(s.reviewed.value)}</td><td>{s.unscored:,} ({pct(s.unscored_rate)})</td>"
            f"<td>{s.rejected:,}</td><td>{s.no_verdict:,}</td>"
            f"<td>{s.inconclusive:,} ({s.inconclusive_pending:,})</td>"
            f"<td>{pp(s.phantom.phantom_pp if s.phantom else None)}</td>"
            f"<td>{pp(s.phantom.pending_review_pp if s.phantom else None)}</td>"
            f"<td>{e(standard)}{' (not proven by digests)' if standard == 'structural' else ''}</td></tr>")
    parts.append("</table><p>UNSCORED trajectories (capture not proven complete) and Inconclusive ones are "
                 "outside the strict denominator and reported beside it; so are rejected records (not "
                 "imported) and trajectories never asked a safety question. The lenient rate is the harness's "
                 "own claim over the trajectories it judged. Phantom safety is lenient − strict without the "
                 "pending review, which is work not yet done.</p>")
    for i, (title, fig) in enumerate(figures):
        parts.append(f"<h2>{e(title)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False}))
    parts.append("</body></html>")
    return "\n".join(parts)


def stamp_figure(fig: go.Figure, stamp: Stamp) -> go.Figure:
    """A copy of the figure with a one-line stamp under it (so an image keeps its provenance)."""
    runs = "; ".join(f"{rid} {h[:12]}" for rid, h in stamp.run_hashes.items())
    text = (f"runs: {runs} · scorer {stamp.scorer_version} · "
            + (f"labels as of {stamp.labels_as_of[:19]}" if stamp.labels_as_of else "no labels yet"))
    out = go.Figure(fig)
    out.add_annotation(text=html.escape(text), xref="paper", yref="paper", x=0, y=-0.02, yanchor="top",
                       yshift=-45, showarrow=False, font=dict(size=10, color="#777"), align="left")
    return out


def figure_images(figures: list[tuple[str, go.Figure]], fmt: str, stamp: Stamp | None = None) -> bytes:
    """A zip of every figure as PNG or PDF (kaleido drives Debian's chromium), each stamped, with
    STAMP.txt beside them."""
    import plotly.io as pio

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if stamp is not None:
            zf.writestr("STAMP.txt", "\n".join(stamp.lines()) + "\n")
            figures = [(t, stamp_figure(f, stamp)) for t, f in figures]
        for i, (title, fig) in enumerate(figures):
            name = "".join(ch if ch.isalnum() else "-" for ch in title.lower()).strip("-")[:60]
            zf.writestr(f"{i + 1:02d}-{name}.{fmt}", pio.to_image(fig, format=fmt, width=1200, height=650, scale=2))
    return buf.getvalue()
