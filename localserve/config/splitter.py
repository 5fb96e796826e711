"""``kind: TrafficSplitter`` (Cortex 0.25-0.33): one route whose requests go to other APIs by weight, with a shadow.

Example::

    - kind: TrafficSplitter
      name: iris
      apis:
        - {name: iris-onnx, weight: 30}
        - {name: iris-tf, weight: 70}
        - {name: iris-recorder, weight: 100, shadow: true}   # a copy of 100% of the requests

Cortex's rules (``pkg/types/spec/validations.go``, ``utils.go``, ``operator/resources/validations.go``): ``weight`` is
required, an integer from 0 to 100; the non-shadow weights add up to 100; an API appears once; at most one shadow
(Cortex 0.31+); every API named is a realtime API of the deployment. A shadow's ``weight`` is the percentage of requests
it gets a copy of (Istio's ``mirrorPercentage``, as Cortex set it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from localserve.config.schema import NETWORKING_KEYS, ApiConfig
from localserve.config.values import check_keys, describe, suggest
from localserve.errors import ConfigError

SPLITTER_KIND = "TrafficSplitter"
SPLITTER_KEYS = ("kind", "name", "apis", "networking")
SPLIT_KEYS = ("name", "weight", "shadow")


@dataclass(frozen=True)
class TrafficSplit:
    """One entry of a splitter's ``apis``: the API, its weight (percent), whether it is the shadow."""

    name: str
    weight: int
    shadow: bool = False


@dataclass(frozen=True)
class SplitterConfig:
    """A ``kind: TrafficSplitter``: its name, its APIs, and the endpoint the platform would expose."""

    name: str
    apis: tuple[TrafficSplit, ...]
    endpoint: str  # networking.endpoint (default /<name>); used by export, localserve routes by name

    @property
    def targets(self) -> tuple[TrafficSplit, ...]:
        """The APIs that answer the client: every entry that is not the shadow."""
        return tuple(split for split in self.apis if not split.shadow)

    @property
    def shadow(self) -> TrafficSplit | None:
        """The shadow API (a fire-and-forget copy of ``weight`` percent of the requests), if any."""
        return next((split for split in self.apis if split.shadow), None)


def parse_splitter(entry: dict[str, Any], name: str, where: str) -> SplitterConfig:
    """Validate one ``kind: TrafficSplitter`` mapping (its name checked by the caller)."""
    for key in entry:
        if key not in SPLITTER_KEYS:
            raise ConfigError(
                f"{where}: unknown key {key!r}; a TrafficSplitter takes only {', '.join(map(repr, SPLITTER_KEYS))}."
                + suggest(str(key), SPLITTER_KEYS)
            )
    raw = entry.get("apis")
    if not isinstance(raw, list) or not raw:
        got = "an empty list" if raw == [] else describe(raw)
        raise ConfigError(
            f"{where}: 'apis' is required: a list of {{name, weight, shadow}} entries naming the APIs to route to; "
            f"got {got}."
        )
    apis = tuple(_split(item, index, where) for index, item in enumerate(raw))
    seen: set[str] = set()
    for split in apis:
        if split.name in seen:
            raise ConfigError(f"{where}: api {split.name!r} is listed twice in 'apis'; each API may appear once.")
        seen.add(split.name)
    shadows = [split.name for split in apis if split.shadow]
    if len(shadows) > 1:
        raise ConfigError(
            f"{where}: {', '.join(map(repr, shadows[:-1]))} and {shadows[-1]!r} are marked 'shadow: true' in 'apis'; "
            "at most one API may be the shadow."
        )
    total = sum(split.weight for split in apis if not split.shadow)
    if total != 100:
        raise ConfigError(
            f"{where}: the weights of the APIs in 'apis' that are not the shadow add up to {total}; expected 100."
        )
    return SplitterConfig(name=name, apis=apis, endpoint=_endpoint(entry.get("networking"), name, where))


def _split(item: Any, index: int, where: str) -> TrafficSplit:
    if not isinstance(item, dict):
        raise ConfigError(
            f"{where}: entry #{index + 1} of 'apis' must be a mapping with 'name' and 'weight', got {describe(item)}."
        )
    check_keys(item, SPLIT_KEYS, where, "apis")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: entry #{index + 1} of 'apis' needs a 'name' (a string), got {describe(name)}.")
    if "weight" not in item:
        raise ConfigError(f"{where}: api {name!r} in 'apis' needs a 'weight' (an integer from 0 to 100).")
    weight = item["weight"]
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
        raise ConfigError(
            f"{where}: invalid value {weight!r} for 'weight' of api {name!r} in 'apis'; "
            "expected an integer from 0 to 100."
        )
    shadow = item.get("shadow", False)
    if not isinstance(shadow, bool):
        raise ConfigError(
            f"{where}: invalid value {shadow!r} for 'shadow' of api {name!r} in 'apis'; expected true or false."
        )
    return TrafficSplit(name=name, weight=weight, shadow=shadow)


def _endpoint(networking: Any, name: str, where: str) -> str:
    if networking is None:
        return f"/{name}"
    if not isinstance(networking, dict):
        raise ConfigError(f"{where}: 'networking' must be a mapping, got {describe(networking)}.")
    check_keys(networking, NETWORKING_KEYS, where, "networking")
    endpoint = networking.get("endpoint")
    if endpoint is None:
        return f"/{name}"
    if not isinstance(endpoint, str) or not endpoint.strip("/") or "//" in endpoint or " " in endpoint:
        raise ConfigError(
            f"{where}: invalid value {endpoint!r} for 'endpoint' in 'networking'; expected a path such as "
            f"'/{name}' (no spaces, no '//')."
        )
    return "/" + endpoint.strip("/")


def check_splitters(splitters: Iterable[SplitterConfig], apis: Iterable[ApiConfig], source: str) -> None:
    """Every API a splitter names is a realtime API of the same config (Cortex: deployed, kind RealtimeAPI)."""
    kinds = {api.name: api.api_kind for api in apis}
    splitter_names = set()
    splitters = list(splitters)
    for splitter in splitters:
        splitter_names.add(splitter.name)
    for splitter in splitters:
        where = f"{source}: api {splitter.name!r}"
        for split in splitter.apis:
            if split.name in splitter_names:
                raise ConfigError(
                    f"{where}: {split.name!r} in 'apis' is a TrafficSplitter; a TrafficSplitter routes only to "
                    "realtime APIs (kind: RealtimeAPI or api), not to another TrafficSplitter."
                )
            kind = kinds.get(split.name)
            if kind is None:
                names = sorted(kinds)
                raise ConfigError(
                    f"{where}: 'apis' names {split.name!r}, which is not an API of this config; "
                    f"the APIs are: {', '.join(names) or 'none'}." + suggest(split.name, names)
                )
            if kind == "AsyncAPI":
                raise ConfigError(
                    f"{where}: {split.name!r} in 'apis' is a 'kind: AsyncAPI'; a TrafficSplitter routes only to "
                    "realtime APIs (kind: RealtimeAPI or api)."
                )
