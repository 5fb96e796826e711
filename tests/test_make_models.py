"""The examples' model generators, run as their docstrings say, rebuild the committed models.

Each generator runs as a real process on a copy of itself in ``tmp_path`` (it writes beside its
own file, or into ``$ABEJA_TRAINING_RESULT_DIR``), so the committed files are never touched. ONNX
models must be the same protobuf message; SavedModels and the Keras model are not byte-stable
(TensorFlow names its functions and fingerprints per save), so they must have the same signature
and give the same outputs on the same inputs.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

EXAMPLES = ROOT / "handlers_examples"

# Measurements around each class boundary of the hand-set iris models, and each example's sample.
IRIS = np.array(
    [[5.2, 3.6, 1.4, 0.3], [6.1, 2.8, 4.7, 1.2], [6.7, 3.0, 5.5, 2.1], [5.0, 3.0, 1.6, 1.6], [6.0, 3.0, 3.4, 3.4]]
    + [[0.0, 0.0, 0.0, 0.0], [7.9, 4.4, 6.9, 2.5]],
    dtype=np.float32,
)


def generate(example: str, script: str, tmp_path: Path, **env: str) -> Path:
    """Copy ``script`` of ``example`` into ``tmp_path`` and run it there as ``python script``."""
    copy = tmp_path / example / script
    copy.parent.mkdir(parents=True)
    shutil.copy2(EXAMPLES / example / script, copy)
    done = subprocess.run(
        [sys.executable, str(copy)], cwd=copy.parent, capture_output=True, text=True, timeout=300, env=_env(env)
    )
    assert done.returncode == 0, done.stderr
    return copy.parent


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **extra}


def _extra_packages(extras: dict[str, list[str]], name: str) -> set[str]:
    """The distributions extra ``name`` installs (its ``localserve[...]`` extras too), names normalized."""
    found: set[str] = set()
    for requirement in extras[name]:
        if inner := re.fullmatch(r"localserve\[([a-z0-9,-]+)\]", requirement):
            for other in inner[1].split(","):
                found |= _extra_packages(extras, other)
        else:
            found.add(_normalized(re.match(r"[A-Za-z0-9._-]+", requirement)[0]))  # type: ignore[index]
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*/make_model*.py")), ids=lambda p: p.parent.name)
def test_each_generator_needs_only_what_the_extra_its_readme_names_installs(script: Path) -> None:
    """A newcomer runs ``make_model.py`` after the pip install its README names, and every import is there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (script.parent / "README.md").read_text()
    named = re.search(rf"`{script.name}` rebuilds [^\n]*?`pip install 'localserve\[([a-z0-9,-]+)\]'`", readme)
    assert named, f"{script.parent.name}/README.md names no extra to install for {script.name}"
    packages = {_normalized(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in project["dependencies"]}  # type: ignore[index]
    for extra in named[1].split(","):
        packages |= _extra_packages(project["optional-dependencies"], extra)
    tree = ast.parse(script.read_text())
    modules = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    providers = importlib.metadata.packages_distributions()
    missing = [
        top
        for top in sorted({module.partition(".")[0] for module in modules} - set(sys.stdlib_module_names))
        if not {_normalized(d) for d in providers.get(top, [top])} & packages
    ]
    assert missing == [], f"{script.name} imports {missing}, which localserve[{named[1]}] does not install"


@pytest.mark.parametrize("example", ["iris_onnx", "iris_labels"])
def test_onnx_generators_rebuild_the_committed_model(example: str, tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    made = generate(example, "make_model.py", tmp_path) / "iris.onnx"
    committed = EXAMPLES / example / "iris.onnx"
    assert onnx.load(str(made)) == onnx.load(str(committed))
    sessions = [ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]) for path in (made, committed)]
    sample = json.loads((EXAMPLES / example / "sample.json").read_text())
    inputs = np.vstack([IRIS, np.array([list(sample.values())], dtype=np.float32)])
    new, old = (session.run(None, {"input": inputs}) for session in sessions)
    assert len(new) == len(old) >= 1
    for a, b in zip(new, old, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def _signature_outputs(path: Path, feed: dict[str, object]) -> tuple[object, dict[str, np.ndarray]]:
    import tensorflow as tf

    function = tf.saved_model.load(str(path)).signatures["serving_default"]
    spec = (function.structured_input_signature, function.structured_outputs)
    return spec, {name: value.numpy() for name, value in function(**feed).items()}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "folder", "feed"),
    [
        ("tf_savedmodel", "iris_savedmodel", {"measurements": IRIS}),
        ("tf_predictor", "text_savedmodel", {"text": np.array([b"hello localserve", b"", "\u00e9t\u00e9".encode()])}),
    ],
)
def test_savedmodel_generators_rebuild_the_committed_model(
    example: str, folder: str, feed: dict[str, object], tmp_path: Path
) -> None:
    made = generate(example, "make_model.py", tmp_path) / folder
    new_spec, new = _signature_outputs(made, feed)
    old_spec, old = _signature_outputs(EXAMPLES / example / folder, feed)
    assert new_spec == old_spec
    assert sorted(new) == sorted(old)
    for name in new:
        assert new[name].dtype == old[name].dtype and np.array_equal(new[name], old[name]), name


@pytest.mark.slow
def test_keras_training_rebuilds_the_committed_result(tmp_path: Path) -> None:
    """Seeded training; the weights agree to float32 noise (CPU kernels may sum in another order)."""
    import keras

    out = tmp_path / "abejainc_training_result"
    generate("keras_training_result", "train.py", tmp_path, ABEJA_TRAINING_RESULT_DIR=str(out))
    new = keras.saving.load_model(out / "model.keras")
    old = keras.saving.load_model(EXAMPLES / "keras_training_result" / "abejainc_training_result" / "model.keras")
    assert [w.shape for w in new.get_weights()] == [w.shape for w in old.get_weights()]
    for a, b in zip(new.get_weights(), old.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)
    sample = np.array([json.loads((EXAMPLES / "keras_training_result" / "sample.json").read_text())["features"]])
    inputs = np.vstack([IRIS, sample]).astype(np.float32)
    new_logits, old_logits = new.predict(inputs, verbose=0), old.predict(inputs, verbose=0)
    np.testing.assert_allclose(new_logits, old_logits, atol=1e-3)
    assert np.array_equal(new_logits.argmax(axis=1), old_logits.argmax(axis=1))
