"""Settings travel in option objects: importing localserve changes no environment variable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes import LoadOptions, load_model
from tests.conftest import cli_env

IMPORT_EVERYTHING = """
import json, os
before = dict(os.environ)
import localserve.cli, localserve.server, localserve.supervisor, localserve.metrics.summary, localserve.replica
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
def test_tensorflow_logs_are_quieted_at_load_unless_the_user_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, set_by_user: str | None, expected: str
) -> None:
    if set_by_user is None:
        monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", set_by_user)
    with pytest.raises(ModelLoadError):
        load_model("tensorflow", tmp_path / "missing", LoadOptions())
    import os

    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == expected
