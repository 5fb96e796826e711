"""``--grpc-port`` with grpcio or protobuf missing or too old: one line from ``serve`` and ``check``, no traceback.

A protobuf too old runs in a fresh Python with protobuf 4.25.8 first on its path: one already imported stays."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from localserve.cli import main
from localserve.protocols.v2.grpc.versions import MINIMUM, UNKNOWN, grpc_problem, installed_versions
from tests.conftest import EXAMPLES, ROOT, cli_env

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TOO_OLD = "--grpc-port needs protobuf >= 5.26.1; this environment has 4.25.8: pip install -U 'protobuf>=5.26.1'"


def pinned(extra: str, name: str) -> str:
    """The version that pyproject.toml's ``extra`` names for ``name`` (``==`` or ``>=``)."""
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    for requirement in requirements:
        match = re.match(rf"{re.escape(name)}(?:==|>=)([\d.]+)", requirement)
        if match:
            return match.group(1)
    raise AssertionError(f"the {extra} extra does not name {name}: {requirements}")


def test_the_minimums_are_the_grpc_extras() -> None:
    assert {name: pinned("grpc", name) for name in MINIMUM} == MINIMUM == {"grpcio": "1.65.5", "protobuf": "5.26.1"}


@pytest.mark.parametrize(
    ("installed", "problem"),
    [
        ({"grpcio": "1.85.3", "protobuf": "7.36.2"}, None),
        ({"grpcio": "1.65.5", "protobuf": "5.26.1"}, None),
        ({"grpcio": "1.67.1", "protobuf": "6.33.6"}, None),
        ({"grpcio": "1.85.3", "protobuf": "5.30"}, None),
        ({"grpcio": UNKNOWN, "protobuf": UNKNOWN}, None),  # importable without metadata: not refused
        ({"grpcio": "1.85.3", "protobuf": "4.25.8"}, TOO_OLD),
        ({"grpcio": "1.85.3", "protobuf": "5.26.0"}, TOO_OLD.replace("has 4.25.8", "has 5.26.0")),
        (
            {"grpcio": "1.62.3", "protobuf": "7.36.2"},
            "--grpc-port needs grpcio >= 1.65.5; this environment has 1.62.3: pip install -U 'grpcio>=1.65.5'",
        ),
        (
            {"grpcio": "1.62.3", "protobuf": "4.25.8"},
            "--grpc-port needs grpcio >= 1.65.5 and protobuf >= 5.26.1; this environment has grpcio 1.62.3 and "
            "protobuf 4.25.8: pip install -U 'grpcio>=1.65.5' 'protobuf>=5.26.1'",
        ),
        (
            {"grpcio": None, "protobuf": "7.36.2"},
            "--grpc-port needs grpcio, which is not installed: pip install 'localserve[grpc]'.",
        ),
        (
            {"grpcio": None, "protobuf": None},
            "--grpc-port needs grpcio and protobuf, which are not installed: pip install 'localserve[grpc]'.",
        ),
    ],
)
def test_the_versions_that_are_refused(installed: Mapping[str, str | None], problem: str | None) -> None:
    assert grpc_problem(installed) == problem


def test_this_environment_serves_grpc() -> None:
    assert grpc_problem(installed_versions()) is None
    done = CliRunner().invoke(main, ["check", "-p", str(EXAMPLES / "iris_onnx"), "--grpc-port", "8081"])
    installed = installed_versions()
    assert (done.exit_code, done.stdout.splitlines()[0]) == (
        0,
        f"ok  gRPC (--grpc-port): grpcio {installed['grpcio']}, protobuf {installed['protobuf']}",
    )


@pytest.fixture(scope="module")
def old_protobuf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with protobuf 4.25.8 alone, as ``pip install --target`` makes it: first on PYTHONPATH, it wins."""
    target = tmp_path_factory.mktemp("protobuf-4.25.8")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:", "--target"]
    subprocess.run([*command, str(target), "protobuf==4.25.8"], check=True, timeout=300)
    return target


@pytest.mark.slow
@pytest.mark.parametrize("command", ["serve", "check"])
def test_a_protobuf_too_old_is_one_line(old_protobuf: Path, command: str) -> None:
    env = cli_env()
    env["PYTHONPATH"] = f"{old_protobuf}:{env['PYTHONPATH']}"
    args = [sys.executable, "-m", "localserve", command, "-p", str(EXAMPLES / "iris_onnx"), "--grpc-port", "0"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Error: {TOO_OLD}\n")
