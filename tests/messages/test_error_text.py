"""What a client is told of an error: the message cut or hidden, paths left out, the one JSON body, install hints."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from localserve.errors import HandlerError, RequestError
from localserve.messages.error_text import (
    HIDDEN_ERROR,
    error_body,
    error_message,
    install_hint,
    package_for,
    short_repr,
    without_paths,
)


def test_hide_errors_hides_only_a_500s_text() -> None:
    assert error_message(HandlerError("secret /srv/model.onnx"), hide_errors=True) == HIDDEN_ERROR
    assert error_message(RuntimeError("secret"), hide_errors=True) == HIDDEN_ERROR  # no status: a 500
    assert error_message(RequestError("bad input"), hide_errors=True) == "bad input"  # the client's own mistake
    assert error_message(HandlerError("boom"), hide_errors=False) == "boom"


def test_short_repr_cuts_at_the_limit_and_survives_any_depth() -> None:
    assert short_repr("abc") == "'abc'"
    assert short_repr("a" * 100, limit=10) == "'aaaaaa..."
    assert short_repr(list(range(20))) == "[0, 1, 2, 3, 4, 5, 6, 7, ...]"


def test_paths_inside_the_project_become_relative_and_others_are_dropped(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    text = f"cannot load {project}/models/iris.onnx; see /usr/lib/python3/site.py and {project}"
    assert without_paths(text, project) == "cannot load models/iris.onnx; see site.py and ."
    assert (
        without_paths("a ratio of 3/4 and https://example.com/x", project) == "a ratio of 3/4 and https://example.com/x"
    )


def test_package_names_where_they_differ_from_the_module() -> None:
    assert package_for("cv2") == "opencv-python"
    assert package_for("sklearn.linear_model") == "scikit-learn"
    assert package_for("google.protobuf") == "protobuf"
    assert package_for("torch.nn") == "torch"


def test_install_hints_name_a_known_package_a_preinstalled_one_or_the_nearest_module() -> None:
    assert install_hint("yaml") == "pip install pyyaml, or add it to requirements.txt"
    assert install_hint("dill") == "pip install 'localserve[cortex]' (Cortex had dill pre-installed)"
    assert install_hint("json.nothing") == "'json' is importable, but it has no module 'json.nothing'"
    assert install_hint("jsonn") == (
        "did you mean 'json' (installed)? If not, add the package that provides 'jsonn' to requirements.txt "
        "(check its name on PyPI first)"
    )
    assert (
        install_hint("qqzzxv")
        == "add the package that provides 'qqzzxv' to requirements.txt (check its name on PyPI first)"
    )


def test_an_error_message_with_a_lone_surrogate_is_still_a_json_body() -> None:
    message = "cannot read " + os.fsdecode(b"/data/\xff.bin")  # a file name that is not UTF-8
    body = error_body(message, "r1")
    assert json.loads(body) == {"error": message, "request_id": "r1"}
    assert b"\\udcff" in body  # JSON's escape: UTF-8 cannot carry the surrogate itself


def test_a_value_in_a_message_is_cut_to_its_length_and_a_few_levels() -> None:
    deep: Any = 1
    for _ in range(2000):  # deeper than repr() can go
        deep = [deep]
    assert short_repr(deep) == "[[[[...]]]]"
    assert short_repr(10**50) == "1" + "0" * 50  # whole up to the limit (reprlib cuts 40 digits by default)
    assert short_repr("x" * 100) == "'" + "x" * 56 + "..."
    assert short_repr({"a": {"b": {"c": {"d": 1}}}}, 80) == "{'a': {'b': {'c': {...}}}}"


def test_a_huge_error_message_is_cut_for_the_client() -> None:
    message = error_message(HandlerError("y" * 10_000_000), hide_errors=False)
    assert message == "y" * 10_000 + "... (9,990,000 more characters cut)"
    assert error_message(HandlerError("short"), hide_errors=False) == "short"
