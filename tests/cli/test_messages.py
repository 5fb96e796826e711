"""Clear messages instead of tracebacks for bad config files and outputs (issue 32, items 14 and 22)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.errors import ConfigError
from tests.cli.test_cli import localserve

HANDLER = "def handler(request, context):\n    return {'content': 'ok'}\n"


def test_a_config_file_that_is_not_utf8_is_a_config_error(make_project) -> None:
    project = make_project({"cortex.yaml": b"- name: x\n  kind: RealtimeAPI\n  # caf\xe9\n", "main.py": HANDLER})
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == "cortex.yaml: line 3: not UTF-8 text (byte 0xe9 at offset 37); save the file as UTF-8."


def test_a_cortex_yaml_that_is_an_empty_list_is_a_config_error(make_project) -> None:
    project = make_project({"cortex.yaml": "[]\n", "main.py": HANDLER})
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == "cortex.yaml: the list of APIs is empty; expected at least one '- name: ...' entry."
    done = localserve("serve", "--port", "0", cwd=project)
    assert (done.returncode, done.stderr.decode().splitlines()[-1]) == (
        1,
        "Error: cortex.yaml: the list of APIs is empty; expected at least one '- name: ...' entry.",
    )


def test_run_into_a_folder_that_does_not_exist_says_so_before_running(make_project, tmp_path: Path) -> None:
    project = make_project({"main.py": "open('ran', 'w').close()\n" + HANDLER})
    missing = tmp_path / "nonexistent" / "x"
    done = localserve("run", "--handler", "main:handler", "-o", str(missing), cwd=project)
    assert (done.returncode, done.stdout, done.stderr.decode()) == (
        1,
        b"",
        f"Error: --output {missing}: the folder {missing.parent} does not exist; create it, or write elsewhere.\n",
    )
    assert not (project / "ran").exists()
