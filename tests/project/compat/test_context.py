"""compat.context.Project: the platform around user code, made on entry and undone on exit."""

from __future__ import annotations

import builtins
import os
import socket
import sys
from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.config.options import ProjectSettings
from localserve.errors import ConfigError
from localserve.project.compat.context import Project
from localserve.project.compat.hosts import install_api_hosts

PREDICTOR = "class PythonPredictor:\n    def __init__(self, config):\n        pass\n"


def test_the_project_is_entered_and_every_change_undone(make_project, tmp_path: Path) -> None:
    project = make_project(
        {
            "cortex.yaml": "- name: p\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n"
            "    python_path: lib\n    env: {FROM_PREDICTOR: p}\n",
            "predictor.py": PREDICTOR,
            "lib/helper_ctx.py": "VALUE = 1\n",
            ".env": "FROM_DOTENV_CTX=dot\n",
        }
    )
    cwd, path, environ, resolver, opener = os.getcwd(), list(sys.path), dict(os.environ), socket.getaddrinfo, open
    settings = ProjectSettings(environment={"FROM_FLAG_CTX": "f"}, url="http://x:1")
    with Project(load_config(project), settings, tmp_path / "cache") as config:
        assert config.workdir is not None and os.getcwd() == str(config.workdir)  # the packaged view
        assert sys.path[0] == str(config.workdir) and str(config.workdir / "lib") in sys.path
        seen = {k: os.environ.get(k) for k in ("FROM_DOTENV_CTX", "FROM_FLAG_CTX", "FROM_PREDICTOR", "LOCALSERVE_URL")}
        assert seen == {
            "FROM_DOTENV_CTX": "dot",
            "FROM_FLAG_CTX": "f",
            "FROM_PREDICTOR": "p",
            "LOCALSERVE_URL": "http://x:1",
        }
        import helper_ctx  # noqa: F401  (user code's own module, from its python_path)

        install_api_hosts(lambda name: 4242 if name == "other" else None)
        assert socket.getaddrinfo("api-other", 8888)[0][4][1] == 4242
    assert (os.getcwd(), sys.path, dict(os.environ)) == (cwd, path, environ)
    assert (socket.getaddrinfo, builtins.open) == (resolver, opener)
    assert "helper_ctx" not in sys.modules  # the next entry imports user code afresh


def test_a_failed_entry_undoes_what_it_had_done(make_project, tmp_path: Path) -> None:
    two = "  predictor:\n    type: python\n    path: predictor.py\n"
    project = make_project(
        {
            "cortex.yaml": f"- name: a\n  kind: RealtimeAPI\n{two}    env: {{K: '1'}}\n"
            f"- name: b\n  kind: RealtimeAPI\n{two}    env: {{K: '2'}}\n",
            "predictor.py": PREDICTOR,
        }
    )
    cwd, path, environ = os.getcwd(), list(sys.path), dict(os.environ)
    entering = Project(load_config(project), ProjectSettings(), tmp_path / "cache")
    with pytest.raises(ConfigError, match="apis 'a' and 'b' set 'K' to different values"), entering:
        pass  # pragma: no cover
    assert (os.getcwd(), sys.path, dict(os.environ)) == (cwd, path, environ)


def test_the_projects_modules_are_let_go_even_when_its_folder_was_on_sys_path(
    make_project, tmp_path, monkeypatch
) -> None:
    """pytest puts a test's folder on sys.path: a test inside the project must not keep its main.py for the next."""
    project = make_project({"main.py": "WHO = 'project'\n", "cortex_helper_ctx.py": "X = 1\n"})
    other = make_project({"main.py": "WHO = 'other'\n"}, name="other")
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.syspath_prepend(str(other))
    import main  # type: ignore[import-not-found]  (other's: first on sys.path)

    config = load_config(project, handler="main:handler")
    with Project(config, ProjectSettings(), tmp_path / "cache"):
        import cortex_helper_ctx  # noqa: F401
        import main as inside  # type: ignore[import-not-found]

        assert inside.WHO == "project"  # other's main was set aside
    assert "cortex_helper_ctx" not in sys.modules
    assert sys.modules["main"] is main and main.WHO == "other"


def test_reload_takes_the_edits_and_a_bad_one_changes_nothing(
    make_project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve --reload's side of the context: the config read again, .env again, the packaged view synced, user
    modules let go with their bytecode; an invalid .env raises with the environment and sys.path as they were."""
    config_text = "- name: p\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n"
    project = make_project(
        {
            "cortex.yaml": config_text + "    config: {v: 1}\n",
            "predictor.py": PREDICTOR,
            "helper_reload.py": "VALUE = 1\n",
            "gone.txt": "x",
            ".env": "FROM_DOTENV_RELOAD=one\n",
        }
    )
    settings = ProjectSettings()
    context = Project(load_config(project), settings, tmp_path / "cache", reread=lambda: load_config(project))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # whatever PYTHONDONTWRITEBYTECODE says here
    with context as config:
        workdir = config.workdir
        assert workdir is not None
        import helper_reload

        bytecode = Path(helper_reload.__cached__)
        assert helper_reload.VALUE == 1 and bytecode.is_file()
        (project / "helper_reload.py").write_text("VALUE = 2\n")  # same size, same second: stale bytecode otherwise
        (project / "added.txt").write_text("new")
        (project / "gone.txt").unlink()
        (project / ".env").write_text("FROM_DOTENV_RELOAD=two\n")
        (project / "cortex.yaml").write_text(config_text + "    config: {v: 2}\n")

        reloaded = context.reload(requirements=False)

        assert reloaded.apis[0].predictor.config == {"v": 2}  # type: ignore[union-attr]
        assert (reloaded.workdir, reloaded.mnt_mode) == (workdir, config.mnt_mode)
        assert os.environ["FROM_DOTENV_RELOAD"] == "two" and sys.path[0] == str(workdir)
        assert (workdir / "added.txt").read_text() == "new" and not (workdir / "gone.txt").exists()
        assert "helper_reload" not in sys.modules and not bytecode.exists()
        import helper_reload as again

        assert again.VALUE == 2 and (workdir / "__pycache__").is_dir()  # the mirror keeps its bytecode folder

        (project / ".env").write_text("not a variable line\n")
        environ, path = dict(os.environ), list(sys.path)
        with pytest.raises(ConfigError, match=r"\.env, line 1: expected VARIABLE=value"):
            context.reload(requirements=False)
        assert (dict(os.environ), sys.path) == (environ, path)


def test_reload_sets_aside_what_a_file_added_since_entry_shadows(make_project, tmp_path: Path, monkeypatch) -> None:
    """A module added to the project under serve --reload is the project's, as if it had been there at entry: the
    module of that name imported from elsewhere is set aside, and put back on exit."""
    project = make_project(
        {
            "cortex.yaml": "- name: p\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n",
            "predictor.py": PREDICTOR,
        }
    )
    other = make_project({"late_helper_ctx.py": "WHO = 'other'\n"}, name="other")
    monkeypatch.syspath_prepend(str(other))
    import late_helper_ctx  # type: ignore[import-not-found]  (imported before serve, from elsewhere)

    context = Project(load_config(project), ProjectSettings(), tmp_path / "cache", reread=lambda: load_config(project))
    with context:
        (project / "late_helper_ctx.py").write_text("WHO = 'project'\n")
        context.reload(requirements=False)
        import late_helper_ctx as inside  # type: ignore[import-not-found]

        assert inside.WHO == "project"
    assert sys.modules["late_helper_ctx"] is late_helper_ctx and late_helper_ctx.WHO == "other"
