"""The commands on an AsyncAPI: `run` runs the job and prints its result; `export kubernetes` passes the store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from localserve.cli import main
from tests.cli.test_cli import in_process
from tests.conftest import EXAMPLES
from tests.test_export import K8S_VERSION


def test_run_prints_the_result_of_the_job(async_project: Callable[..., Path], tmp_path: Path) -> None:
    project = async_project()
    sample = tmp_path / "sample.json"
    sample.write_text('{"n": 7}')
    args = ["run", "--project", str(project), "--input", str(sample), "--query", "mode=x", "-H", "X-Agent: cli", "-q"]
    done = in_process(*args)  # in this process: the Project context undoes what `run` does
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    job_id = out.pop("id")
    assert len(job_id) == 32 and out == {"payload": {"n": 7}, "query": {"mode": "x"}, "agent": "cli"}
    # Nothing was stored: a one-shot run needs no job store.
    assert not (tmp_path / "_cache" / "async").exists()


def test_run_reports_a_failed_job_as_an_error(async_project: Callable[..., Path], tmp_path: Path) -> None:
    sample = tmp_path / "sample.json"
    sample.write_text('{"fail": "cli"}')
    done = in_process("run", "--project", str(async_project()), "--input", str(sample), "-q")
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert lines[-2] == "Error: the handler answered 500:"
    assert json.loads(lines[-1])["error"] == "PythonPredictor.predict raised ValueError: boom: cli"


def test_export_kubernetes_passes_the_shared_store_as_a_setting() -> None:
    project = str(EXAMPLES / "async_words")
    args = ["export", "kubernetes", "--project", project, "--image", "registry.example/words:1"]
    result = CliRunner().invoke(main, [*args, "--async-store", "redis://redis.jobs:6379/0"])
    assert result.exit_code == 0, result.output
    documents = list(yaml.safe_load_all(result.stdout))
    for doc in documents:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert [d["kind"] for d in documents] == ["ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler"]
    (container,) = documents[1]["spec"]["template"]["spec"]["containers"]
    assert container["args"][-2:] == ["--async-store", "$(LOCALSERVE_ASYNC_STORE)"]
    assert {"name": "LOCALSERVE_ASYNC_STORE", "value": "redis://redis.jobs:6379/0"} in container["env"]
    assert documents[2]["metadata"]["name"] == "api-words"


@pytest.mark.parametrize(
    ("extra", "reason"),
    [([], "it has none"), (["--async-store", "sqlite:///var/jobs.db"], "'sqlite:///var/jobs.db' is a file on one pod")],
)
def test_export_kubernetes_refuses_an_asyncapi_without_a_shared_store(extra: list[str], reason: str) -> None:
    args = ["export", "kubernetes", "--project", str(EXAMPLES / "async_words"), "--image", "w:1", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: api 'words' is 'kind: AsyncAPI': its pods need a job store they share, but {reason}; pass "
        "--async-store redis://HOST:PORT/DB (or set 'async_store' in the config).\n"
    )


def test_check_says_how_an_asyncapi_is_served() -> None:
    result = CliRunner().invoke(main, ["check", "--project", str(EXAMPLES / "async_words")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "ok  words: PythonPredictor in predictor.py (kind: AsyncAPI: POST /words submits a job, GET /words/<id> "
        "polls it; jobs in SQLite in the cache folder)"
    )
