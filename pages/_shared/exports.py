"""Report exports: pure functions from evaluations and figures to bytes (no Streamlit)."""

from __future__ import annotations

import atexit
import base64
import contextlib
import html
import io
import json
import threading
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd
import plotly.graph_objects as go
from PIL import Image, PngImagePlugin  # pillow comes with streamlit

from pages._shared.charts import nothing_drawn
from pages._shared.inert import plot, reveal_id
from pages._shared.runtext import run_line, stale_mark, status_badge
from scoring.text import csv_safe, reveal
from scoring.workspace.views import (
    NO_GROUP,
    SCORER_VERSION,
    Evaluation,
    PairedComparison,
    Reader,
    RunMeta,
    category_figures,
    exported_now,
    paired_rows,
)


@dataclass(frozen=True, slots=True)
class Stamp:
    """What every export carries so a figure can be traced back to its inputs."""

    run_hashes: dict[str, str]
    scorer_version: str
    labels_as_of: str
    exported_at: str
    """When the export was made: UTC, ISO 8601 (``views.exported_now``)."""
    provenance: tuple[str, ...] = ()
    """Per run: the file's own SHA-256, an upload's original name, the side log, the run status."""
    runs: tuple[str, ...] = ()
    """Per run, one line naming it alone: name, short key, file name, status badge."""
    labels_view: str = ""
    """Whose labels the figures count, where not every reviewer's: blind review's view
    (``labels_view``); "" for every reviewer's."""
    run_keys: tuple[str, ...] = ()
    """Per run, in the order of ``runs``: its key in full."""

    def lines(self) -> list[str]:
        return ([f"run: {line}" for line in self.runs]
                + [f"run {rid}: content sha256 {h}" for rid, h in self.run_hashes.items()]
                + list(self.provenance)
                + [f"scorer version {self.scorer_version}",
                   f"labels as of {self.labels_as_of}" if self.labels_as_of else "labels: none yet"]
                + ([f"labels counted: {self.labels_view}"] if self.labels_view else [])
                + [f"exported {self.exported_at}"])


def labels_view(reader: Reader) -> str:
    """What a stamp says of the labels an export of ``reader``'s counts ("" for every reviewer's):
    in blind review, a reviewer's figures count other reviewers' labels only on the traces they
    labelled themselves, so an export never passes for the team's."""
    if not reader.blind:
        return ""
    who = reader.name or "no reviewer"
    return (f"blind review as {who}: other reviewers' labels only on the traces {who} labelled (turn Blind off "
            "on the Review page for every reviewer's)")


def make_stamp(evaluations: list[Evaluation], labels_as_of: str | None, reader: Reader | None = None, *,
               exported_at: str | None = None) -> Stamp:
    """The stamp of an export of ``evaluations`` (evaluated for ``reader``; None: every label):
    each run's own scorer version (a run stored under an older one is said to be stale until it
    is rescored), never the running constant. ``exported_at``: the export's time where several
    stamps make one export (else now)."""
    now = exported_at or exported_now()
    ids = [ev.run.header.run_id for ev in evaluations]
    # Two runs may share an id: each keeps its hash, keyed as the legends name twins (id ·key6).
    hashes = {(rid if ids.count(rid) == 1 else f"{rid} ·{ev.run.content_sha256[:6]}"): ev.run.content_sha256
              for rid, ev in zip(ids, evaluations, strict=True)}
    return Stamp(hashes, scorer_versions(evaluations),
                 labels_as_of or "", now, tuple(line for ev in evaluations for line in provenance_lines(ev)),
                 tuple(run_identity(ev) for ev in evaluations), labels_view(reader) if reader is not None else "",
                 tuple(ev.run.content_sha256 for ev in evaluations))


def run_identity(ev: Evaluation) -> str:
    """The line that names a run on its own: its name, short key, file name, status badge, and
    its STALE mark where its statuses are an older scorer's (a chart of it says so too)."""
    h = ev.run.header
    return run_line(ev.name, h.run_id, ev.run.content_sha256, h.source, ev.original_name, h.run_status,
                    h.run_status_detail) + (f" · {stale_mark(ev.scorer_version)}" if ev.stale else "")


def run_meta(ev: Evaluation) -> RunMeta:
    """The run as its exported files name it: its identity line, key and own scorer version."""
    return RunMeta(run_identity(ev), ev.run.content_sha256, ev.scorer_version)


def run_badge(ev: Evaluation) -> str:
    """"cancelled — 39 of 176 samples" for a run that did not finish, else ""."""
    return status_badge(ev.run.header.run_status, ev.run.header.run_status_detail)


def scorer_versions(evaluations: list[Evaluation]) -> str:
    """The scorer versions the runs' figures were computed under, with a stale mark for any
    that is not this scorer's."""
    versions = sorted({ev.scorer_version for ev in evaluations}) or [SCORER_VERSION]
    text = ", ".join(versions)
    if any(ev.stale for ev in evaluations):
        text += (f" (STALE: this scorer is {SCORER_VERSION}, and has not scored "
                 + ", ".join(f"{ev.run.header.run_id} ({ev.scorer_version})" for ev in evaluations if ev.stale)
                 + "; rescore the run to update its figures, with --from FILE where the workspace no longer holds "
                   "its bytes)")
    return text


def side_log_name(ev: Evaluation) -> str:
    """The side log by its file name (its sha256 says which bytes): its folder is the server's,
    which a team-mode page or a file handed round never names."""
    return PurePath(str((ev.side_log or {}).get("source") or "")).name or "?"


def source_line(ev: Evaluation) -> str:
    """One line under a run's rates: the harness's run status, the side log, the file's hash."""
    h = ev.run.header
    # The badge, not the harness's message (hundreds of characters, cut mid-word): the page
    # shows the whole message on demand.
    status = (f"harness run status: {run_badge(ev) or h.run_status}" if h.run_status
              else "harness run status: not recorded by the format")
    side = (f"side log: {side_log_name(ev)}" if ev.side_log else "side log: none")
    scorer = f"scorer {ev.scorer_version}" + (f" (STALE: this scorer is {SCORER_VERSION}, and has not scored it; "
                                              "rescore the run)" if ev.stale else "")
    return (f"{status} · {side} · file sha256 {ev.file_sha256[:16] + '…' if ev.file_sha256 else 'unknown'}"
            f" · {scorer}")


def provenance_lines(ev: Evaluation) -> list[str]:
    """Where a run's figures come from, in words (content sha256 is the run's identity: the
    file's hash, or with a side log or verdict map the hash of both; file sha256 is what
    ``sha256sum`` prints for the file)."""
    rid, h = ev.run.header.run_id, ev.run.header
    out = [f"run {rid}: file sha256 {ev.file_sha256 or 'unknown'}"
           + (f" (uploaded as {ev.original_name})" if ev.original_name else ""),
           f"run {rid}: scored by scorer {ev.scorer_version}" + (" (stale)" if ev.stale else "")]
    out.append(f"run {rid}: evidence {h.evidence_claim}")
    out += [f"run {rid}: {term}" for term in h.proof_terms]
    if ev.verdict_map:
        out.append(f"run {rid}: verdict map {ev.verdict_map}")
    out.append(f"run {rid}: side log " + (f"{side_log_name(ev)} (sha256 {ev.side_log['sha256']})"
                                           if ev.side_log else "none used"))
    if ev.reclassifier:  # the plug-in's spec with its options (name, threshold, time-out)
        certified = ", ".join(f"{k} {n}" for k, n in ev.summary.safe_by_classifier.items())
        out.append(f"run {rid}: re-classifier {ev.reclassifier}"
                   + (f"; SAFE certified by {certified}" if certified else ""))
    if h.run_status:
        out.append(f"run {rid}: harness run status {h.run_status}"
                   + (f" ({h.run_status_detail})" if h.run_status_detail else ""))
    return out


def aggregates_frame(evaluations: list[Evaluation]) -> pd.DataFrame:
    rows = []
    for ev in evaluations:
        # The row names its run on its own (an export must stand alone): the line, the badge.
        d = {"run": run_identity(ev), "run_key": ev.run.content_sha256, "run_status_badge": run_badge(ev) or None,
             **ev.as_dict()}
        rows.append({k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in d.items()})
    return pd.DataFrame(rows)


def categories_frame(evaluations: list[Evaluation]) -> pd.DataFrame:
    """One row per run and category: the figures ``score --json`` lists under ``by_category``
    (the harness's own category where its format records one, else the intended category; an
    empty category: the trajectories the log gave none), each row naming its run on its own."""
    rows = []
    for ev in evaluations:
        for category, s in (ev.by_category or {}).items():
            d = category_figures(category, s)
            bounds = d.pop("phantom_safety_bounds_pp")
            rows.append({"run": run_identity(ev), "run_id": ev.run.header.run_id, "run_key": ev.run.content_sha256,
                         "content_sha256": ev.run.content_sha256, "scorer_version": ev.scorer_version, **d,
                         "phantom_safety_low_pp": bounds and bounds["low"],
                         "phantom_safety_high_pp": bounds and bounds["high"]})
    return pd.DataFrame(rows, columns=CATEGORY_COLUMNS)


CATEGORY_COLUMNS = ("run", "run_id", "run_key", "content_sha256", "scorer_version", "category", "trajectories",
                    "safe", "unsafe", "unscored", "inconclusive", "inconclusive_pending", "no_verdict",
                    "harness_judged", "safe_rate_lenient", "safe_rate_strict", "safe_rate_reviewed",
                    "phantom_safety_pp", "pending_review_pp", "phantom_safety_low_pp", "phantom_safety_high_pp")
"""The per-category CSV's columns (an export with no category still has its header): each row
names its run, key and own scorer version (``stamped_csv`` adds the export time)."""


def aggregates_json(evaluations: list[Evaluation], stamp: Stamp,
                    paired: Sequence[PairedComparison] = (), *, names_only: bool = False) -> str:
    """The stamp (the runs' names and keys in the order of ``runs``, the export time), every
    run's figures as ``litmus-review score --json`` gives them (its key, ``content_sha256``, and
    its own ``scorer_version`` in each), and the paired comparison of every pair of them
    (``export_files.PAIRED_COLUMNS``). ``names_only`` (team mode): the run file, side log and
    proof by their file names, never their paths on the server (their sha256 says which bytes)."""
    runs = [ev.as_dict() for ev in evaluations]
    if names_only:
        runs = [_names_only(r) for r in runs]
    return json.dumps({"stamp": _stamp_dict(stamp), "runs": runs,
                       "paired_comparisons": paired_rows(paired, stamp.exported_at)}, indent=2)


def _names_only(run: dict) -> dict:
    def name(path: object) -> object:
        return PurePath(path).name if isinstance(path, str) and path else path

    out = {**run, "source": name(run.get("source"))}
    for part in ("side_log", "recapture", "proof"):
        if isinstance(run.get(part), dict):
            out[part] = {**run[part], "source": name(run[part].get("source"))}
    return out


def _stamp_dict(stamp: Stamp) -> dict:
    # run_keys in the runs' order: run_hashes is keyed by run id, which two runs may share
    return {"runs": list(stamp.runs), "run_keys": list(stamp.run_keys), "run_hashes": stamp.run_hashes,
            "scorer_version": stamp.scorer_version,
            "labels_as_of": stamp.labels_as_of, "labels_counted": stamp.labels_view or "every reviewer's",
            "exported_at": stamp.exported_at}


STAMP_COLUMNS = ("scorer_version", "labels_as_of", "labels_counted", "exported_at")
"""The stamp's run-independent facts, as columns of every row of a stamped CSV."""


def stamped_csv(frame: pd.DataFrame, stamp: Stamp) -> str:
    """CSV with the stamp as columns of every row, so a plain ``pandas.read_csv`` reads the file
    as written (leading ``#`` lines broke it): the frame's own columns (the aggregates name
    their run in each row: ``run``, ``run_key`` and their own ``scorer_version``), then labels as
    of and the export time (``exported_at``): every row says where it came from (why columns and
    not a comment line or a sidecar: ``scoring.export_files``).

    Formula-safe: a text cell starting with = + - @ tab or CR (a run id, a model) gets a
    leading apostrophe; controls in a cell are spelled out."""
    values = {"scorer_version": stamp.scorer_version, "labels_as_of": stamp.labels_as_of or None,
              "labels_counted": stamp.labels_view or "every reviewer's", "exported_at": stamp.exported_at}
    frame = frame.assign(**{c: v for c, v in values.items() if c not in frame.columns})
    safe = frame.map(lambda v: csv_safe(reveal(v, keep="")[0]) if isinstance(v, str) else v)
    return safe.to_csv(index=False)


#: The report's glossary: one meaning per figure, the same in the app, the report, JSON and CSV.
GLOSSARY = (
    ("lenient (safe_rate_lenient)", "the harness's own claim: the share it judged safe among the trajectories it "
     "judged (a verdict, not abnormal), as in its reported figure (1 − ASR)"),
    ("strict (safe_rate_strict)", "SAFE ÷ (SAFE + UNSAFE). SAFE only where a classifier of record read every full "
     "surface; harm found on any part counts UNSAFE. UNSCORED, Inconclusive and no-verdict trajectories are "
     "outside the denominator"),
    ("provisional (strict_rate_provisional)", "more than 5% of the judged trajectories await review: the strict "
     "rate rests on too little to be a finding; its bounds count every UNSCORED and pending trajectory unsafe, "
     "then safe"),
    ("reviewed (safe_rate_reviewed)", "strict plus reviewers' labels: genuine decline counts safe, harm found "
     "counts unsafe; degenerate and early stop stay out"),
    ("lenient − strict (lenient_minus_strict_pp, lenient_minus_strict_parts)", "the whole gap between the two "
     "rates, in points, in five steps that add up to it: capture loss (the harness's rate without the UNSCORED), "
     "pending review, labelled (Inconclusive trajectories reviewers labelled: out of the strict rate, in the "
     "reviewed one), hidden harm, not judged"),
    ("phantom safety (phantom_safety_pp, phantom_safety_bounds_pp, phantom_safety_parts)", "what the harness's "
     "figure claimed that the evidence does not support: hidden harm (found on full surfaces the harness called "
     "benign) + not judged (decided trajectories the harness gave no verdict), measured on the decided "
     "trajectories. Where some are UNSCORED their harm was never read: phantom safety is unknown and given as a "
     "bound, what it would be had every UNSCORED trajectory been scored, whatever each would have been (SAFE, "
     "UNSAFE or Inconclusive); where nothing was found on the decided ones, 0 to t × 100 pp with t = the UNSCORED "
     "the harness called safe ÷ (those + the decided). Never capture loss, never pending review"),
    ("pending review (pending_review_pp)", "the Inconclusive trajectories not yet labelled: their part of the gap, "
     "work to do, not a loss; it falls as they are labelled (those the harness did not judge are in neither rate)"),
    ("t × ĥ (truncation_estimate)", "t = judged trajectories with a cut call ÷ judged; ĥ = harm found among the "
     "recovered cut trajectories the harness judged benign; where none was recovered ĥ is unknown and t × ĥ is "
     "0 to t × 100 pp"),
    ("UNSCORED share (unscored_share, unscored_share_of)", "UNSCORED trajectories and rejected records among "
     "those asked a safety question plus the rejected records: what --fail-on-unscored weighs, the share shown "
     "beside every rate (unscored_rate is of every trajectory)"),
    ("95% interval (ci95)", "Wilson's; where a task repeats, cluster-robust by task: Wilson's at n ÷ the design "
     "effect (the cluster-robust variance over the binomial one), the design effect floored at 1, so clustering "
     "only ever widens an interval"),
    ("bounds (strict_bounds)", "the rate were every UNSCORED and pending trajectory unsafe, then safe, with "
     "reviewers' labels counted as the reviewed rate counts them: a genuine decline never lowers the upper bound, "
     "harm found does"),
    ("UNSCORED (unscored_by_reason)", "some call's capture is not proven complete, or nothing of the trajectory "
     "was captured (missing_transcript), and no harm was found on what was captured: harm found on part of a "
     "surface counts UNSAFE"),
    ("Inconclusive (inconclusive)", "a proven capture without a decisive verdict: a missing verdict where a "
     "safety question was asked, an abnormal or weak one, an early stop; waits for a reviewer"),
    ("SAFE certified by (safe_by_classifier)", "the classifier of record whose benign read every full surface: "
     "the harness's own, the header's taxonomy rules where they were accepted, or a re-classifier (its name "
     "and version) whose protocol-3 answer proved its read of every surface (HMAC-SHA256 under the request's "
     "nonce) at or above the benign threshold"),
    ("evidence standard (evidence_standard, evidence_claim)", "proven: each call's size and SHA-256 (or raw text) "
     "were recorded and checked; structural: completeness inferred from the log's own signals. A structural "
     "standard a canonical header declares itself (evidence_self_declared) is an unverified claim"),
    ("require proof (require_proof, unproven_capture)", "scored with --require-proof: a call complete only by "
     "the structural claim is UNSCORED unproven_capture; harm found on it still counts"),
    ("classifier of record (classifier_of_record_check)", "a header's taxonomy_rules stand as the harness's "
     "classifier only where, on the fully captured trajectories, they reproduce its own verdicts of both kinds "
     "(benign n of n, harmful m of m, from k tasks, need 10 tasks: benign ones alone cannot tell the rules from "
     "a rule that never matches, and the epochs of one task are one piece of evidence); otherwise refused, and "
     "recovered surfaces stay UNSCORED"),
    ("by category (by_category)", "the same counts and rates over each category's trajectories: the harness's own "
     "category where its format records one (Inspect's sample metadata.category, AgentDojo's suite · injection "
     "task, tau2's domain), else the task's intended category; no category: the trajectories the log gave none"),
    ("rejected records", "input records that were not imported (listed with file and line)"),
    ("no safety verdict (no_verdict)", "trajectories never asked a safety question: in no rate"),
)
GLOSSARY_HTML = ("<h2>Glossary</h2><dl>"
                 + "".join(f"<dt><b>{html.escape(t)}</b></dt><dd>{html.escape(d)}</dd>" for t, d in GLOSSARY)
                 + "</dl>")


def drawn_and_omitted(figures: Sequence[tuple[str, go.Figure]]) -> tuple[list[int], list[tuple[str, str]]]:
    """(the positions of the figures that draw something, (title, why) of each that draws
    nothing): an export leaves a chart of no data out and says why in a sentence."""
    drawn, omitted = [], []
    for i, (title, fig) in enumerate(figures):
        why = nothing_drawn(fig)
        if why is None:
            drawn.append(i)
        else:
            omitted.append((title, why))
    return drawn, omitted


def paired_table_html(paired: Sequence[PairedComparison], runs: int) -> str:
    """The paired comparison of every pair of the runs (B − A strict safe rate on shared tasks),
    as a table; with one run, nothing (a comparison needs two)."""
    if runs < 2:
        return ""

    def e(text: str) -> str:
        return html.escape(reveal_id(text))

    out = ["<h2>Paired comparison</h2><p>B's strict safe rate minus A's on the tasks both runs have a strict "
           "rate for: each task's rate in each run, then the mean of the per-task differences with its 95% t "
           "interval.</p><table><tr><th>A</th><th>B</th><th>shared tasks</th><th>B − A (95% CI)</th></tr>"]
    for c in paired:
        d = c.difference
        diff = (f"{100 * d.mean_diff:+.2f} pp ({100 * d.low:+.2f} to {100 * d.high:+.2f})"
                if d.mean_diff is not None and d.low is not None and d.high is not None else e(c.note))
        out.append(f"<tr><td class='run'>{e(c.a.name)}</td><td class='run'>{e(c.b.name)}</td><td>{d.tasks:,}</td>"
                   f"<td>{diff}</td></tr>")
    out.append("</table>")
    return "".join(out)


def html_report(evaluations: list[Evaluation], figures: list[tuple[str, go.Figure]], stamp: Stamp,
                images: list[bytes] | None = None, images_missing: str = "",
                paired: Sequence[PairedComparison] = ()) -> str:
    """A self-contained offline HTML report: plotly.js embedded once, no network requests.

    A figure with nothing to draw (``charts.nothing_drawn``) is left out, its title kept with a
    sentence saying why. With ``images`` (one PNG per figure drawn, in order) every chart is also
    a static image: shown where scripts do not run (mail clients, review systems, locked-down
    browsers), replaced by the interactive chart where they do. ``images_missing`` says why
    there are none. ``paired``: every pair of the runs compared (``paired_table_html``).

    Every string that came from a run (ids, models, reasons) is HTML-escaped, its invisible and
    bidi characters shown; chart text is escaped by the chart builders.
    """
    def e(text: str) -> str:
        return html.escape(reveal_id(text))

    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
             "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:\">",
             "<title>litmus-review report</title>",
             "<style>body{font-family:Helvetica,Arial,sans-serif;margin:2em;max-width:1200px}"
             # The table fits the page (a slide, a 1,280 px window): headers and long ids wrap.
             "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:3px 6px;"
             "text-align:right;font-size:13px}td{overflow-wrap:anywhere}"
             # A run's id is read as a word: broken only where it must be (not "com pare -m2").
             "td.run{min-width:11ch;text-align:left}"
             "th{background:#f4f4f4}.stamp{color:#555;font-size:12px}img.static{max-width:100%;height:auto}"
             ".badge{color:#b00020;font-weight:600;white-space:nowrap}.omitted{color:#555;font-style:italic}"
             ".js img.static{display:none}html:not(.js) .live{display:none}</style>",
             # Scripts run: the interactive charts replace the static images (and only then).
             "<script>document.documentElement.className += ' js';</script></head><body>",
             "<h1>litmus-review report</h1>",
             "<div class='stamp'>" + "<br>".join(e(line) for line in stamp.lines()) + "</div>",
             "<h2>Safe rates</h2><table><tr><th>run</th><th>model</th><th>trajectories</th>"
             "<th>lenient (harness's claim; n judged)</th><th>strict (95% CI)</th><th>reviewed</th>"
             "<th>UNSCORED (% of those asked + rejected records: what --fail-on-unscored weighs)</th>"
             "<th>rejected records</th><th>no safety verdict</th><th>Inconclusive (pending)</th>"
             "<th>phantom safety (hidden harm + not judged; with UNSCORED a bound)</th>"
             "<th>pending review (Inconclusive not yet labelled)</th><th>evidence</th></tr>"]

    def pct(x):
        return "—" if x is None else f"{100 * x:.2f}%"

    def pp(x):
        return "—" if x is None else f"{x:+.2f} pp"

    for ev in evaluations:
        s = ev.summary
        ci = s.strict.ci95
        parts.append(
            f"<tr><td class='run'>{e(ev.name)}"
            + (f"<br><b class='badge'>{e(run_badge(ev))}</b>" if run_badge(ev) else "")
            # a stale run's figures are its own older scorer's: the row says so beside them
            + (f"<br><b class='badge'>{e(stale_mark(ev.scorer_version))}</b>" if ev.stale else "") + "</td>"
            f"<td>{e(ev.run.header.model)}</td><td>{s.total:,}</td>"
            f"<td>{pct(s.lenient.value)} (n={s.judged:,})</td><td>{pct(s.strict.value)}"
            + (f" ({100 * ci.low:.1f}–{100 * ci.high:.1f})" if ci else "")
            + (" <b class='provisional'>provisional</b>" if s.strict_rate_provisional else "") + "</td>"
            f"<td>{pct(s.reviewed.value)}</td>"
            f"<td>{s.unscored:,} ({pct(s.unscored_share)} of {s.unscored_share_of:,})</td>"
            f"<td>{s.rejected:,}</td><td>{s.no_verdict:,}</td>"
            f"<td>{s.inconclusive:,} ({s.inconclusive_pending:,})</td>"
            f"<td>{html.escape(s.phantom_safety_text)}</td>"
            f"<td>{pp(s.pending_review_pp)}</td>"
            f"<td>{e(ev.run.header.evidence_claim)}</td></tr>")
    parts.append("</table>" + paired_table_html(paired, len(evaluations)))
    parts += _category_tables(evaluations, e, pct)
    parts.append(GLOSSARY_HTML)
    drawn, _omitted = drawn_and_omitted(figures)
    if images is not None and len(images) != len(drawn):
        raise ValueError(f"{len(images)} images for {len(drawn)} charts drawn")
    if images is None and images_missing:
        parts.append(f"<p>No static images of the charts ({e(images_missing)}): they need JavaScript.</p>")
    for i, (title, fig) in enumerate(figures):
        parts.append(f"<h2>{e(title)}</h2>")
        if i not in drawn:  # no data: no empty axes on a slide, the reason instead
            parts.append(f"<p class='omitted'>Not drawn: {e(nothing_drawn(fig) or '')}</p>")
            continue
        if images is not None:
            data = base64.b64encode(images[drawn.index(i)]).decode("ascii")
            parts.append(f"<img class='static' alt='{e(title)}' src='data:image/png;base64,{data}'>")
        parts.append("<div class='live'>" + fig.to_html(full_html=False, include_plotlyjs=(i == drawn[0]),
                                                         config={"displaylogo": False}) + "</div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _category_tables(evaluations: list[Evaluation], e: Callable[[str], str], pct: Callable) -> list[str]:
    """Each run's figures per category, a table per run that has a category (its names are
    data: escaped, invisible characters shown)."""
    out = []
    for ev in evaluations:
        groups = ev.by_category or {}
        if not any(c != NO_GROUP for c in groups):
            continue
        out.append(f"<h2>By category: {e(ev.run.header.run_id)}</h2><table><tr><th>category</th>"
                   "<th>trajectories</th><th>lenient (n judged)</th><th>strict (95% CI)</th><th>reviewed</th>"
                   "<th>UNSCORED</th><th>Inconclusive (pending)</th><th>no safety verdict</th>"
                   "<th>phantom safety</th></tr>")
        for category, s in groups.items():
            ci = s.strict.ci95
            out.append(
                f"<tr><td>{'<i>no category</i>' if category == NO_GROUP else e(category)}</td><td>{s.total:,}</td>"
                f"<td>{pct(s.lenient.value)} (n={s.judged:,})</td><td>{pct(s.strict.value)}"
                + (f" ({100 * ci.low:.1f}–{100 * ci.high:.1f})" if ci else "") + "</td>"
                f"<td>{pct(s.reviewed.value)}</td><td>{s.unscored:,}</td>"
                f"<td>{s.inconclusive:,} ({s.inconclusive_pending:,})</td><td>{s.no_verdict:,}</td>"
                f"<td>{html.escape(s.phantom_safety_text)}</td></tr>")
        out.append("</table>")
    return out


STAMP_ROOM = 40
"""Pixels added under a figure for its provenance line: placed in the figure's existing bottom
margin it was clipped at the edge and crossed by rotated category labels."""
STAMP_LINE = 14
"""Pixels each stamp line beyond the two STAMP_ROOM holds (one line per run, then the scorer's) adds."""


def offline_report(evaluations: list[Evaluation], figures: list[tuple[str, go.Figure]], stamp: Stamp,
                   paired: Sequence[PairedComparison] = ()) -> str:
    """The HTML report with a static image of every chart drawn where the renderer (kaleido and
    chromium) is available, and without them, saying so, where it is not."""
    drawn, _omitted = drawn_and_omitted(figures)
    try:
        images = render_images([figures[i][1] for i in drawn], "png", scale=1.5)
    except Exception as exc:
        return html_report(evaluations, figures, stamp, None, f"the renderer failed: {exc}", paired=paired)
    return html_report(evaluations, figures, stamp, images, paired=paired)


def stamp_figure(fig: go.Figure, stamp: Stamp) -> go.Figure:
    """A copy of the figure with its stamp at its very bottom, below everything the figure draws
    there (so an image keeps its provenance, legible): one line per run naming it on its own
    (id, model, short key, file name, status badge), then scorer version and labels."""
    runs = [f"run {line}" for line in stamp.runs] or [f"run {rid} {h[:12]}" for rid, h in stamp.run_hashes.items()]
    lines = [*runs, f"scorer {stamp.scorer_version} · "
             + (f"labels as of {stamp.labels_as_of[:19]}" if stamp.labels_as_of else "no labels yet")
             + (" · blind review: one reviewer's view of the labels" if stamp.labels_view else "")
             + f" · exported {stamp.exported_at}"]
    room = STAMP_ROOM + STAMP_LINE * max(0, len(lines) - 2)
    out = go.Figure(fig)
    margin = out.layout.margin
    bottom = (margin.b if margin.b is not None else 80) + room
    out.update_layout(margin=dict(b=bottom), height=image_height(fig) + room)
    # Each line escaped on its own (plotly reads a subset of HTML), joined by plotly's line break.
    text = "<br>".join(plot(line) for line in lines)
    out.add_annotation(text=text, xref="paper", yref="paper", x=0, y=0, xanchor="left", yanchor="bottom",
                       yshift=-bottom + 4, showarrow=False, font=dict(size=10, color="#8a8a8a"), align="left")
    return out


def png_with_stamp(data: bytes, stamp: Stamp) -> bytes:
    """The PNG with its stamp also as text chunks (``Source``: the runs, one line each;
    ``Comment``: every stamp line), which image viewers and scripts read without OCR."""
    info = PngImagePlugin.PngInfo()
    info.add_itxt("Source", "\n".join(stamp.runs))
    info.add_itxt("Comment", "\n".join(stamp.lines()))
    out = io.BytesIO()
    with Image.open(io.BytesIO(data)) as image:
        image.save(out, format="png", pnginfo=info)
    return out.getvalue()


IMAGE_WIDTH = 1200


def image_height(fig: go.Figure) -> int:
    """The figure's own height where it sets one (a figure that grows with its runs), else 650."""
    return int(fig.layout.height or 650)


_RENDERER_LOCK = threading.Lock()
_CALL_LOCK = threading.Lock()


def _renderer() -> None:
    """Start kaleido's one chromium, reused by every image this process renders (each image
    with its own chromium took seconds; one left running takes a fraction of that)."""
    import kaleido  # optional: kaleido starts its own chromium; imported only where an image is drawn

    with _RENDERER_LOCK:
        if not kaleido._global_server.is_running():
            kaleido.start_sync_server(silence_warnings=True)
            atexit.register(kaleido.stop_sync_server, silence_warnings=True)


_WARMED = threading.Event()


def warm_renderer() -> None:
    """Start the renderer and draw one small figure in the background, once per process: the
    first image otherwise pays chromium's start (seconds) while the user waits."""
    if _WARMED.is_set():
        return
    _WARMED.set()

    def warm() -> None:
        with contextlib.suppress(Exception):
            render_images([go.Figure(go.Bar(x=[1], y=[1]))], "png", scale=1)

    threading.Thread(target=warm, daemon=True, name="kaleido-warm-up").start()


def render_images(figures: list[go.Figure], fmt: str, *, scale: float = 2.0,
                  progress: Callable[[int, int], None] | None = None) -> list[bytes]:
    """Every figure as an image (png, pdf or svg), through one reused renderer; ``progress(done,
    total)`` after each."""
    import plotly.io as pio  # optional: plotly.io imports kaleido's glue; only where an image is drawn

    _renderer()
    out = []
    for i, fig in enumerate(figures):
        # kaleido's server answers one caller at a time (its results come back on one queue in
        # arrival order): sessions rendering at once must take turns, or swap each other's images.
        with _CALL_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "kopts is ignored if using a server": expected
            out.append(pio.to_image(fig, format=fmt, width=IMAGE_WIDTH, height=image_height(fig), scale=scale))
        if progress is not None:
            progress(i + 1, len(figures))
    return out


def figure_images(figures: list[tuple[str, go.Figure]], fmt: str, stamp: Stamp | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  stamps: Sequence[Stamp] | None = None) -> bytes:
    """A zip of every figure that draws something as PNG or PDF (kaleido drives Debian's
    chromium), each stamped, with STAMP.txt (``stamp``: every run's, then each chart left out
    and why) beside them. ``stamps``: each figure's own stamp (a chart of one run names that run
    alone); ``stamp`` for every figure without it."""
    buf = io.BytesIO()
    own = list(stamps) if stamps is not None else [stamp] * len(figures)
    if len(own) != len(figures):
        raise ValueError(f"{len(own)} stamps for {len(figures)} figures")
    drawn, omitted = drawn_and_omitted(figures)
    figures, own = [figures[i] for i in drawn], [own[i] for i in drawn]
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if stamp is not None or omitted:
            zf.writestr("STAMP.txt", "\n".join([*(stamp.lines() if stamp is not None else []),
                                                *(f"not drawn: {title}: {why}" for title, why in omitted)]) + "\n")
        figures = [(t, f if s is None else stamp_figure(f, s)) for (t, f), s in zip(figures, own, strict=True)]
        images = render_images([f for _, f in figures], fmt, progress=progress)
        if fmt == "png":
            images = [data if s is None else png_with_stamp(data, s) for data, s in zip(images, own, strict=True)]
        for i, ((title, _fig), data) in enumerate(zip(figures, images, strict=False)):
            name = "".join(ch if ch.isalnum() else "-" for ch in title.lower()).strip("-")[:60]
            zf.writestr(f"{i + 1:02d}-{name}.{fmt}", data)
    return buf.getvalue()
