"""Settings travel in one frozen tree built by the CLI: nothing below it reads the environment for them,
and importing localserve changes no environment variable.

Importing localserve is checked in a fresh Python: this session's environment is changed by pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.config.options import ApiOptions, ProjectSettings
from localserve.errors import ModelLoadError
from localserve.project.compat.context import Project
from localserve.runtimes import load_model
from tests.conftest import cli_env

IMPORT_EVERYTHING = """
import json, os
before = dict(os.environ)
import localserve.cli, localserve.server, localserve.processes.supervisor, localserve.metrics.summary, localserve.processes.replica
import localserve.runtimes.onnx
print(json.dumps({k: v for k, v in os.environ.items() if before.get(k) != v}))
import localserve.runtimes.tensorflow  # TensorFlow sets variables of its own (TF2_BEHAVIOR ...), not this one
print(json.dumps(os.environ.get("TF_CPP_MIN_LOG_LEVEL")))
"""


def test_importing_localserve_and_its_runtimes_sets_no_environment_variable() -> None:
    env = cli_env()
    for name in ("TF_CPP_MIN_LOG_LEVEL", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], env=env, capture_output=True, check=True)
    ours, tf_log_level = done.stdout.splitlines()
    assert json.loads(ours) == {}
    assert json.loads(tf_log_level) is None


@pytest.mark.parametrize(("set_by_user", "expected"), [(None, "2"), ("0", "0")])
def test_tensorflow_logs_are_quieted_by_the_project_unless_the_user_chose(
    make_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, set_by_user: str | None, expected: str
) -> None:
    if set_by_user is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", set_by_user)
    config = "- kind: api\n  name: t\n  model: model\n  model_format: tensorflow\n  request_handler: handler.py\n"
    project = make_project({"localserve.yaml": config, "handler.py": "", "model/saved_model.pb": ""})
    with Project(load_config(project), ProjectSettings(), tmp_path / "cache"):
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == expected  # set before TensorFlow's import, which reads it
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == set_by_user
    with pytest.raises(ModelLoadError):  # loading a model sets nothing: the project did, for the user's code too
        load_model("tensorflow", tmp_path / "missing", ApiOptions())
    assert os.environ.get("TF_CPP_MIN_LOG_LEVEL") == set_by_user


def _environment_reads(path: Path) -> set[str]:
    """The variables a module reads from os.environ (``os.environ[X]``, ``.get(X)``, ``X in os.environ``, getenv)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    constants = {
        target.id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    def name_of(node: ast.AST) -> str:
        if isinstance(node, ast.Constant):
            return str(node.value)
        if isinstance(node, ast.Name):
            return constants.get(node.id, f"<{node.id}>")
        return "<expression>"

    reads = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            reads.add(name_of(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if (node.func.attr == "get" and is_environ(node.func.value)) or node.func.attr == "getenv":
                reads.add(name_of(node.args[0]))
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            reads.add(name_of(node.left))
    return reads


def test_nothing_below_the_cli_reads_localserves_settings_from_the_environment() -> None:
    package = Path(__file__).resolve().parents[2] / "localserve"
    reads = {
        str(path.relative_to(package)): found
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "cli" and (found := _environment_reads(path))
    }
    # Other programs' variables only: TensorFlow's log level (its first lines are held to it), the
    # PYTHONPATH replicas inherit, and user code's own .env and `env` keys. The cache folder is the CLI's.
    assert reads == {
        "project/directory.py": {"PYTHONPATH", "<key>"},
        "runtimes/__init__.py": {"TF_CPP_MIN_LOG_LEVEL"},
    }


def _writes_environment(path: Path) -> bool:
    """Whether a module changes os.environ (``os.environ[X] =``, ``del``, ``update``/``pop``/..., putenv)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        stored = isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del))
        if stored and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            changes = node.func.attr in ("update", "pop", "setdefault", "clear", "popitem")
            if (changes and isinstance(owner, ast.Attribute) and owner.attr == "environ") or node.func.attr in (
                "putenv",
                "unsetenv",
            ):
                return True
    return False


def test_below_the_cli_only_the_project_context_changes_the_environment() -> None:
    """User code's environment (.env, --environment, the platforms' variables), made by the Project context that
    the CLI enters (and by check's probe, in its subprocess, through the same functions); our settings never."""
    package = Path(__file__).resolve().parents[2] / "localserve"
    writers = {
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.relative_to(package).parts[0] != "cli" and _writes_environment(path)
    }
    assert writers == {"project/directory.py", "project/compat/context.py"}


def test_serve_flags_are_the_fields_of_the_one_settings_tree() -> None:
    """Each flag of `serve` is a field of ServeOptions (or of HttpLimits inside it) by the same name."""
    import dataclasses

    import click

    from localserve.cli import main
    from localserve.cli.options import ApiFlags
    from localserve.processes.replicas import ReplicaStart
    from localserve.server import HttpLimits, ServeOptions

    fields = {f.name for tree in (ServeOptions, HttpLimits, ProjectSettings) for f in dataclasses.fields(tree)}
    serve = main.get_command(click.Context(main), "serve")
    # What shapes the APIs (ApiFlags, the config's keys, for `load`) and what picks the project are not settings;
    # --no-install is ProjectSettings.install.
    apis = {"project", "config_file", "api_names", "no_install"} | {f.name for f in dataclasses.fields(ApiFlags)}
    assert {p.name for p in serve.params} - apis - fields == set()
    assert {f.name for f in dataclasses.fields(ApiFlags)} & fields == set()  # a flag is config or a setting
    # A replica gets the config and these options, nothing beside them.
    assert [f.name for f in dataclasses.fields(ReplicaStart)] == ["config", "options"]
