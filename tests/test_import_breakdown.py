"""benches/import_breakdown.py's quick mode runs and prints every stage of the import beside its
floor, and the whole import's ratios to pyarrow: the bench ``make bench`` runs at full size
cannot rot unseen."""

from __future__ import annotations

import re
import subprocess
import sys

from .conftest import ROOT

STAGES = ("read", "split", "decode", "hash", "capture rules", "taxonomy rules", "row building", "SQLite writes",
          "evidence copy")
"""Issue 37's stages, each of which the breakdown must time beside its floor."""

NUMBER = r"-?\d+\.\d+"


def test_the_breakdown_prints_every_stage_beside_its_floor_and_the_whole_import():
    out = subprocess.run([sys.executable, str(ROOT / "benches" / "import_breakdown.py"), "--small"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for stage in STAGES:
        # | stage | seconds | floor | floor seconds | ratio | excess | wall, stage / floor |
        cells = rf"\| ({NUMBER}) \| [^|]+ \| ({NUMBER}) \| ({NUMBER})× \| ({NUMBER}) \| {NUMBER} / {NUMBER} \|$"
        row = re.search(rf"^\| {re.escape(stage)} " + cells, text, re.MULTILINE)
        assert row is not None, f"no row for the stage {stage!r}:\n{text}"
        assert float(row[1]) >= 0 and float(row[2]) >= 0, (stage, row[0])
    total = re.search(rf"^\| \*\*all stages\*\* \| \*\*({NUMBER})\*\* \|", text, re.MULTILINE)
    assert total is not None and float(total[1]) > 0, text
    assert "built the same rows as the stages" in text
    for whole in (*(rf"\| {state}: wall \(import/pyarrow s: [^|]+\) \| \*\*" + NUMBER + r"×\*\*"
                    for state in ("idle", "warm")),  # each memory state pairs its own processes
                  *(rf"\| {state}: CPU, all processes \(import/pyarrow s: [^|]+\) \| \*\*" + NUMBER + r"×\*\*"
                    for state in ("idle", "warm")),
                  r"peak RSS, main \+ workers \([\d,]+ MiB[^)]*\) ÷ the file \([\d,]+ MiB\) \| \*\*"
                  + NUMBER + r"×\*\*"):
        assert re.search(whole, text), f"no {whole!r}:\n{text}"
