"""Which changed files ``serve --reload`` reloads for, and which APIs it reloads (server/reload.py), without a server."""

from __future__ import annotations

import pytest
from watchfiles import Change

from localserve.config import load_config
from localserve.errors import ConfigError
from localserve.server.reload import Changes, Reloader, Watched

CONFIG = """
- name: iris
  kind: api
  model: models/iris.onnx
  request_handler: handler.py
- name: echo
  kind: api
  predictor: {type: python, path: echo.py}
"""


def test_the_ignore_rules_decide_but_the_config_env_requirements_and_models_always_count(make_project) -> None:
    project = make_project(
        {
            "cortex.yaml": CONFIG,
            ".cortexignore": "data/\nmodels/\n",  # the model's folder is ignored, yet watched
            "handler.py": "",
            "echo.py": "",
        }
    )
    watched = Watched(project, project / "cortex.yaml", [(project / "models/iris.onnx").resolve()])
    counted = {
        name: watched(Change.modified, str(project.resolve() / name))
        for name in (
            "handler.py",
            "lib/util.py",
            "labels.json",
            "cortex.yaml",
            ".env",
            ".cortexignore",
            "requirements.txt",
            "models/iris.onnx",
            "data/train.csv",
            "__pycache__/handler.cpython-311.pyc",
            ".git/index",
            "notes.pyc",
        )
    }
    assert counted == {
        "handler.py": True,
        "lib/util.py": True,
        "labels.json": True,
        "cortex.yaml": True,
        ".env": True,
        ".cortexignore": True,
        "requirements.txt": True,
        "models/iris.onnx": True,
        "data/train.csv": False,
        "__pycache__/handler.cpython-311.pyc": False,
        ".git/index": False,
        "notes.pyc": False,
    }
    assert watched(Change.modified, "/elsewhere/file.py") is False
    # what editors write beside a file as they save it (sed -i, vim, backups, emacs, JetBrains): the save counts
    temporary = ["sedC9tjy4", "4913", "handler.py~", "#handler.py#", "handler.py___jb_tmp___", "lib/sedAbC123"]
    assert [name for name in temporary if watched(Change.added, str(project.resolve() / name))] == []
    assert watched(Change.added, str(project.resolve() / "sediment.py"))

    root = project.resolve()
    changes = watched.classify([str(root / n) for n in ("models/iris.onnx", "cortex.yaml", ".env", "Pipfile")])
    assert (changes.config, changes.environment, changes.requirements, changes.code) == (True, True, True, False)
    assert changes.models == {root / "models/iris.onnx"} and changes.files[0] == ".env"
    assert watched.classify([str(root / "handler.py")]).code


class Serving:
    """What Reloader.plan reads of the engine: each API's runtime (its config and state)."""

    def __init__(self, config) -> None:
        self.apis = {api.name: type("Rt", (), {"api": api, "state": "ready"})() for api in config.apis}


def test_the_plan_reloads_what_changed_and_refuses_a_new_set_of_apis(make_project) -> None:
    project = make_project({"cortex.yaml": CONFIG, "handler.py": "", "echo.py": ""})
    config = load_config(project)
    reloader = Reloader(Serving(config), config, project=None)  # type: ignore[arg-type]
    assert reloader.plan(config, Changes(config=True)) == []  # the same entries: nothing to load
    assert reloader.plan(config, Changes(code=True)) == ["iris", "echo"]
    assert reloader.plan(config, Changes(models={(project / "models/iris.onnx").resolve()})) == ["iris"]
    (project / "cortex.yaml").write_text(CONFIG.replace("path: echo.py}", "path: echo.py, config: {a: 1}}"))
    assert reloader.plan(load_config(project), Changes(config=True)) == ["echo"]
    (project / "cortex.yaml").write_text(CONFIG.replace("name: echo", "name: echo2"))
    with pytest.raises(ConfigError, match="adding, removing or renaming an API needs a restart of serve"):
        reloader.plan(load_config(project), Changes(config=True))


def test_a_splitter_change_needs_a_restart(make_project) -> None:
    splitter = "- name: ab\n  kind: TrafficSplitter\n  apis: [{name: iris, weight: 50}, {name: echo, weight: 50}]\n"
    project = make_project({"cortex.yaml": CONFIG + splitter, "handler.py": "", "echo.py": ""})
    config = load_config(project)
    reloader = Reloader(Serving(config), config, project=None)  # type: ignore[arg-type]
    assert reloader.plan(config, Changes(config=True)) == []
    (project / "cortex.yaml").write_text(
        CONFIG + splitter.replace("weight: 50}, {name: echo, weight: 50", "weight: 90}, {name: echo, weight: 10")
    )
    with pytest.raises(ConfigError) as caught:
        reloader.plan(load_config(project), Changes(config=True))
    assert str(caught.value) == (
        "cortex.yaml: a TrafficSplitter changed (added, removed, or its APIs or weights); "
        "a splitter's change needs a restart of serve."
    )


def test_a_multi_model_folder_is_left_to_its_own_watcher(make_project) -> None:
    """A new version under ``models: {dir}`` is the ModelSet's to load (live reloading), not a reload of the API."""
    config_text = "- name: many\n  kind: RealtimeAPI\n  predictor: {type: onnx, path: p.py, models: {dir: models}}\n"
    project = make_project({"cortex.yaml": config_text, "p.py": "", "models/a/1/model.onnx": ""})
    config = load_config(project)
    watched = Reloader(Serving(config), config, project=None).watched  # type: ignore[arg-type]
    root = project.resolve()
    assert not watched(Change.added, str(root / "models/a/2/model.onnx"))
    assert watched(Change.modified, str(root / "p.py"))
