"""Importing user code with precise errors: ``module:function`` and project files, the user's own exception shown
as theirs (its file and line, the package a missing import comes from), ``sys.exit`` at import caught.

Real modules are written into ``tmp_path`` and imported; sys.path and sys.modules are restored after each test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.errors import HandlerLoadError
from localserve.handlers.loader import load_attr, load_file, parameter_names, positional_count


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def error_of(call: object) -> str:
    with pytest.raises(HandlerLoadError) as caught:
        call()  # type: ignore[operator]
    return str(caught.value)


def test_a_function_of_a_module_is_loaded(project: Path) -> None:
    (project / "lsmain_a.py").write_text(
        "class Box:\n    def handler(self): return 1\n\ndef handler(r, c):\n    return 2\n"
    )
    assert load_attr("lsmain_a:handler", project)(None, None) == 2
    assert load_attr("lsmain_a:Box.handler", project)(None) == 1


@pytest.mark.parametrize("spec", ["main", ":handler", "main:"])
def test_a_spec_that_is_no_module_and_function_says_what_it_must_look_like(project: Path, spec: str) -> None:
    assert (
        error_of(lambda: load_attr(spec, project))
        == f'Handler "{spec}" must look like "<module>:<function>", e.g. "main:handler".'
    )


def test_a_missing_module_or_attribute_is_named(project: Path) -> None:
    (project / "lsmain_b.py").write_text("def handler(r, c):\n    return 1\n")
    assert error_of(lambda: load_attr("lsmain_none:handler", project)) == (
        f'Could not import module "lsmain_none" for handler "lsmain_none:handler": no lsmain_none.py (or package) in '
        f"the project directory {project}."
    )
    assert error_of(lambda: load_attr("lsmain_b:handlr", project)) == (
        'Handler "lsmain_b:handlr": module "lsmain_b" has no attribute "handlr". Did you mean "handler"?'
    )


def test_the_users_own_errors_are_shown_as_theirs(project: Path) -> None:
    (project / "lsmain_c.py").write_text("x = 1\nraise ValueError('bad setting')\n")
    (project / "lsmain_d.py").write_text("import sys\nsys.exit(2)\n")
    (project / "lsmain_e.py").write_text("import yaml_not_installed_x\n")
    (project / "lsmain_f.py").write_text("def broken(:\n")
    assert error_of(lambda: load_attr("lsmain_c:h", project)) == (
        "Importing 'lsmain_c' failed (lsmain_c.py, line 2): ValueError: bad setting"
    )
    assert (
        error_of(lambda: load_attr("lsmain_d:h", project))
        == "Importing 'lsmain_d' failed (lsmain_d.py, line 2): SystemExit: 2"
    )
    assert error_of(lambda: load_attr("lsmain_e:h", project)).startswith(
        "Importing 'lsmain_e' failed (lsmain_e.py, line 1): ModuleNotFoundError: No module named "
        "'yaml_not_installed_x'; "
    )
    assert error_of(lambda: load_attr("lsmain_f:h", project)).startswith(
        "Importing 'lsmain_f' failed (lsmain_f.py, line 1): SyntaxError: "
    )
    with pytest.raises(HandlerLoadError) as caught:
        load_attr("lsmain_c:h", project)
    assert 'lsmain_c.py", line 2' in caught.value.details and "<frozen importlib" not in caught.value.details


def test_a_project_file_is_imported_and_one_that_is_not_there_or_not_python_named(project: Path) -> None:
    (project / "handler.py").write_text("def pre_inference(sample, metadata):\n    return sample\n")
    (project / "notes.txt").write_text("")
    module = load_file("handler.py", project, api="iris", what="Request handler")
    assert module.pre_inference(3, None) == 3
    assert error_of(lambda: load_file("gone.py", project, api="iris", what="Predictor")) == (
        f"Predictor file 'gone.py' of api 'iris' does not exist in the project directory {project}."
    )
    assert error_of(lambda: load_file("notes.txt", project, api="iris", what="Predictor")) == (
        "Predictor file 'notes.txt' of api 'iris' must be a Python file (.py)."
    )


def test_two_apis_files_of_one_name_are_two_modules(project: Path) -> None:
    for folder in ("a", "b"):
        (project / folder).mkdir()
        (project / folder / "predictor.py").write_text(f"WHO = {folder!r}\n")
    first = load_file("a/predictor.py", project, api="api-a", what="Predictor")
    second = load_file("b/predictor.py", project, api="api-b", what="Predictor")
    assert (first.WHO, second.WHO) == ("a", "b")
    assert second.__name__ == "_localserve_api_b_predictor"


def test_parameters_of_user_functions() -> None:
    class Predictor:
        def predict(self, payload, query_params=None, *rest, **extra):  # type: ignore[no-untyped-def]
            return payload

    assert positional_count(Predictor().predict) == (2, True)
    assert positional_count(lambda sample, metadata: sample) == (2, False)
    assert parameter_names(Predictor().predict) == ["payload", "query_params"]
