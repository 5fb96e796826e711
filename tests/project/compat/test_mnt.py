"""/mnt/project for user code: the Docker image's case (the project IS /mnt/project) and redirect mode's one view.

Redirect mode runs in a child Python whose unshare(2) is refused, as under Docker's default seccomp profile."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import localserve.testing
from localserve.project.compat import mnt
from localserve.project.compat.view import packaged_view
from tests.conftest import cli_env

# A Python predictor that reports what every file function sees of /mnt/project, from __init__
# (the packaged view is in place by then) and again while it answers the request.
PROBE = """
import json, os, pathlib, stat


def read_json(path):
    with open(path) as file:
        return json.load(file)


def look():
    base = "/mnt/project"
    with os.scandir(base) as entries:
        scanned = sorted((e.name, e.path, e.is_symlink(), e.is_file()) for e in entries)
    return {
        "config": read_json(base + "/config.json"),
        "nested": pathlib.Path(base, "data", "words.txt").read_text().strip(),
        "listdir": sorted(os.listdir(base)),
        "scandir": [list(item) for item in scanned],
        "walk": sorted(os.path.relpath(os.path.join(folder, name), base)
                       for folder, _, files in os.walk(base) for name in files),
        "glob": sorted(p.name for p in pathlib.Path(base).glob("*.json")),
        "is_link": os.path.islink(base + "/predictor.py"),
        "readlink": os.readlink(base + "/predictor.py"),
        "realpath": os.path.realpath(base + "/data/words.txt"),
        "resolve": str(pathlib.Path(base, "predictor.py").resolve()),
        "resolve_strict": str(pathlib.Path(base, "config.json").resolve(strict=True)),
        "same_size": os.stat(base + "/config.json").st_size == os.stat(base + "/config.json", follow_symlinks=True).st_size,
        "stat_follows": stat.S_ISREG(os.stat(base + "/config.json", follow_symlinks=True).st_mode),
        "stat_nofollow_is_link": stat.S_ISLNK(os.stat(base + "/config.json", follow_symlinks=False).st_mode),
        "config_size": os.stat(base + "/config.json").st_size,
        "lstat_is_link": os.path.islink(base + "/config.json"),
        "secret_hidden": not os.path.exists(base + "/secret.txt"),
        "cortex_yaml_hidden": not os.path.exists(base + "/cortex.yaml"),
    }


class PythonPredictor:
    def __init__(self, config):
        self.at_init = look()

    def predict(self, payload):
        return {"at_init": self.at_init, "at_predict": look()}
"""


def probe_project(root: Path) -> Path:
    root.mkdir()
    (root / "predictor.py").write_text(PROBE)
    (root / "config.json").write_text('{"k": 1}')
    (root / "data").mkdir()
    (root / "data" / "words.txt").write_text("hello\n")
    (root / "secret.txt").write_text("not packaged\n")
    (root / ".cortexignore").write_text("secret.txt\n")
    (root / "payload.json").write_text("{}")
    (root / "cortex.yaml").write_text(
        "- name: probe\n  kind: RealtimeAPI\n  predictor: {type: python, path: predictor.py}\n"
    )
    return root


def one_view(project: Path) -> dict[str, object]:
    """What PROBE must see of ``project`` at /mnt/project, through its packaged view (links to the project's files)."""
    return {
        "config": {"k": 1},
        "nested": "hello",
        "listdir": ["config.json", "data", "payload.json", "predictor.py"],
        "scandir": [
            ["config.json", "/mnt/project/config.json", True, True],
            ["data", "/mnt/project/data", False, False],
            ["payload.json", "/mnt/project/payload.json", True, True],
            ["predictor.py", "/mnt/project/predictor.py", True, True],
        ],
        "walk": ["config.json", "data/words.txt", "payload.json", "predictor.py"],
        "glob": ["config.json", "payload.json"],
        "is_link": True,
        "readlink": str(project / "predictor.py"),
        "realpath": str(project / "data" / "words.txt"),
        "resolve": str(project / "predictor.py"),
        "resolve_strict": str(project / "config.json"),
        "same_size": True,
        "stat_follows": True,
        "stat_nofollow_is_link": True,
        "config_size": len('{"k": 1}'),
        "lstat_is_link": True,
        "secret_hidden": True,
        "cortex_yaml_hidden": True,
    }


def test_redirect_mode_shows_one_view_of_a_packaged_project(tmp_path: Path) -> None:
    """No namespaces (Docker's default seccomp profile): open, stat, readlink, realpath, scandir agree."""
    project = probe_project(tmp_path / "proj").resolve()
    # `localserve run` in a process where unshare(2) is refused, as under Docker's default profile.
    script = (
        "import errno, sys\n"
        "from localserve.project.compat import mnt\n"
        "def refuse(workdir):\n"
        "    raise OSError(errno.EPERM, 'unshare(CLONE_NEWUSER | CLONE_NEWNS): Operation not permitted')\n"
        "mnt.mount_namespace = refuse\n"
        "from localserve.cli import main\n"
        "sys.argv = ['localserve', 'run', '--input', 'payload.json']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=project, capture_output=True, env=cli_env(), timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"redirecting Python's file functions" in done.stderr
    seen = json.loads(done.stdout)
    expected = one_view(project)
    assert seen == {"at_init": expected, "at_predict": expected}


def test_the_packaged_view_is_not_mounted_over_the_project_that_is_mnt_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the image the project is /mnt/project: its mirror must not cover it (each link would point at itself)."""
    project = probe_project(tmp_path / "mnt-project")
    monkeypatch.setattr(mnt, "MNT_PROJECT", str(project))

    def never(workdir: Path) -> None:
        raise AssertionError(f"a mount over {project} was attempted, of {workdir}")

    monkeypatch.setattr(mnt, "mount_namespace", never)
    monkeypatch.setattr(mnt, "install_redirect", never)
    mirror = packaged_view(project, project / "cortex.yaml")
    assert mnt.provide_mnt_project(mirror, project=project) == "native"
    assert (mirror / "predictor.py").resolve() == (project / "predictor.py").resolve()
    assert mnt.provide_mnt_project(project) == "native"


# What install_redirect wraps, in this Python: each must be the original again once the project is left.
def _file_functions() -> dict[str, object]:
    names = ("open", "stat", "lstat", "access", "listdir", "scandir", "readlink", "chdir")
    return {
        "builtins.open": builtins.open,
        "io.open": io.open,
        "os.path.realpath": os.path.realpath,
        **{f"os.{name}": getattr(os, name) for name in names},
    }


def test_redirect_mode_in_process_on_a_project_with_a_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace path forced off in this very process (localserve.testing, as serve enters the project):
    readlink, realpath, scandir, listdir and stat see one view; on exit every file function is the original."""
    project = probe_project(tmp_path / "proj").resolve()
    refused: list[Path] = []

    def refuse(workdir: Path) -> None:  # what unshare(2) answers under Docker's default seccomp profile
        refused.append(workdir)
        raise OSError(errno.EPERM, "unshare(CLONE_NEWUSER | CLONE_NEWNS): Operation not permitted")

    monkeypatch.setattr(mnt, "mount_namespace", refuse)
    before = _file_functions()
    with localserve.testing.client(project, install=False) as client:
        assert mnt.redirect_target() is not None
        answer = client.post("/probe", json={})
    assert answer.status_code == 200, answer.text
    assert len(refused) == 1 and refused[0] != project  # the packaged view was offered, not the project
    expected = one_view(project)
    assert answer.json() == {"at_init": expected, "at_predict": expected}
    after = _file_functions()
    assert {name: func for name, func in after.items() if func is not before[name]} == {}
    assert mnt.redirect_target() is None


def test_redirect_mode_of_a_nested_project_gives_mnt_project_back_to_the_outer_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clients in one process, one inside the other: on the inner one's exit, /mnt/project is the outer's again."""
    outer, inner = probe_project(tmp_path / "outer"), probe_project(tmp_path / "inner")
    (inner / "config.json").write_text('{"k": 2}')

    def refuse(workdir: Path) -> None:
        raise OSError(errno.EPERM, "unshare(CLONE_NEWUSER | CLONE_NEWNS): Operation not permitted")

    monkeypatch.setattr(mnt, "mount_namespace", refuse)
    with localserve.testing.client(outer, install=False) as first:
        with localserve.testing.client(inner, install=False) as second:
            assert second.post("/probe", json={}).json()["at_predict"]["config"] == {"k": 2}
        assert first.post("/probe", json={}).json()["at_predict"]["config"] == {"k": 1}
    assert mnt.redirect_target() is None
