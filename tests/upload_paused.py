"""An upload in a process of its own that pauses between its check of what the workspace keeps
and its write: it prints ``checked`` once ``table_zip.kept_in`` has answered, then waits for a
line on its standard input before it goes on, and prints ``kept`` or ``refused: MESSAGE``. A
test holds it there while another upload runs, so the two race at the check every time.

    python -m tests.upload_paused WORKSPACE_FOLDER CAP(files|bytes) AT_MOST
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

from scoring.dask_engine import table_zip
from scoring.errors import InputError

UPLOAD_FILES = 20
"""The files (empty: the files cap) or bytes (in one file: the bytes cap) an upload of the race keeps."""


def upload_of(name: str, cap: str) -> bytes:
    """A zip that keeps UPLOAD_FILES files of nothing (``cap`` "files") or UPLOAD_FILES bytes in one
    file (``cap`` "bytes"), its members under the folder ``name``."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if cap == "files":
            for i in range(UPLOAD_FILES):
                zf.writestr(f"{name}/{i}", b"")
        else:
            zf.writestr(f"{name}/data", b"x" * UPLOAD_FILES)
    return buf.getvalue()


def _paused(original):
    def kept_in(uploads: Path) -> table_zip.Kept:
        got = original(uploads)
        print("checked", flush=True)
        sys.stdin.readline()
        return got

    return kept_in


if __name__ == "__main__":
    folder, cap, at_most = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    setattr(table_zip, "MAX_KEPT_FILES" if cap == "files" else "MAX_KEPT_BYTES", at_most)
    table_zip.kept_in = _paused(table_zip.kept_in)  # type: ignore[assignment]
    try:
        table_zip.unpack(upload_of("first", cap), "first.zip", folder)
    except InputError as exc:
        print(f"refused: {exc}", flush=True)
    else:
        print("kept", flush=True)
