"""The layers hold: pages reach scoring only through the views API (plus the model, the errors
and the text helpers), and SQL lives only in the workspace package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .conftest import ROOT

PAGE_FILES = sorted([ROOT / "app.py", *(ROOT / "pages").rglob("*.py")])
ALLOWED_FOR_PAGES = {"scoring.workspace.views", "scoring.model", "scoring.errors", "scoring.text"}
"""What a page (or its presentation helpers in pages/_shared) may import of scoring: the views
API (typed read models and the reviewer's acts), the record types, the error tree, and the
pure text helpers (revealing hostile characters, CSV-safe cells)."""
ALLOWED_EXTRA = {"pages/score_tables.py": {"scoring.engine", "scoring.scoretable"}}
"""The Score tables page reads the Dask engine's Parquet tables, which are not a workspace."""


def _scoring_imports(path: Path) -> set[str]:
    """Every scoring module a file imports (at any depth: a function-level import counts)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "scoring"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "scoring":
            for a in node.names:
                # ``from scoring.workspace import views`` imports the module scoring.workspace.views
                sub = f"{node.module}.{a.name}"
                found.add(sub if _is_module(sub) else node.module)
    return found


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def test_pages_import_only_the_views_api_the_model_the_errors_and_text():
    assert PAGE_FILES and (ROOT / "pages" / "_shared" / "loaders.py") in PAGE_FILES
    wrong = {}
    for path in PAGE_FILES:
        rel = path.relative_to(ROOT).as_posix()
        extra = _scoring_imports(path) - ALLOWED_FOR_PAGES - ALLOWED_EXTRA.get(rel, set())
        if extra:
            wrong[rel] = sorted(extra)
    assert wrong == {}


def test_the_import_check_sees_what_a_page_imports(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("from scoring.workspace import Workspace\nimport scoring.store\n"
                    "def f():\n    from scoring.score import assess_calls\n    from scoring.workspace import views\n")
    assert _scoring_imports(page) == {"scoring.workspace", "scoring.store", "scoring.score", "scoring.workspace.views"}


SQL = re.compile(
    r"\bselect\s+(?:\*|count\s*\(|distinct\b|group_concat\s*\(|[\w\[\]\"]+\s*,|[\w\[\]\"]+\s+from\s+[\w\[\]\"]+)"
    r"|\binsert\s+(?:or\s+\w+\s+)?into\b|\bupdate\s+[\w\[\]\"]+\s+set\b|\bdelete\s+from\b|\breplace\s+into\b"
    r"|\b(?:create|alter|drop)\s+(?:table|index|view|trigger)\b|\bpragma\s+\w+|\bbegin\s+(?:immediate|exclusive)\b"
    r"|\bwhere\s+[\w\[\]\"]+\s*(?:=|<|>|is\b|in\s*\(|like\b)\s*(?:\?|:\w)",
    re.IGNORECASE)
"""SQL in a string: a statement's opening words, or a parameterised WHERE clause."""
PRODUCT_FILES = sorted([ROOT / "app.py", *(ROOT / "pages").rglob("*.py"), *(ROOT / "scoring").rglob("*.py")])


def _sql_strings(path: Path) -> list[str]:
    """The string literals (f-string parts included, docstrings not) of a file that hold SQL."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    texts = []
    for node in ast.walk(tree):
        if id(node) in parts:
            continue
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            texts.append(node.value)
    return [t for t in texts if SQL.search(" ".join(t.split()))]


def test_no_sql_outside_the_workspace_package():
    workspace = ROOT / "scoring" / "workspace"
    found = {p.relative_to(ROOT).as_posix(): _sql_strings(p) for p in PRODUCT_FILES if workspace not in p.parents}
    assert {k: v for k, v in found.items() if v} == {}
    assert all(_sql_strings(p) for p in (workspace / "schema.py", workspace / "labels.py", workspace / "reads.py"))


def test_the_sql_check_finds_what_the_pages_loaders_once_held(tmp_path):
    old = tmp_path / "loaders.py"
    old.write_text('def label_version(ws, run_key):\n    with ws.connect() as db:\n'
                   '        return db.execute("select count(*) from label_events where run_key = ?", [run_key])\n'
                   'Q = f"SELECT {cols} FROM trajectories WHERE run_key = ?"\n'
                   'R = ("INSERT OR IGNORE INTO trajectories "\n     "VALUES (?)")\n')
    assert len(_sql_strings(old)) == 3
    prose = tmp_path / "prose.py"
    prose.write_text('A = "Select a row to replay the trajectory."\nB = "Pick runs from the sidebar"\n'
                     'C = "Delete the file and update the run"\n')
    assert _sql_strings(prose) == []
