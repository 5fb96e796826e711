"""``--async-store``: the URL given on the command line set on every AsyncAPI of a config, and refused with what
was expected when it names no store or the config has no AsyncAPI."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.errors import ConfigError
from localserve.protocols.asyncapi.config import with_async_store

CONFIG = """
- kind: AsyncAPI
  name: jobs
  predictor: {type: python, path: p.py}
- kind: RealtimeAPI
  name: now
  predictor: {type: python, path: p.py}
"""


def test_the_flag_is_set_on_each_asyncapi_and_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(
        CONFIG.replace("name: jobs\n", "name: jobs\n  async_store: sqlite:////x.db\n")
    )
    config = with_async_store(load_config(tmp_path), "redis://cache:6379/1")
    assert [(api.name, api.async_store) for api in config.apis] == [("jobs", "redis://cache:6379/1"), ("now", None)]


@pytest.mark.parametrize("url", ["postgres://db/x", "redis", "cache:6379"])
def test_a_url_of_no_store_is_refused(tmp_path: Path, url: str) -> None:
    (tmp_path / "cortex.yaml").write_text(CONFIG)
    with pytest.raises(ConfigError) as caught:
        with_async_store(load_config(tmp_path), url)
    assert (
        str(caught.value) == f"Invalid --async-store {url!r}; expected redis://HOST:PORT/DB or sqlite:///ABSOLUTE/PATH."
    )


def test_a_config_without_an_asyncapi_is_told_so(tmp_path: Path) -> None:
    (tmp_path / "cortex.yaml").write_text(CONFIG.split("- kind: RealtimeAPI")[0].replace("AsyncAPI", "RealtimeAPI"))
    config = load_config(tmp_path)
    with pytest.raises(ConfigError) as caught:
        with_async_store(config, "redis://h:6379/0")
    assert (
        str(caught.value)
        == f"--async-store 'redis://h:6379/0' is given, but {config.source} has no 'kind: AsyncAPI' API."
    )
