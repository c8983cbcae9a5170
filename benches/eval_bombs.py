"""Peak RSS of compression bombs, floods and files padded to their budget against the budget
(issues 24 and 34; ``make bench`` runs it through run_all.py).

Each hostile ``.eval`` is read by ``litmus-review score FILE --json`` in a fresh process (the
CLI door; an upload goes through the same importer), and its peak RSS is compared with the
same command on a tiny valid ``.eval`` in the same run (the baseline: the interpreter and the
project's imports). The figure is (peak - baseline) ÷ the file's budget
(``inspect_log.total_budget``): how much memory a file spent per byte it was allowed to decode.

    python benches/eval_bombs.py [--mib 512] [--write]
    python benches/eval_bombs.py --documents [--before MAIN_CHECKOUT] [--write]

``--documents`` measures instead the floods of a whole JSON document and of JSON lines (issue 34
F2: a legacy Inspect ``.json`` of ten million ``{}`` samples), now and, with ``--before``, as the
checkout given (main before the change) scores them, in its own section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import bz2
import io
import json
import lzma
import os
import platform
import resource
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
sys.path.insert(0, str(ROOT))

from scoring.importers import _zip as budgets  # noqa: E402
from scoring.importers import inspect_log  # noqa: E402

HEADER = json.dumps({"status": "success", "eval": {"run_id": "bomb", "model": "m", "task": "t"}}).encode()
MARK = "<!-- eval-bombs -->"


def _zip(members: list[tuple[str, bytes]], method: int) -> bytes:
    if method == inspect_log.ZIP_ZSTANDARD:
        sys.path.insert(0, str(ROOT / "tests"))
        from tests.test_inspect_zstd import _zip as zstd_zip  # the hand-written zip of method 93

        return zstd_zip(members, 93)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method, compresslevel=9 if method != zipfile.ZIP_LZMA else None) as zf:
        for name, payload in members:
            zf.writestr(name, payload)
    return buf.getvalue()


def files(mib: int) -> list[tuple[str, Path]]:
    OUT.mkdir(parents=True, exist_ok=True)
    blank = b" " * (mib << 20)
    out = []
    for name, method in (("deflate", zipfile.ZIP_DEFLATED), ("bzip2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA),
                         ("zstd", inspect_log.ZIP_ZSTANDARD)):
        path = OUT / f"bomb-{name}.eval"
        if not path.exists():
            path.write_bytes(_zip([("header.json", HEADER), ("samples/1_epoch_1.json", blank)], method))
        out.append((f"bomb: one {name} member of {mib:,} MiB of blanks", path))
    # Many small bombs, each under the per-member cap: the total budget stops them.
    path = OUT / "bomb-many-bzip2.eval"
    if not path.exists():
        path.write_bytes(_zip([("header.json", HEADER)] + [(f"samples/{i}_epoch_1.json", b" " * (32 << 20))
                                                           for i in range(64)], zipfile.ZIP_BZIP2))
    out.append(("bomb: 64 bzip2 members of 32 MiB each", path))
    # A flood: valid JSON inside the budget, one tiny value per element.
    path = OUT / "flood-array.eval"
    if not path.exists():
        n = 20_000_000
        path.write_bytes(_zip([("header.json", HEADER), ("samples/1_epoch_1.json",
                                                         b"[" + b"1," * (n - 1) + b"1]")], zipfile.ZIP_BZIP2))
    out.append(("flood: one member holding a JSON array of 20 M ones (40 MB)", path))
    # Padded to the largest budget: four sample members of 500 MiB each (a message the run
    # keeps), each under the per-member cap, all of them under the decoded budget, and a stored
    # member of random bytes making the file large enough for that budget (200x its size).
    for name, method in (("bzip2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA)):
        path = OUT / f"padded-{name}.eval"
        if not path.exists():
            padded_eval(path, method, members=4, member_mib=500)
        out.append((f"padded: 4 {name} members of 500 MiB (a sample each), the file padded to the 2 GiB budget"
                    + (" (lzma properties declaring a 3.5 GiB dictionary)" if name == "lzma" else ""), path))
    path = OUT / "flood-samples.eval"
    if not path.exists():
        path.write_bytes(_zip([("header.json", HEADER)] + [(f"samples/{i}_epoch_1.json", b"1")
                                                           for i in range(100_000)], zipfile.ZIP_DEFLATED))
    out.append(("flood: 100,000 sample members of `1`", path))
    return out


def padded_eval(path: Path, method: int, *, members: int, member_mib: int) -> None:
    """A ``.eval`` of ``members`` samples of ``member_mib`` MiB each, compressed with ``method``
    as a stream (never held whole), with a stored member of random bytes that makes the file's
    budget ``budgets.MAX_TOTAL_BYTES``."""
    block = b" " * (8 << 20)
    with open(path, "wb") as fh:
        central: list[bytes] = []

        def member(name: str, comp: bytes, crc: int, size: int, how: int) -> None:
            off, nm = fh.tell(), name.encode()
            fh.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, how, 0, 0, crc, len(comp), size, len(nm), 0))
            fh.write(nm + comp)
            central.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, how, 0, 0, crc, len(comp), size,
                                       len(nm), 0, 0, 0, 0, 0, off) + nm)

        member("header.json", HEADER, zlib.crc32(HEADER), len(HEADER), zipfile.ZIP_STORED)
        padding = os.urandom(budgets.MAX_TOTAL_BYTES // budgets.TOTAL_RATIO + 65536)
        member("padding.bin", padding, zlib.crc32(padding), len(padding), zipfile.ZIP_STORED)
        for i in range(members):
            head = json.dumps({"id": i, "epoch": 1, "messages": [{"role": "user", "content": ""}]}).encode()
            pre, post = head[:-4], head[-4:]  # the content's opening quote, then its closing and the brackets
            if method == zipfile.ZIP_BZIP2:
                enc: bz2.BZ2Compressor | lzma.LZMACompressor = bz2.BZ2Compressor(9)
                lead = b""
            else:
                filters = [{"id": lzma.FILTER_LZMA1, "dict_size": 8 << 20}]
                enc = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=filters)
                props = bytearray(lzma._encode_filter_properties(filters[0]))
                props[1:5] = (0xE0000000).to_bytes(4, "little")  # declared 3.5 GiB: a stream needs only 8 MiB
                lead = struct.pack("<BBH", 9, 4, len(props)) + bytes(props)
            parts, crc = [lead, enc.compress(pre)], zlib.crc32(pre)
            for _ in range(member_mib // 8):
                parts.append(enc.compress(block))
                crc = zlib.crc32(block, crc)
            parts += [enc.compress(post), enc.flush()]
            member(f"samples/{i}_epoch_1.json", b"".join(parts), zlib.crc32(post, crc),
                   len(pre) + member_mib // 8 * len(block) + len(post), method)
        start = fh.tell()
        for c in central:
            fh.write(c)
        fh.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(central), len(central), fh.tell() - start, start, 0))


def measure(path: Path, code: Path = ROOT) -> tuple[float, float, int, str]:
    """(peak RSS MiB, seconds, exit status, last stderr line) of ``score FILE --json`` run by the
    project checked out at ``code`` (this one; another, to measure it before a change)."""
    t = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.Popen([sys.executable, "-m", "scoring", "score", str(path), "--json"], cwd=code, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _out, err = proc.communicate()
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
    lines = [ln for ln in err.splitlines() if ln.strip()]
    last = lines[-1].replace(str(path), path.name)[:140] if lines else ""
    return peak, seconds, proc.returncode, last


def run(mib: int = 512) -> list[str]:
    """The section's lines (``MARK`` first): every case measured now, against the baseline."""
    cases = files(mib)
    tiny = OUT / "tiny.eval"
    tiny.write_bytes(_zip([("header.json", HEADER), ("samples/1_epoch_1.json",
                                                     json.dumps({"id": 1, "epoch": 1, "messages": []}).encode())],
                          zipfile.ZIP_DEFLATED))
    # RUSAGE_CHILDREN keeps the largest child's peak: measure in ascending order of what we
    # expect, each in a fresh interpreter of this script, so each figure is its own.
    rows = []
    base = _child(tiny)
    for label, path in cases:
        peak, seconds, status, last = _child(path)
        budget = inspect_log.total_budget(path.stat().st_size)
        rows.append((label, path.stat().st_size, budget, peak, seconds, status, last))
    lines = [MARK, "## Compression bombs and floods against the decoded-bytes budget",
             "", f"Generated by `benches/eval_bombs.py` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
             f"{platform.machine()}, Python {platform.python_version()}: `litmus-review score FILE --json`, one fresh "
             f"process per file; baseline (a valid 1-sample `.eval`) {base[0]:.0f} MiB peak RSS.", "",
             "| file | size | budget | peak RSS | peak − baseline ÷ budget | seconds | exit | what it said |",
             "|---|---|---|---|---|---|---|---|"]
    for label, size, budget, peak, seconds, status, last in rows:
        lines.append(f"| {label} | {size:,} B | {budget / 2**20:,.0f} MiB | {peak:,.0f} MiB | "
                     f"**{(peak - base[0]) * 2**20 / budget:.2f}×** | {seconds:.1f} | {status} | {last} |")
    lines += ["", "The budget bounds memory as well as decoded bytes: before a member is parsed, what the samples "
              "read so far keep (measured) plus an upper bound of its parse must fit in it, and an lzma or zstd "
              "decoder's window is counted beside its output (scoring/importers/_zip.py). A ratio near 1 is a "
              "file refused as it reached its budget."]
    return lines


DOCUMENTS_MARK = "<!-- document-bombs -->"
EVAL = {"run_id": "flood", "model": "m", "task": "t"}


def legacy_log(path: Path, samples: int) -> None:
    """A legacy Inspect ``.json`` of ``samples`` empty samples (``{}``), written as a stream."""
    with open(path, "wb") as fh:
        fh.write(json.dumps({"version": 2, "eval": EVAL})[:-1].encode() + b', "samples": [')
        block = b"{}," * 1_000_000
        left = samples - 1
        while left > 0:
            n = min(left, 1_000_000)
            fh.write(block[:3 * n])
            left -= n
        fh.write(b"{}]}")


def document_files() -> list[tuple[str, Path]]:
    """The whole-document and JSON-lines floods (issue 34 F2), each made once."""
    OUT.mkdir(parents=True, exist_ok=True)
    out = []
    for millions in (10, 7):
        path = OUT / f"legacy-{millions}M.json"
        if not path.exists():
            legacy_log(path, millions * 1_000_000)
        out.append((f"legacy Inspect `.json` of {millions} M `{{}}` samples", path))
    path = OUT / "chat-lines-10M.jsonl"
    if not path.exists():
        with open(path, "wb") as fh:
            fh.write(b'[{"role": "user", "content": "hi"}]\n')
            for _ in range(10):
                fh.write(b"[]\n" * 1_000_000)
    out.append(("OpenAI chat JSON lines: a conversation, then 10 M `[]` lines", path))
    return out


def documents(before: Path | None) -> list[str]:
    """The section's lines (``DOCUMENTS_MARK`` first): each flood scored now (and by the
    checkout ``before``, when given), against a valid one-sample legacy log in the same run."""
    tiny = OUT / "tiny.json"
    OUT.mkdir(parents=True, exist_ok=True)
    tiny.write_text(json.dumps({"version": 2, "eval": EVAL, "samples": [
        {"id": 1, "epoch": 1, "messages": [{"role": "user", "content": "hi"}]}]}))
    cases = document_files()
    base = _child(tiny)[0]
    rows = []
    for label, path in cases:
        now = _child(path)
        then = _child(path, before) if before is not None else None
        rows.append((label, path.stat().st_size, budgets.total_budget(path.stat().st_size), now, then))
        print(label, now, then, file=sys.stderr)

    def cell(got: tuple[float, float, int, str] | None, budget: int, size: int) -> str:
        if got is None:
            return "— | — | — | — | —"
        peak, seconds, status, _last = got
        return (f"{peak:,.0f} MiB | **{(peak - base) * 2**20 / budget:.2f}×** | {peak * 2**20 / size:.0f}× | "
                f"{seconds:.1f} | {status}")

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = "" if before is None else (f" *Before* is the same command run by the checkout at `{_commit(before)}` "
                                      "(main before the change), in the same run.")
    lines = [DOCUMENTS_MARK, "## Whole JSON documents and JSON lines against the file's budget (issue 34 F2)", "",
             f"Generated by `benches/eval_bombs.py --documents` at {stamp} on {platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}: `litmus-review score FILE --json`, one "
             f"fresh process per file; baseline (a valid one-sample legacy `.json`) {base:.0f} MiB peak RSS. The "
             "figures are (peak − baseline) ÷ the file's budget (`_zip.total_budget`: 200× its size, 128 MiB–2 GiB) "
             "and peak ÷ the file's size." + head,
             "Load average when it ended: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + ".", "",
             "| file | size | budget | before: peak RSS | − baseline ÷ budget | ÷ size | seconds | exit "
             "| now: peak RSS | − baseline ÷ budget | ÷ size | seconds | exit | now said |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, size, budget, now, then in rows:
        said = now[3].replace("|", "\\|")[:150]
        lines.append(f"| {label} | {size / 2**20:,.1f} MiB | {budget / 2**20:,.0f} MiB | {cell(then, budget, size)} | "
                     f"{cell(now, budget, size)} | {said} |")
    lines += ["", "A document is parsed only when an upper bound of its parse fits the budget (the ten million "
              "samples are refused before any is parsed); one that fits is held at that bound, measured when the "
              "bound alone would refuse what comes next; each sample is let go once its trajectory or rejection is "
              "made, and every trajectory and rejection kept is counted (scoring/importers/_common.py `build_run`, "
              "`released`; `_zip.Budget`). JSON lines are admitted line by line on the same terms."]
    return lines


def _commit(checkout: Path) -> str:
    got = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True)
    return got.stdout.strip() or str(checkout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="decoded size of each single-member bomb")
    ap.add_argument("--write", action="store_true", help="write the table into benches/RESULTS.md")
    ap.add_argument("--documents", action="store_true",
                    help="measure the whole-document and JSON-lines floods instead (their own section)")
    ap.add_argument("--before", type=Path,
                    help="with --documents or --together: a checkout to measure too (main before a change)")
    ap.add_argument("--together", action="store_true",
                    help="measure two padded files read at once by one process instead (their own section)")
    args = ap.parse_args()
    if args.together:
        mark, lines = TOGETHER_MARK, run_together(args.before)
    elif args.documents:
        mark, lines = DOCUMENTS_MARK, documents(args.before)
    else:
        mark, lines = MARK, run(args.mib)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(mark, text)


def write_section(mark: str, text: str) -> None:
    """Put ``text`` (which starts with ``mark``) into benches/RESULTS.md in place of the section
    that starts with ``mark`` (up to the next marker), or at its end."""
    results = ROOT / "benches" / "RESULTS.md"
    old = results.read_text()
    head = old.split(mark)[0].rstrip("\n")
    tail = ""
    if mark in old:
        rest = old.split(mark, 1)[1]
        nxt = rest.find("\n<!-- ")
        tail = rest[nxt:] if nxt >= 0 else ""
    results.write_text(head + "\n\n" + text + tail)


TOGETHER_MARK = "<!-- eval-bombs-together -->"
_TOGETHER = """
import json, sys, threading, time
sys.path.insert(0, {code!r})
from scoring.importers import parse_run
data = open({path!r}, "rb").read()
said = []
def read():
    try:
        parse_run(data, "upload.eval")
        said.append("read")
    except Exception as exc:  # what the importer said, reported
        said.append(type(exc).__name__)
t = time.perf_counter()
threads = [threading.Thread(target=read) for _ in range({readers})]
[th.start() for th in threads]
[th.join() for th in threads]
hwm = next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
print(json.dumps({{"peak_mib": hwm / 1024, "seconds": time.perf_counter() - t, "said": said}}))
"""


def together(path: Path, readers: int, code: Path = ROOT) -> dict:
    """Peak RSS (``VmHWM``), seconds and outcomes of ``readers`` threads of one fresh process
    parsing the same file at once (an app's sessions importing their uploads), by the project
    checked out at ``code``."""
    out = subprocess.run([sys.executable, "-c", _TOGETHER.format(code=str(code), path=str(path), readers=readers)],
                         cwd=code, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_together(before: Path | None) -> list[str]:
    """The section's lines: two padded ``.eval`` files read at once in one process, against one
    alone and the tiny log, now and (``--before``) as another checkout reads them."""
    tiny = OUT / "tiny.eval"
    tiny.write_bytes(_zip([("header.json", HEADER), ("samples/1_epoch_1.json",
                                                     json.dumps({"id": 1, "epoch": 1, "messages": []}).encode())],
                          zipfile.ZIP_DEFLATED))
    rows = []
    for name, method in (("bzip2", zipfile.ZIP_BZIP2), ("lzma", zipfile.ZIP_LZMA)):
        path = OUT / f"padded-{name}.eval"
        if not path.exists():
            padded_eval(path, method, members=4, member_mib=500)
        budget = inspect_log.total_budget(path.stat().st_size)
        for code in ([before] if before else []) + [ROOT]:
            base = together(tiny, 1, code)["peak_mib"]
            for readers in (1, 2):
                got = together(path, readers, code)
                label = _commit(code) if code == ROOT else f"before ({code})"
                rows.append((name, label, readers, got, base, budget))
    lines = [TOGETHER_MARK, "## Padded `.eval` files read at once by one server (issue 34 item 6)", "",
             f"Generated by `benches/eval_bombs.py --together` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             ": "
             "one fresh process, N threads each parsing the same file padded to its budget (4 members of 500 MiB; "
             "`parse_run`, what an upload's import runs), as N sessions of one server would; its peak RSS (`VmHWM`) "
             "less a tiny log's, against the file's budget. Load average at the end: "
             f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}.", "",
             "| codec | checkout | at once | peak RSS | peak − tiny ÷ one budget | seconds | what each read said |",
             "|---|---|---|---|---|---|---|"]
    for name, commit, readers, got, base, budget in rows:
        lines.append(f"| {name} | {commit} | {readers} | {got['peak_mib']:,.0f} MiB | "
                     f"**{(got['peak_mib'] - base) * 2**20 / budget:.2f}×** | {got['seconds']:.1f} | "
                     f"{', '.join(got['said'])} |")
    return lines


def _child(path: Path, code_root: Path = ROOT) -> tuple[float, float, int, str]:
    """``measure`` in a fresh interpreter (RUSAGE_CHILDREN is per parent: a new parent per file)."""
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.argv = ['x']\n"
            f"from benches.eval_bombs import measure; from pathlib import Path\n"
            f"print(json.dumps(measure(Path({str(path)!r}), Path({str(code_root)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    peak, seconds, status, last = json.loads(out.stdout.strip().splitlines()[-1])
    return peak, seconds, status, last


if __name__ == "__main__":
    main()
