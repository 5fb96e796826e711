"""The pytest plugin: the ``localserve_client`` fixture in a user's own pytest session, and a plugin that
imports nothing heavy at load (every pytest session of a machine with localserve installed loads it).

The import check runs in a fresh Python: what this session has imported already would hide an import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import EXAMPLES, cli_env


def test_the_plugin_and_the_module_import_no_heavy_runtime() -> None:
    probe = (
        "import sys, localserve.pytest_plugin\n"
        "assert 'localserve.testing' not in sys.modules, 'the plugin imports localserve.testing at load'\n"
        "import localserve.testing\n"
        "print(sorted(m for m in ('onnxruntime', 'tensorflow', 'onnx', 'grpc') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), timeout=60, check=True)
    assert done.stdout == b"[]\n"


pytest_plugins = ["pytester"]


def test_the_localserve_client_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user=f"""
        import os

        PROJECT = {str(EXAMPLES / "json_tax")!r}


        def test_two_clients(localserve_client):
            first = localserve_client(PROJECT, handler="main:handler")
            second = localserve_client(PROJECT, handler="main:handler", timeout=5)
            assert first.post("/", json={{"total_without_tax": 100}}).json() == {{"total": 108.0}}
            assert second.post("/", json={{"total_without_tax": 10}}).json() == {{"total": 10.8}}
            assert os.environ["HANDLER"] == "main:handler"


        def test_closed_at_teardown():
            assert "HANDLER" not in os.environ
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
