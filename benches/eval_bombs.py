"""Peak RSS of compression bombs and floods against the decoded-bytes budget (issue 24).

Each hostile ``.eval`` is read by ``litmus-review score FILE --json`` in a fresh process (the
CLI door; an upload goes through the same importer), and its peak RSS is compared with the
same command on a tiny valid ``.eval`` in the same run (the baseline: the interpreter and the
project's imports). The figure is (peak - baseline) ÷ the file's budget
(``inspect_log.total_budget``): how much memory a file spent per byte it was allowed to decode.

    python benches/eval_bombs.py [--mib 512] [--write]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import resource
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benches" / "out"
sys.path.insert(0, str(ROOT))

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
    path = OUT / "flood-samples.eval"
    if not path.exists():
        path.write_bytes(_zip([("header.json", HEADER)] + [(f"samples/{i}_epoch_1.json", b"1")
                                                           for i in range(100_000)], zipfile.ZIP_DEFLATED))
    out.append(("flood: 100,000 sample members of `1`", path))
    return out


def measure(path: Path) -> tuple[float, float, int, str]:
    """(peak RSS MiB, seconds, exit status, last stderr line) of ``score FILE --json``."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "scoring", "score", str(path), "--json"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _out, err = proc.communicate()
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far
    lines = [ln for ln in err.splitlines() if ln.strip()]
    last = lines[-1].replace(str(path), path.name)[:140] if lines else ""
    return peak, seconds, proc.returncode, last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=512, help="decoded size of each single-member bomb")
    ap.add_argument("--write", action="store_true", help="write the table into benches/RESULTS.md")
    args = ap.parse_args()
    cases = files(args.mib)
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
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(MARK, text)


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


def _child(path: Path) -> tuple[float, float, int, str]:
    """``measure`` in a fresh interpreter (RUSAGE_CHILDREN is per parent: a new parent per file)."""
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r}); sys.argv = ['x']\n"
            f"from benches.eval_bombs import measure; from pathlib import Path\n"
            f"print(json.dumps(measure(Path({str(path)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    peak, seconds, status, last = json.loads(out.stdout.strip().splitlines()[-1])
    return peak, seconds, status, last


if __name__ == "__main__":
    main()
