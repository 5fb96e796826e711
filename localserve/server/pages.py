"""Pages for people: ``/openapi.json``, ``/docs`` (Swagger UI, offline) and ``/dashboard`` (live figures).

``Pages(app).routes()`` joins the app's routes (``app``: anything with a ``Site``'s attributes). The dashboard reads the
metrics ``GET /metrics`` serves through their one reader (``Metrics.figures()``), so the page and a scrape cannot
disagree; the tracker and each TrafficSplitter's entry come from ``/stats``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import mimetypes
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request as StarletteRequest
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from localserve.errors import LocalServeError, NotFound, RequestError
from localserve.protocols.http import render_error, request_id_of
from localserve.server.dashboard import dashboard_data, interval_refusal
from localserve.server.openapi import ApiDoc, openapi_document, splitter_paths
from localserve.server.openapi_v2 import add_v2_paths
from localserve.server.site import Site

if TYPE_CHECKING:
    from localserve.engine.api import ApiRuntime

STATIC = "static"  # beside this module, package data
SWAGGER_FILES = ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png")
# The route the Open Inference Protocol's inference will answer at; its paths join the document
# once the app has it (see ``Pages.v2_inference``).
V2_INFER_ROUTE = "/v2/models/{name}/infer"
log = logging.getLogger("localserve")
SAMPLE_FILE = "sample.json"
DOCS_FILES = (*SWAGGER_FILES, "docs.js", "pages.css")
DASHBOARD_FILES = ("dashboard.js", "dashboard.css", "pages.css")
# The pages and their files are the same for everyone and hold no figures: with ``--api-key`` they stay
# open, so that they can ask for the key; what they fetch (/openapi.json, /dashboard/data) needs it.
PAGE_PATHS = frozenset(
    {
        "/docs",
        "/dashboard",
        "/favicon.ico",  # browsers ask for it without the key
        *(f"/docs/{f}" for f in DOCS_FILES),
        *(f"/dashboard/{f}" for f in DASHBOARD_FILES),
    }
)


class Pages:
    """The routes of the pages, bound to one replica's ``App``."""

    def __init__(self, app: Site) -> None:
        self.app = app

    def routes(self) -> list[BaseRoute]:
        """The pages' Starlette routes."""
        return [
            Route("/openapi.json", self.openapi),
            Route("/docs", self.docs),
            Route("/docs/{file}", self.docs_file),
            Route("/dashboard", self.dashboard),
            Route("/dashboard/data", self.dashboard_data),
            Route("/dashboard/{file}", self.dashboard_file),
            Route("/favicon.ico", self.favicon),
        ]

    async def favicon(self, request: StarletteRequest) -> Response:
        """GET /favicon.ico: the pages' icon (32 px), which browsers ask for on any page of the server."""
        return Response(_static("favicon.ico"), media_type="image/x-icon", headers={"cache-control": "max-age=86400"})

    # -- /openapi.json ------------------------------------------------------------------------
    @property
    def v2_inference(self) -> bool:
        """Whether the app answers the Open Inference Protocol's inference routes (their paths join the document)."""
        return any(getattr(route, "path", None) == V2_INFER_ROUTE for route in self.app.starlette.routes)

    @property
    def bearer(self) -> bool:
        """Whether the server asks for ``Authorization: Bearer <key>`` (``--api-key``)."""
        return bool(getattr(self.app.options, "api_key", None))

    def api_docs(self) -> list[ApiDoc]:
        """What the OpenAPI document says of each API."""
        sample = _sample(self.app.config.project / SAMPLE_FILE)
        serves_root = len(self.app.apis) == 1
        return [_api_doc(rt, sample, serves_root) for rt in self.app.apis.values()]

    def document(self) -> dict[str, Any]:
        """The OpenAPI 3.1 document of every route the server answers."""
        apis = self.api_docs()
        document = openapi_document(apis, bearer=self.bearer, root_path=self.app.options.root_path)
        for splitter in self.app.config.splitters:  # kind: TrafficSplitter
            routes = ", ".join(f"{t.name} {t.weight}%" + (" (shadow copy)" if t.shadow else "") for t in splitter.apis)
            document["paths"].update(splitter_paths(splitter.name, routes))
            document["tags"].append({"name": splitter.name, "description": f"TrafficSplitter {splitter.name!r}"})
        document["paths"] = dict(sorted(document["paths"].items()))
        if self.v2_inference:
            add_v2_paths(document, [api for api in apis if api.model_format is not None])
        return document

    async def openapi(self, request: StarletteRequest) -> Response:
        """GET /openapi.json."""
        return JSONResponse(self.document())

    # -- /docs --------------------------------------------------------------------------------
    async def docs(self, request: StarletteRequest) -> Response:
        """GET /docs: Swagger UI on /openapi.json."""
        return _static_response("docs.html")

    async def docs_file(self, request: StarletteRequest) -> Response:
        """GET /docs/<file>: Swagger UI's files and the page's script and styles."""
        file = request.path_params["file"]
        folder = swagger_dir()
        if file in SWAGGER_FILES and folder is not None:
            return FileResponse(folder / file, media_type=_media_type(file), headers={"cache-control": "max-age=3600"})
        if file in DOCS_FILES and file not in SWAGGER_FILES:
            return _static_response(file)
        return _no_page(request)

    # -- /dashboard ---------------------------------------------------------------------------
    async def dashboard(self, request: StarletteRequest) -> Response:
        """GET /dashboard: the live dashboard; ``?interval=`` is the seconds between its polls (``POLLS``)."""
        refused = interval_refusal(request.query_params.getlist("interval"))
        if refused is not None:
            return _error(request, RequestError(refused))
        return _static_response("dashboard.html")

    async def dashboard_file(self, request: StarletteRequest) -> Response:
        """GET /dashboard/<file>: the dashboard's script and styles."""
        file = request.path_params["file"]
        if file in DASHBOARD_FILES:
            return _static_response(file)
        return _no_page(request)

    async def dashboard_data(self, request: StarletteRequest) -> Response:
        """GET /dashboard/data: what the dashboard draws (``dashboard_data``)."""
        return JSONResponse(dashboard_data(self.app))


def _no_page(request: StarletteRequest) -> Response:
    message = f"No page {request.url.path!r}; the pages are /docs, /dashboard and /openapi.json."
    return _error(request, NotFound(message))


def _error(request: StarletteRequest, error: LocalServeError) -> Response:
    rid = request_id_of(request.scope)
    reply = render_error(error, rid)
    return Response(reply.body, status_code=reply.status, media_type="application/json", headers={"x-request-id": rid})


def _api_doc(rt: ApiRuntime, sample: Any, serves_root: bool) -> ApiDoc:
    info = rt.describe() if rt.state == "ready" else {}
    raw_model = rt.endpoint.takes_tensors
    return ApiDoc(
        name=rt.api.name,
        kind=rt.api.kind,
        model_format=rt.api.model_format,
        inputs=info.get("inputs") or (),
        outputs=info.get("outputs") or (),
        raw_model=raw_model,
        example=sample,
        serves_root=serves_root,
    )


def _sample(path: Path) -> Any:
    """The project's ``sample.json``, when it holds JSON; None otherwise.

    Python's json reads ``NaN`` and ``Infinity``, which JSON has not: such a sample would make
    ``/openapi.json`` invalid, so it is left out of the document, with a warning (docs/reference/observability.md).
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except _NotJson as exc:
        if path not in _warned:
            _warned.add(path)
            log.warning("%s holds %s, which is not JSON: it is left out of /openapi.json's examples", path.name, exc)
        return None
    except (OSError, ValueError):
        return None


_warned: set[Path] = set()  # the samples already warned of (the document is made on every request)


class _NotJson(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJson(name)


@cache
def swagger_dir() -> Path | None:
    """The folder of Swagger UI's files, from the ``swagger-ui-py`` package (never a CDN); None without it."""
    spec = importlib.util.find_spec("swagger_ui")  # its files only: importing it would pull in Jinja
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "static"


@cache
def _static(file: str) -> bytes:
    return resources.files(__package__).joinpath(STATIC).joinpath(file).read_bytes()


def _media_type(file: str) -> str:
    return mimetypes.guess_type(file)[0] or "application/octet-stream"


def _static_response(file: str) -> Response:
    return Response(_static(file), media_type=_media_type(file), headers={"cache-control": "no-cache"})
