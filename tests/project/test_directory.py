"""The project directory: ``--environment`` items, the project entered (cwd, sys.path, .env under the flags),
which requirements file counts, the cache folder keyed by its content, and pip's failures in one line.

The .env syntax and Pipfile's forms are compared with the platforms' in tests/test_fidelity.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localserve.errors import ConfigError
from localserve.project.directory import (
    _pip_failure,
    _requirements_target,
    cached_requirements,
    enter_project,
    parse_environment,
    read_dotenv,
    requirements_spec,
    stderr_for_children,
)


def test_environment_items_split_at_the_first_colon() -> None:
    assert parse_environment(["A:1", "URL:http://h:8/x", "EMPTY:"]) == {"A": "1", "URL": "http://h:8/x", "EMPTY": ""}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("A=1", "Invalid --environment 'A=1': expected KEY:VALUE, e.g. ABEJA_TRAINING_RESULT_DIR:."),
        (
            "1A:x",
            "Invalid --environment '1A:x': the key '1A' must match [A-Za-z_][A-Za-z0-9_]* (letters, digits and "
            "underscores, not starting with a digit).",
        ),
    ],
)
def test_a_bad_environment_item_says_what_was_expected(item: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_environment([item])
    assert str(caught.value) == message


def test_entering_a_project_sets_cwd_sys_path_and_the_environment_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(os.getcwd())  # restored after the test
    monkeypatch.setattr(sys, "path", list(sys.path))
    for key in ("LS_T_DOTENV", "LS_T_FLAG", "LS_T_DEFAULT", "LS_T_SET", "LS_T_NEW_DEFAULT"):
        monkeypatch.setenv(key, "")  # recorded, so that the undo removes what the call sets
        monkeypatch.delenv(key)
    monkeypatch.setenv("LS_T_SET", "from the shell")
    (tmp_path / ".env").write_text("LS_T_DOTENV=dotenv\nLS_T_FLAG=dotenv\nLS_T_DEFAULT=dotenv\n")
    enter_project(
        tmp_path,
        {"LS_T_FLAG": "flag"},
        {"LS_T_DEFAULT": "default", "LS_T_SET": "default", "LS_T_NEW_DEFAULT": "default"},
    )
    assert Path.cwd() == tmp_path.resolve()
    assert sys.path[0] == str(tmp_path.resolve())
    assert os.environ["LS_T_DOTENV"] == "dotenv"
    assert os.environ["LS_T_FLAG"] == "flag"  # --environment over .env
    assert os.environ["LS_T_DEFAULT"] == "dotenv"  # a default only where nothing set it
    assert os.environ["LS_T_SET"] == "from the shell"
    assert os.environ["LS_T_NEW_DEFAULT"] == "default"
    enter_project(tmp_path, {})
    assert sys.path.count(str(tmp_path.resolve())) == 1  # entered twice: on sys.path once


def test_a_dotenv_line_that_is_no_assignment_names_its_line(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("A=1\nnot an assignment\n")
    with pytest.raises(ConfigError) as caught:
        read_dotenv(env)
    assert str(caught.value) == ".env, line 2: expected VARIABLE=value, got 'not an assignment'."


def test_requirements_txt_comes_before_a_pipfile(tmp_path: Path) -> None:
    assert requirements_spec(tmp_path) is None
    (tmp_path / "Pipfile").write_text('[packages]\nrequests = "==2.31.0"\n')
    assert requirements_spec(tmp_path) == ("Pipfile", ["requests==2.31.0"])
    (tmp_path / "requirements.txt").write_text("numpy\n")
    assert requirements_spec(tmp_path) == ("requirements.txt", ["-r", str(tmp_path / "requirements.txt")])


def test_the_cache_folder_is_found_only_when_complete_and_follows_the_files_content(tmp_path: Path) -> None:
    project, cache = tmp_path / "p", tmp_path / "cache"
    project.mkdir()
    assert cached_requirements(project, cache) is None  # no requirements at all
    (project / "requirements.txt").write_text("numpy\n")
    assert cached_requirements(project, cache) is None  # not installed
    target = _requirements_target(project, cache)
    assert target is not None
    target[2].mkdir(parents=True)  # what install_requirements makes, marked complete at its end
    assert cached_requirements(project, cache) is None  # begun, never completed
    (target[2] / ".complete").touch()
    assert cached_requirements(project, cache) == target[2]
    (project / "requirements.txt").write_text("numpy\npandas\n")
    assert cached_requirements(project, cache) is None  # another content: another folder


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            "ERROR: No matching distribution found for nosuchpkg==9\n",
            "pip could not install the package 'nosuchpkg==9'.",
        ),
        ("ERROR: Invalid requirement: 'a b'\n", "pip could not install the package 'a b'."),
        ("Failed to build lxml\n", "pip could not install the package 'lxml'."),
        ("something else\n", "pip exited with an error (see its output below)."),
    ],
)
def test_pips_failure_in_one_line(stderr: str, line: str) -> None:
    assert _pip_failure(stderr) == line


def test_children_write_to_stderr_or_to_a_pipe_when_it_is_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # as under click's CliRunner
    assert stderr_for_children() is subprocess.PIPE
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)
    assert stderr_for_children() is sys.__stderr__
