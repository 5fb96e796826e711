"""What ``export kubernetes`` adds to an AsyncAPI's container: the shared store as a setting of the pod, named by
the export's project; a store on one pod's disk refused."""

from __future__ import annotations

import pytest

from localserve.config import ApiConfig, PredictorConfig
from localserve.errors import ConfigError
from localserve.protocols.asyncapi.kubernetes import async_container_settings

PREDICTOR = PredictorConfig("python", "p.py")


def test_a_realtime_api_gets_nothing() -> None:
    assert async_container_settings(ApiConfig("now", predictor=PREDICTOR), "shop") == ([], [])


def test_the_store_travels_as_an_environment_variable_with_the_project_in_it() -> None:
    api = ApiConfig("jobs", predictor=PREDICTOR, api_kind="AsyncAPI", async_store="redis://cache:6379/0")
    args, env = async_container_settings(api, "shop")
    assert args == ["--async-store", "$(LOCALSERVE_ASYNC_STORE)"]
    assert env == [{"name": "LOCALSERVE_ASYNC_STORE", "value": "redis://cache:6379/0?project=shop"}]


@pytest.mark.parametrize(
    ("store", "why"),
    [(None, "it has none"), ("sqlite:////data/jobs.db", "'sqlite:////data/jobs.db' is a file on one pod")],
)
def test_a_store_the_pods_cannot_share_is_refused(store: str | None, why: str) -> None:
    api = ApiConfig("jobs", predictor=PREDICTOR, api_kind="AsyncAPI", async_store=store)
    with pytest.raises(ConfigError) as caught:
        async_container_settings(api, "shop")
    assert str(caught.value) == (
        f"api 'jobs' is 'kind: AsyncAPI': its pods need a job store they share, but {why}; pass --async-store "
        "redis://HOST:PORT/DB (or set 'async_store' in the config)."
    )
