"""Cortex's validation rules for ``predictor.models`` and ``multi_model_reloading``, worded like every config error."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.config.schema import ModelPath, ModelsConfig
from localserve.errors import ConfigError

HEAD = "- name: a\n  kind: {kind}\n  predictor:\n    type: {type}\n    path: p.py\n"


def config(body: str, *, kind: str = "RealtimeAPI", type: str = "onnx") -> str:
    return HEAD.format(kind=kind, type=type) + body


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            config("    models:\n      dir: m\n      cache_size: 1\n"),
            "cortex.yaml: api 'a': 'cache_size' and 'disk_cache_size' in 'models' go together (Cortex's model cache); "
            "set 'disk_cache_size' too, or neither.",
        ),
        (
            config("    models:\n      dir: m\n      cache_size: 3\n      disk_cache_size: 2\n"),
            "cortex.yaml, line 8: api 'a': 'cache_size' (3) in 'models' cannot be greater than 'disk_cache_size' (2): "
            "a model in memory is also on disk.",
        ),
        (
            config(
                "    processes_per_replica: 2\n    models:\n      dir: m\n      cache_size: 1\n      disk_cache_size: 1\n"
            ),
            "cortex.yaml: api 'a': with the model cache on ('cache_size' in 'models') 'processes_per_replica' must be 1, "
            "got 2: each process would keep its own cache (as Cortex refused too).",
        ),
        (
            config("    models:\n      dir: m\n      cache_size: 1\n      disk_cache_size: 1\n", kind="AsyncAPI"),
            "cortex.yaml, line 8: api 'a': 'cache_size' in 'models' applies only to 'kind: RealtimeAPI' (Cortex's "
            "model cache); remove it or change 'kind: AsyncAPI'.",
        ),
        (
            config("    models:\n      dir: m\n      cache_size: 0\n      disk_cache_size: 1\n"),
            "cortex.yaml, line 8: api 'a': invalid value 0 for 'cache_size' in 'models'; expected a whole number above 0.",
        ),
        (
            config("    models:\n      dir: m\n      path: x.onnx\n"),
            "cortex.yaml, line 7: api 'a': 'models' in 'predictor' takes exactly one of 'path', 'paths' or 'dir'; "
            "got 'path' and 'dir'.",
        ),
        (
            config("    models:\n      cache_size: 1\n      disk_cache_size: 1\n"),
            "cortex.yaml: api 'a': 'models' in 'predictor' takes exactly one of 'path', 'paths' or 'dir'; got none.",
        ),
        (
            config("    models:\n      paths: [{name: x, path: a}, {name: x, path: b}]\n"),
            "cortex.yaml: api 'a': 'paths' item 2 in 'models' names the model 'x' again; each model needs its own name.",
        ),
        (
            config("    models:\n      paths: [{name: 'a b', path: a}]\n"),
            "cortex.yaml: api 'a': invalid value 'a b' for 'name' of 'paths' item 1 in 'models'; expected letters, "
            "digits, '-' and '_' (and not '_cortex_default').",
        ),
        (
            config("    models:\n      paths: [{name: x, pth: a}]\n"),
            "cortex.yaml: api 'a': unknown key 'pth' in 'paths'. Did you mean 'path'?",
        ),
        (
            config("    models:\n      dir: m\n", type="python"),
            "cortex.yaml: api 'a': 'models' in 'predictor' does not apply to python predictors; "
            "use 'multi_model_reloading'.",
        ),
        (
            config("    multi_model_reloading:\n      dir: m\n"),
            "cortex.yaml: api 'a': 'multi_model_reloading' in 'predictor' does not apply to onnx predictors; "
            "use 'models'.",
        ),
        (
            config("    multi_model_reloading:\n      dir: m\n      signature_key: s\n", type="python"),
            "cortex.yaml, line 8: api 'a': 'signature_key' in 'multi_model_reloading' applies to tensorflow "
            "predictors only (the models of python predictors have no signature keys).",
        ),
        (
            config("    models:\n      paths: [{name: x, path: a, signature_key: s}]\n"),
            "cortex.yaml: api 'a': 'signature_key' in 'models' applies to tensorflow predictors only "
            "(the models of onnx predictors have no signature keys).",
        ),
    ],
)
def test_rules_and_messages(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "cortex.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert str(caught.value) == message


def test_what_each_form_becomes(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(
        config("    models:\n      path: m.onnx\n")
        + "- name: b\n  kind: RealtimeAPI\n  predictor:\n    type: tensorflow\n    path: p.py\n    models:\n"
        "      signature_key: s\n      paths: [{name: x, path: a, signature_key: t}, {name: y, path: b}]\n"
        "      cache_size: 1\n      disk_cache_size: 2\n"
        "- name: c\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: p.py\n"
        "    multi_model_reloading: {path: m}\n"
    )
    single, several, python = load_config(tmp_path).apis
    assert single.predictor is not None and (single.predictor.model_path, single.predictor.models) == ("m.onnx", None)
    assert several.predictor is not None and several.model_format == "tensorflow"
    assert several.predictor.models == ModelsConfig(
        paths=(ModelPath("x", "a", "t"), ModelPath("y", "b", None)), signature_key="s", cache_size=1, disk_cache_size=2
    )
    assert python.predictor is not None and python.predictor.models == ModelsConfig(path="m")
