"""The commands on an AsyncAPI: `run` runs the job and prints its result; `check` says how it is served."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from localserve.cli import main
from tests.cli.test_cli import in_process
from tests.conftest import EXAMPLES


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


def test_run_reports_a_body_the_predictor_cannot_read_as_the_client_s_400(
    async_project: Callable[..., Path], tmp_path: Path
) -> None:
    sample = tmp_path / "sample.json"
    sample.write_text("{bad json")
    done = in_process("run", "--project", str(async_project()), "--input", str(sample), "-q")
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert lines[-2] == "Error: the handler answered 400:", lines
    assert json.loads(lines[-1])["error"].startswith("The body is not valid JSON: ")


def test_a_result_holding_half_a_surrogate_pair_is_stored_and_printed_escaped(
    async_project: Callable[..., Path], tmp_path: Path
) -> None:
    """The predictor echoes "\\udcff" (JSON's escape, which the standard library reads): UTF-8 cannot carry it, so
    the job's result is kept as JSON's escape, as answers are written (it was a traceback here, and a job that
    was never stored, run again and again, when served)."""
    sample = tmp_path / "sample.json"
    sample.write_bytes(b'{"name": "\\udcff.bin"}')
    done = in_process("run", "--project", str(async_project()), "--input", str(sample), "-q")
    assert done.returncode == 0, done.stderr.decode()
    assert b'"name": "\\udcff.bin"' in done.stdout
    assert json.loads(done.stdout)["payload"] == {"name": "\udcff.bin"}


def test_check_says_how_an_asyncapi_is_served() -> None:
    result = CliRunner().invoke(main, ["check", "--project", str(EXAMPLES / "async_words")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "ok  words: PythonPredictor in predictor.py (kind: AsyncAPI: POST /words submits a job, GET /words/<id> "
        "polls it; jobs in SQLite in the cache folder)"
    )
