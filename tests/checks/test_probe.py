"""``localserve check`` refuses what ``serve`` refuses at load, with serve's own message, short of user ``__init__``s."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from localserve.cli import main
from localserve.config import load_config
from localserve.config.options import ApiOptions
from localserve.errors import LocalServeError, ModelLoadError
from localserve.runtimes import load_model
from localserve.server import create_app
from tests.models import tf_savedmodel

PREDICTOR = "- kind: api\n  name: pred\n  predictor:\n    type: {type}\n    path: predictor.py\n{extra}"
TF_HANDLER = "- kind: api\n  name: tf\n  model: model\n  model_format: tensorflow\n{extra}"
NOT_PACKAGED = "not packaged (user code cannot read them; --raw-project to allow): cortex.yaml\n"
NEVER_CREATED = "    def __init__(self, config):\n        raise SystemExit('check ran __init__')\n"


def check(project: Path) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, ["check", "-p", str(project)], catch_exceptions=False)
    return done.exit_code, done.stdout, done.stderr


def serve_refuses(project: Path, monkeypatch: pytest.MonkeyPatch, handler: str | None = None) -> str:
    """The message with which ``serve`` fails to load the project's one API."""
    monkeypatch.chdir(project)
    if handler is not None:  # as the Project context puts it, the project first on sys.path
        monkeypatch.syspath_prepend(str(project))
        monkeypatch.delitem(sys.modules, handler.partition(":")[0], raising=False)
    app = create_app(load_config(project, handler=handler))
    try:
        with pytest.raises(LocalServeError) as info:
            asyncio.run(app.startup(wait=True))
    finally:
        asyncio.run(app.shutdown.finish())
    return str(info.value)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "class PythonPredictor:\n" + NEVER_CREATED,
            "predictor.py: PythonPredictor has no predict() method.",
        ),
        (
            "class Predictor:\n" + NEVER_CREATED + "    def predict(self, payload):\n        return 1\n",
            "predictor.py: no class PythonPredictor (predictor type 'python'); it defines: Predictor.",
        ),
        (
            "class PythonPredictor:\n    def __init__(self, config, onnx_client):\n        pass\n"
            "    def predict(self, payload):\n        return 1\n",
            "predictor.py: PythonPredictor.__init__ has an unknown parameter 'onnx_client'; it may take: config, "
            "metrics_client.",
        ),
        (
            "class PythonPredictor:\n" + NEVER_CREATED + "    def predict(self, body):\n        return 1\n",
            "predictor.py: PythonPredictor.predict has an unknown parameter 'body'; it may take: payload, request_id, "
            "query_params, headers.",
        ),
        (
            "class PythonPredictor:\n" + NEVER_CREATED + "    def predict(self, payload):\n        return 1\n"
            "    def post_predict(self, response, body):\n        pass\n",
            "predictor.py: PythonPredictor.post_predict has an unknown parameter 'body'; it may take: response, "
            "payload, query_params, headers.",
        ),
    ],
)
def test_check_refuses_a_predictor_that_serve_refuses(
    make_project, monkeypatch: pytest.MonkeyPatch, code: str, message: str
) -> None:
    project = make_project({"cortex.yaml": PREDICTOR.format(type="python", extra=""), "predictor.py": code})
    assert check(project) == (1, NOT_PACKAGED, f"Error: cortex.yaml: api 'pred': {message}\n")  # never "ok" first
    assert serve_refuses(project, monkeypatch) == message


def test_check_refuses_an_abeja_handler_that_serve_refuses(make_project, monkeypatch) -> None:
    project = make_project({"main.py": "def handler(request):\n    return {}\n"})
    done = CliRunner().invoke(main, ["check", "-p", str(project), "--handler", "main:handler"])
    message = 'Handler "main:handler" must accept 2 parameters (request, context); it accepts 1.'
    assert (done.exit_code, done.stderr) == (1, f"Error: command line: api 'proj': {message}\n")
    assert serve_refuses(project, monkeypatch, handler="main:handler") == message


def test_check_passes_a_predictor_without_creating_it(make_project) -> None:
    code = "class PythonPredictor:\n" + NEVER_CREATED + "    def predict(self, payload):\n        return 1\n"
    project = make_project({"cortex.yaml": PREDICTOR.format(type="python", extra=""), "predictor.py": code})
    assert check(project) == (
        0,
        "ok  pred: PythonPredictor in predictor.py\n" + NOT_PACKAGED + "cortex.yaml: 1 API(s) valid.\n",
        "",
    )


def test_check_refuses_a_model_whose_runtime_is_not_installed(make_project, monkeypatch) -> None:
    project = make_project({"cortex.yaml": TF_HANDLER.format(extra=""), "model/saved_model.pb": ""})
    message = (
        "The tensorflow runtime is not installed (No module named 'tensorflow'); "
        "install it with: pip install 'localserve[tensorflow]'."
    )
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as where it is not installed: its import fails
    assert check(project) == (1, "", f"Error: cortex.yaml: api 'tf': {message}\n")
    # the same rule decides when serve loads the model
    with pytest.raises(ModelLoadError) as info:
        load_model("tensorflow", project / "model", ApiOptions())
    assert str(info.value) == message


@pytest.mark.slow
def test_check_refuses_a_savedmodel_with_several_signatures_and_none_chosen(make_project, monkeypatch) -> None:
    pytest.importorskip("tensorflow")
    project = make_project({"cortex.yaml": TF_HANDLER.format(extra="")})
    model = tf_savedmodel(project / "model", {"a": "linear", "b": "text"})
    message = (
        f"TensorFlow model {model} has several signatures and none is 'serving_default'; "
        "set tf_signature_key to one of 'a', 'b'."
    )
    assert check(project) == (1, "", f"Error: cortex.yaml: api 'tf': {message}\n")
    assert serve_refuses(project, monkeypatch) == message

    (project / "cortex.yaml").write_text(TF_HANDLER.format(extra="  tf_signature_key: c\n"))
    message = f"TensorFlow model {model} has no signature 'c' (tf_signature_key); its signatures: 'a', 'b'."
    assert check(project) == (1, "", f"Error: cortex.yaml: api 'tf': {message}\n")
    assert serve_refuses(project, monkeypatch) == message

    (project / "cortex.yaml").write_text(TF_HANDLER.format(extra="  tf_signature_key: b\n"))
    assert check(project)[0] == 0

    # A TensorFlowPredictor names the signature in each tensorflow_client.predict call: both load it.
    predictor = (
        "class TensorFlowPredictor:\n    def __init__(self, config, tensorflow_client):\n        pass\n"
        "    def predict(self, payload):\n        return 1\n"
    )
    (project / "predictor.py").write_text(predictor)
    (project / "cortex.yaml").write_text(PREDICTOR.format(type="tensorflow", extra="    model_path: model\n"))
    assert check(project)[0] == 0


MULTI = "    multi_model_reloading:\n      dir: models\n"


def test_check_takes_python_client_with_multi_model_reloading_and_asks_for_load_model(
    make_project, monkeypatch
) -> None:
    """With ``multi_model_reloading`` a python predictor's ``__init__`` takes ``python_client`` and the class needs
    ``load_model``: check decides as serve does (the probe is told the API has several models)."""
    head = "class PythonPredictor:\n    def __init__(self, config, python_client):\n        raise SystemExit('ran')\n"
    predict = "    def predict(self, payload):\n        return 1\n"
    config = PREDICTOR.format(type="python", extra=MULTI).replace("kind: api", "kind: RealtimeAPI")
    files = {"cortex.yaml": config, "models/a/1/model.bin": "x"}
    good = make_project(
        {**files, "predictor.py": head + predict + "    def load_model(self, model_path):\n        return 1\n"}
    )
    assert check(good)[0] == 0
    bad = make_project({**files, "predictor.py": head + predict}, name="bad")
    message = (
        "predictor.py: PythonPredictor needs a load_model(self, model_path) method to serve 'multi_model_reloading' "
        "(python_client.get_model calls it for each model version)."
    )
    assert check(bad)[2] == f"Error: cortex.yaml: api 'pred': {message}\n"
    assert serve_refuses(bad, monkeypatch) == message


def test_a_misspelt_import_names_the_nearest_installed_module_never_a_package_to_install(make_project) -> None:
    """An unknown name is never advised for ``pip install`` (a typosquatter may own it): the nearest installed
    module is named instead; and the API it breaks is not first said to be ok."""
    good = "def handler(request, context):\n    return {}\n"
    project = make_project(
        {
            "cortex.yaml": "- kind: api\n  name: good\n  handler: good:handler\n"
            "- kind: api\n  name: typo\n  handler: typo:handler\n",
            "good.py": good,
            "typo.py": "import numpyy\n" + good,
        }
    )
    assert check(project) == (
        1,
        "ok  good: ABEJA handler good:handler\n" + NOT_PACKAGED,
        "Error: cortex.yaml: api 'typo': typo imports 'numpyy', which is not installed; did you mean 'numpy' "
        "(installed)? If not, add the package that provides 'numpyy' to requirements.txt (check its name on PyPI "
        "first).\n",
    )
