"""``dependencies.sh``: run with ``--system-deps`` only (a warning otherwise), its output on stderr, and its
failure a ProjectError with its status. It runs in a real bash, the process boundary it has."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from localserve.errors import ProjectError
from localserve.project.compat.platform import run_dependencies_script

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="dependencies.sh runs in bash")


def test_without_system_deps_the_script_is_named_and_not_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "dependencies.sh").write_text("touch ran\n")
    with caplog.at_level(logging.WARNING, logger="localserve"):
        run_dependencies_script(tmp_path, allowed=False)
    assert not (tmp_path / "ran").exists()
    assert caplog.messages == [
        f"{tmp_path / 'dependencies.sh'} is not run: it installs system packages, which localserve does only with "
        "--system-deps (the Docker image passes it); install what it lists yourself, or pass --system-deps"
    ]


def test_with_system_deps_it_runs_in_the_project_and_its_output_goes_to_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dependencies.sh").write_text("touch ran\necho installing\n")
    run_dependencies_script(tmp_path, allowed=True)
    assert (tmp_path / "ran").is_file()  # its working directory is the project
    out, err = capfd.readouterr()
    assert out == "" and "installing" in err


def test_a_failing_script_is_a_project_error_with_its_status(tmp_path: Path) -> None:
    (tmp_path / "dependencies.sh").write_text("exit 3\n")
    with pytest.raises(ProjectError) as caught:
        run_dependencies_script(tmp_path, allowed=True)
    assert str(caught.value) == (
        "dependencies.sh exited with status 3; fix the script (its output is above) or start without --system-deps."
    )


def test_no_script_is_nothing_to_do(tmp_path: Path) -> None:
    run_dependencies_script(tmp_path, allowed=True)
    assert list(tmp_path.iterdir()) == []
