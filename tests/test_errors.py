"""One exception tree (scoring/errors.py), mapped by type once at each boundary."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from click.testing import CliRunner

import scoring
from scoring import cli, errors
from scoring.errors import DatabaseUnavailableError, InputError, LitmusReviewError


def _scoring_exceptions() -> set[type[BaseException]]:
    found = set()
    for info in pkgutil.walk_packages(scoring.__path__, "scoring."):
        if info.name == "scoring.__main__":  # runs the CLI when imported
            continue
        module = importlib.import_module(info.name)
        for _name, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("scoring"):
                found.add(obj)
    return found


def test_every_exception_of_scoring_lives_in_the_documented_tree():
    classes = _scoring_exceptions()
    assert errors.RecordError in classes and errors.EngineError in classes
    diagram = errors.__doc__ or ""
    for cls in classes:
        assert cls.__module__ == "scoring.errors", f"{cls.__qualname__} is defined in {cls.__module__}"
        assert issubclass(cls, LitmusReviewError), cls
        assert re.search(rf"[─ ]{cls.__name__}\b", diagram), f"{cls.__name__} is missing from the tree diagram"


def test_each_error_subclasses_the_builtin_the_tree_names():
    for name, builtin in re.findall(r"── (\w+)\((\w+)\)", errors.__doc__ or ""):
        assert issubclass(getattr(errors, name), getattr(builtins, builtin)), name


def test_the_cli_maps_an_error_of_the_tree_to_exit_2_and_one_inert_line(tmp_path, monkeypatch):
    labels = tmp_path / "labels.jsonl"
    labels.write_text("")
    run = tmp_path / "run.jsonl"
    run.write_text("{}\n")

    def refuse(*_a, **_k):
        raise DatabaseUnavailableError("database is locked \x1b[31m", path="w.db")

    monkeypatch.setattr(cli, "_workspace", refuse)
    commands = [["runs"], ["labels", "export", "r"], ["labels", "agreement", "r"], ["labels", "import", str(labels)],
                ["import", str(run)]]
    for args in commands:
        res = CliRunner().invoke(cli.main, args)
        assert res.exit_code == 2, (args, res.output, res.exception)
        assert res.stderr == "error: database is locked ⟨U+001B⟩[31m\n", args


def test_report_error_names_the_file_of_a_file_system_error(capsys):
    assert cli.report_error(PermissionError(13, "Permission denied"), Path("runs/a.jsonl")) == 2
    assert capsys.readouterr().err == "error: runs/a.jsonl: cannot read: Permission denied\n"
    assert cli.report_error(InputError("bad", source="a.jsonl", line=3)) == 2
    assert capsys.readouterr().err == "error: a.jsonl:3: bad\n"


def test_a_bad_verdict_map_is_a_usage_error_naming_the_spec():
    res = CliRunner().invoke(cli.main, ["score", "x.json", "--inspect-verdict", "judge:maybe=1"])
    assert res.exit_code == 2 and "Invalid value for '--inspect-verdict'" in res.stderr
    assert "got 'maybe=1'" in res.stderr


def test_the_pages_show_the_tree_and_file_system_errors_by_type():
    from pages._shared.errors import SHOWN, error_text

    assert error_text(InputError("bad", source="a.jsonl", line=3)) == "a.jsonl:3: bad"
    assert error_text(FileNotFoundError(2, "No such file or directory", "x.jsonl")) == \
        "No such file or directory (x.jsonl)"
    assert error_text(PermissionError(13, "Permission denied"), Path("up.jsonl")) == "Permission denied (up.jsonl)"
    assert issubclass(DatabaseUnavailableError, SHOWN) and OSError in SHOWN
    assert not issubclass(TypeError, SHOWN)  # a bug keeps its traceback
