"""kind: TrafficSplitter in the config: Cortex's rules (weights, one shadow, APIs that exist and are realtime), each
refused with its message; ``--api`` keeps a splitter with its APIs."""

from __future__ import annotations

import pytest

from localserve.config import SplitterConfig, TrafficSplit, load_config
from localserve.errors import ConfigError

APIS = """
- name: a
  kind: RealtimeAPI
  predictor: {type: python, path: p.py}
- name: b
  kind: RealtimeAPI
  predictor: {type: python, path: p.py}
"""

REFUSED = [
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 30}, {name: b, weight: 60}]\n",
        "cortex.yaml: api 's': the weights of the APIs in 'apis' that are not the shadow add up to 90; expected 100.",
        id="weights",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 100, shadow: true}, {name: b, weight: 0, shadow: true}]\n",
        "cortex.yaml: api 's': 'a' and 'b' are marked 'shadow: true' in 'apis'; at most one API may be the shadow.",
        id="two_shadows",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 50}, {name: a, weight: 50}]\n",
        "cortex.yaml: api 's': api 'a' is listed twice in 'apis'; each API may appear once.",
        id="dup",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 50}, {name: c, weight: 50}]\n",
        "cortex.yaml: api 's': 'apis' names 'c', which is not an API of this config; the APIs are: a, b.",
        id="missing",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a}]\n",
        "cortex.yaml: api 's': api 'a' in 'apis' needs a 'weight' (an integer from 0 to 100).",
        id="noweight",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 101}]\n",
        "cortex.yaml: api 's': invalid value 101 for 'weight' of api 'a' in 'apis'; expected an integer from 0 to 100.",
        id="badweight",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 50.5}]\n",
        "cortex.yaml: api 's': invalid value 50.5 for 'weight' of api 'a' in 'apis'; expected an integer from 0 to 100.",
        id="fracweight",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 100, shadow: yes please}]\n",
        "cortex.yaml: api 's': invalid value 'yes please' for 'shadow' of api 'a' in 'apis'; expected true or false.",
        id="badshadow",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n",
        "cortex.yaml: api 's': 'apis' is required: a list of {name, weight, shadow} entries naming the APIs to route to; got nothing.",
        id="noapis",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: []\n",
        "cortex.yaml: api 's': 'apis' is required: a list of {name, weight, shadow} entries naming the APIs to route to; got an empty list.",
        id="emptyapis",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, wieght: 100}]\n",
        "cortex.yaml: api 's': unknown key 'wieght' in 'apis'. Did you mean 'weight'?",
        id="typo",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  predictor: {type: python}\n  apis: [{name: a, weight: 100}]\n",
        "cortex.yaml: api 's': unknown key 'predictor'; a TrafficSplitter takes only 'kind', 'name', 'apis', 'networking'.",
        id="topkey",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 100}]\n- name: t\n  kind: TrafficSplitter\n  apis: [{name: s, weight: 100}]\n",
        "cortex.yaml: api 't': 's' in 'apis' is a TrafficSplitter; a TrafficSplitter routes only to realtime APIs (kind: RealtimeAPI or api), not to another TrafficSplitter.",
        id="nested",
    ),
    pytest.param(
        "- name: q\n  kind: AsyncAPI\n  predictor: {type: python, path: p.py}\n- name: s\n  kind: TrafficSplitter\n  apis: [{name: q, weight: 100}]\n",
        "cortex.yaml: api 's': 'q' in 'apis' is a 'kind: AsyncAPI'; a TrafficSplitter routes only to realtime APIs (kind: RealtimeAPI or api).",
        id="async",
    ),
    pytest.param(
        "- name: a\n  kind: TrafficSplitter\n  apis: [{name: b, weight: 100}]\n",
        "cortex.yaml: api 'a' is defined twice; API names must be unique.",
        id="samename",
    ),
    pytest.param(
        "- name: S\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 100}]\n",
        "cortex.yaml: api 'S': invalid name 'S'; expected lower-case letters, digits and '-' (starting and ending with a letter or digit, at most 63 characters).",
        id="badname",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [a]\n",
        "cortex.yaml: api 's': entry #1 of 'apis' must be a mapping with 'name' and 'weight', got str 'a'.",
        id="entry",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  apis: [{weight: 100}]\n",
        "cortex.yaml: api 's': entry #1 of 'apis' needs a 'name' (a string), got nothing.",
        id="noname",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  networking: {endpoint: 'a//b'}\n  apis: [{name: a, weight: 100}]\n",
        "cortex.yaml: api 's': invalid value 'a//b' for 'endpoint' in 'networking'; expected a path such as '/s' (no spaces, no '//').",
        id="endpoint",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSplitter\n  networking: {endpiont: /x}\n  apis: [{name: a, weight: 100}]\n",
        "cortex.yaml: api 's': unknown key 'endpiont' in 'networking'. Did you mean 'endpoint'?",
        id="netkey",
    ),
    pytest.param(
        "- name: s\n  kind: TrafficSpliter\n  apis: [{name: a, weight: 100}]\n",
        "cortex.yaml: api 's': invalid value 'TrafficSpliter' for 'kind'; expected one of 'api', 'RealtimeAPI', 'AsyncAPI', 'TrafficSplitter'. Did you mean 'TrafficSplitter'?",
        id="kindtypo",
    ),
]


@pytest.mark.parametrize(("splitter", "message"), REFUSED)
def test_every_rule_has_its_message(make_project, splitter: str, message: str) -> None:
    project = make_project({"cortex.yaml": APIS.lstrip() + splitter})
    with pytest.raises(ConfigError) as info:
        load_config(project)
    assert str(info.value) == message


def test_a_shadow_is_left_out_of_the_sum_and_its_weight_kept(make_project) -> None:
    project = make_project(
        {
            "cortex.yaml": APIS.lstrip() + "- name: s\n  kind: TrafficSplitter\n  networking: {endpoint: models/s}\n"
            "  apis: [{name: a, weight: 100}, {name: b, weight: 25, shadow: true}]\n"
        }
    )
    config = load_config(project)
    assert config.splitters == (
        SplitterConfig(
            name="s",
            apis=(TrafficSplit("a", 100), TrafficSplit("b", 25, shadow=True)),
            endpoint="/models/s",
        ),
    )
    assert [api.name for api in config.apis] == ["a", "b"]
    (splitter,) = config.splitters
    assert (splitter.targets, splitter.shadow) == ((TrafficSplit("a", 100),), TrafficSplit("b", 25, shadow=True))


def test_only_keeps_a_splitter_with_its_apis(make_project) -> None:
    project = make_project(
        {
            "cortex.yaml": APIS.lstrip() + "- name: c\n  kind: RealtimeAPI\n  predictor: {type: python, path: p.py}\n"
            "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 50}, {name: b, weight: 50}]\n"
        }
    )
    config = load_config(project)
    assert [api.name for api in config.only(["s"]).apis] == ["a", "b"]
    assert config.only(["s"]).splitters == config.splitters
    assert [api.name for api in config.only(["a", "c"]).apis] == ["a", "c"]
    assert config.only(["a", "c"]).splitters == ()
    assert config.only(["a", "b"]).splitters == config.splitters


def test_run_names_the_apis_of_a_splitter_and_check_lists_it(make_project, tmp_path) -> None:
    from localserve.checks import check_project

    project = make_project(
        {
            "cortex.yaml": APIS.lstrip()
            + "- name: s\n  kind: TrafficSplitter\n  apis: [{name: a, weight: 100}, {name: b, weight: 5, shadow: true}]\n",
            "p.py": (
                "class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n"
                "    def predict(self, payload):\n        return payload\n"
            ),
        }
    )
    config = load_config(project)
    with pytest.raises(ConfigError) as info:
        config.api("s")
    assert str(info.value) == (
        "cortex.yaml: 's' is a TrafficSplitter, which routes requests between APIs; choose one of its APIs (a), "
        "or 'serve' it."
    )
    lines = list(check_project(config, tmp_path / "cache"))
    assert "ok  s: TrafficSplitter to a 100%, b 5% (shadow)" in lines
    assert lines[-1] == "cortex.yaml: 2 API(s) valid."
