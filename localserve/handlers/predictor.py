"""Cortex predictors: ``PythonPredictor``, ``ONNXPredictor``, ``TensorFlowPredictor`` (Cortex 0.25-0.33 docs, *Predictors*).

Constructor and ``predict`` parameters are passed by name, only those the method declares.
With ``batching`` set, ``predict`` receives a list of payloads and must return a list of the
same length (Cortex's server-side batching).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from localserve.config import ApiConfig, PredictorConfig
from localserve.config.options import ApiOptions
from localserve.errors import HandlerError, HandlerLoadError, LocalServeError
from localserve.handlers import USER_ESCAPES, Observers, run_stage, truncate, user_error
from localserve.handlers.clients import (
    ModelClient,
    MultiModelClient,
    PythonClient,
    describe_models,
    model_opener,
    open_models,
    start_watching,
    versioned_api,
)
from localserve.handlers.loader import load_file, parameter_names
from localserve.handlers.request_handler import load_api_model, log
from localserve.messages.payload import about_payload, decode_payload
from localserve.messages.request import Request
from localserve.messages.response import Reply, cortex_reply
from localserve.runtimes import Feed, Model
from localserve.runtimes.modelset import ModelSet
from localserve.runtimes.versions import Source

CLIENT_PARAMS = {"onnx": "onnx_client", "tensorflow": "tensorflow_client", "python": "python_client"}
PREDICT_PARAMS = ("payload", "request_id", "query_params", "headers")
POST_PREDICT_PARAMS = ("response", "payload", "query_params", "headers")  # Cortex 0.20-0.29: what it passed by name


def inspect_predictor(module: Any, spec: PredictorConfig) -> tuple[type, list[str], list[str], list[str] | None]:
    """The predictor class of ``module`` and the parameters of its ``__init__``, ``predict`` and ``post_predict`` (None:
    none); HandlerLoadError for what ``serve`` refuses before it creates the predictor (``check`` runs this too)."""
    cls = getattr(module, spec.class_name, None)
    if not isinstance(cls, type):
        classes = [n for n, v in vars(module).items() if isinstance(v, type) and v.__module__ == module.__name__]
        raise HandlerLoadError(
            f"{spec.path}: no class {spec.class_name} (predictor type {spec.type!r}); "
            f"it defines: {', '.join(classes) or 'no classes'}."
        )
    # A python predictor has a client only with multi_model_reloading (python_client.get_model).
    client = spec.type in CLIENT_PARAMS and (spec.type != "python" or spec.models is not None)
    available = ["config", "metrics_client", *([CLIENT_PARAMS[spec.type]] if client else [])]
    init_params = parameter_names(cls.__init__)[1:]  # type: ignore[misc]
    _refuse_unknown(f"{spec.path}: {spec.class_name}.__init__", init_params, available)
    predict = getattr(cls, "predict", None)
    if not callable(predict):
        raise HandlerLoadError(f"{spec.path}: {spec.class_name} has no predict() method.")
    predict_params = parameter_names(predict)[1:]
    _refuse_unknown(f"{spec.path}: {spec.class_name}.predict", predict_params, PREDICT_PARAMS)
    if spec.type == "python" and spec.models is not None and not callable(getattr(cls, "load_model", None)):
        raise HandlerLoadError(
            f"{spec.path}: {spec.class_name} needs a load_model(self, model_path) method to serve "
            "'multi_model_reloading' (python_client.get_model calls it for each model version)."
        )
    return cls, init_params, predict_params, _post_predict_params(cls, spec.path, spec.class_name)


def _refuse_unknown(where: str, params: list[str], allowed: Sequence[str]) -> None:
    """A HandlerLoadError for the first of ``params`` (of the method ``where``) not in ``allowed``."""
    unknown = [p for p in params if p not in allowed]
    if unknown:
        raise HandlerLoadError(f"{where} has an unknown parameter {unknown[0]!r}; it may take: {', '.join(allowed)}.")


class PredictorEndpoint:
    """``PythonPredictor`` / ``ONNXPredictor`` / ``TensorFlowPredictor``: ``predict`` answers in one stage.

    The predictor calls its model itself (``onnx_client.predict``), so the engine runs no model
    call of its own (``model`` is None); with batching on, ``predict`` gets lists of payloads.
    """

    takes_tensors = False
    model: Model | None = None

    def __init__(self, api: ApiConfig, options: ApiOptions, observers: Observers) -> None:
        assert api.predictor is not None
        self.api = api
        self.predictor = api.predictor
        self.options = options
        self.observers = observers
        self.batches_lists = api.batching is not None
        self.client_model: Model | None = None
        self.models: ModelSet | None = None  # several models (models: {paths | dir}, multi_model_reloading)
        self.instance: Any = None
        self.predict_params: list[str] = []
        self.post_params: list[str] | None = None  # post_predict's parameters; None: the class has none

    def load(self) -> None:
        """Import the predictor file, check its class, load its model (ONNX/TensorFlow predictors), create the predictor."""
        spec = self.predictor
        module = load_file(spec.path, self.options.project, api=self.api.name, what="predictor")
        cls, init_params, self.predict_params, self.post_params = inspect_predictor(module, spec)
        available: dict[str, Any] = {
            "config": dict(spec.config),
            "metrics_client": self.observers.metrics_client,
        }
        client = self._client()
        if client is not None:
            available[CLIENT_PARAMS[spec.type]] = client
        try:
            self.instance = cls(**{name: available[name] for name in init_params})
        except USER_ESCAPES as exc:  # loading runs on the API's thread
            error = user_error(exc, f"{spec.class_name}.__init__")
            raise HandlerLoadError(str(error)) from exc
        if self.models is not None:
            if self.models.capacity is None:
                self.models.load_all()  # without the cache every model loads at start, as on Cortex
            else:
                self.models.names()  # a dir is read (a remote one fetched) now, off the event loop
            start_watching(self.models)

    def _client(self) -> Any:
        """The predictor's client: of several models, of one model in version folders, or of one model."""
        spec = self.predictor
        if spec.models is not None:
            self.models = self._open_models(self.api)
            return PythonClient(self.models) if spec.type == "python" else MultiModelClient(self.models)
        if spec.type == "python":
            return None
        versioned = versioned_api(self.api, self.options)  # models: {path: ...} holding version folders
        if versioned is not None:
            self.models = self._open_models(versioned)
            return MultiModelClient(self.models)
        self.client_model = load_api_model(self.api, self.options)
        return ModelClient(self.client_model)

    def _open_models(self, api: ApiConfig) -> ModelSet:
        if self.predictor.type != "python":
            return open_models(api, self.options, model_opener(api, self.options), self.observers.models)
        cls_name = self.predictor.class_name

        def load_with_predictor(files: Path, source: Source) -> Any:
            load = self.instance.load_model
            return run_stage(self.observers.stage, "load_model", f"{cls_name}.load_model", load, str(files))

        return open_models(api, self.options, load_with_predictor, self.observers.models)

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: the predictor's type and file, and its model's signature when it has one."""
        info: dict[str, Any] = {
            "name": self.api.name,
            "kind": "predictor",
            "predictor": {"type": self.predictor.type, "path": self.predictor.path},
            "model_format": self.api.model_format,
        }
        if self.client_model is not None:
            info.update(self.client_model.describe())
        if self.models is not None:
            info["models"] = describe_models(self.models)
        return info

    def _arguments(self, request: Request) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in self.predict_params:
            if name == "payload":
                values[name] = decode_payload(request.content_type, request.body)
                if request.debug:
                    log.info("debug: payload: %s", truncate(values[name]))
            elif name == "request_id":
                values[name] = request.request_id
            elif name == "query_params":
                values[name] = request.query_params
            else:
                values[name] = request.http_headers
        return values

    def _predict(self, kwargs: dict[str, Any], content_type: str | None = None) -> Any:
        where = f"{self.predictor.class_name}.predict"
        try:
            return run_stage(self.observers.stage, "predict", where, lambda: self.instance.predict(**kwargs))
        except HandlerError as exc:  # the user's own error: say how its payload was read, not only what failed
            if "payload" not in kwargs:
                raise
            message = about_payload(exc.message, where, content_type, kwargs["payload"])
            raise HandlerError(message, details=exc.details) from None

    def _reply(self, request: Request, prediction: Any, arguments: dict[str, Any]) -> Reply:
        if request.debug:
            log.info("debug: prediction: %s", truncate(prediction))
        if self.api.is_async:  # a job's result, stored as JSON text whatever the poll's Accept
            text = job_result(f"{self.predictor.class_name}.predict", prediction)
            return Reply(headers=[(b"content-type", b"application/json")], body=text.encode(), value=prediction)
        reply = cortex_reply(prediction, request.header(b"accept"))
        if self.post_params is not None:
            reply.after = functools.partial(self._post_predict, request, prediction, arguments.get("payload", _NONE))
        return reply

    def _post_predict(self, request: Request, prediction: Any, payload: Any) -> None:
        """Cortex's ``post_predict``, with the arguments it declares: run after the answer was sent (the engine's
        after-reply stage, ``Lifecycle.after_reply``); a failure is a HandlerError for the engine to log and count."""
        assert self.post_params is not None
        kwargs: dict[str, Any] = {}
        for name in self.post_params:
            if name == "response":
                kwargs[name] = prediction
            elif name == "payload":
                kwargs[name] = decode_payload(request.content_type, request.body) if payload is _NONE else payload
            elif name == "query_params":
                kwargs[name] = request.query_params
            else:
                kwargs[name] = request.http_headers
        where = f"{self.predictor.class_name}.post_predict"
        run_stage(self.observers.stage, "post_predict", where, lambda: self.instance.post_predict(**kwargs))

    def prepare(self, request: Request) -> Reply:
        """Call ``predict`` with the arguments it asks for; the whole answer."""
        arguments = self._arguments(request)
        return self._reply(request, self._predict(arguments, request.content_type), arguments)

    def infer(self, feed: Feed) -> Any:
        """Not used: a predictor calls its model itself."""
        raise NotImplementedError("predictors call their model themselves")

    def finish(self, request: Request, output: Any) -> Reply:
        """Not used: a predictor answers in ``prepare``."""
        raise NotImplementedError("predictors answer in prepare")

    def handle_batch(self, requests: list[Request]) -> list[Reply | LocalServeError]:
        """One ``predict`` call on the lists of the requests' arguments; it must return one result each."""
        results: list[Reply | LocalServeError | None] = [None] * len(requests)
        batch: list[tuple[int, dict[str, Any]]] = []
        for index, request in enumerate(requests):
            try:
                batch.append((index, self._arguments(request)))
            except LocalServeError as exc:
                results[index] = exc
        if batch:
            kwargs = {name: [args[name] for _, args in batch] for name in self.predict_params}
            try:
                predictions = self._predict(kwargs)
                if not isinstance(predictions, list | tuple) or len(predictions) != len(batch):
                    got = (
                        f"a list of {len(predictions)}"
                        if isinstance(predictions, list | tuple)
                        else (f"a {type(predictions).__name__}")
                    )
                    raise HandlerError(
                        f"{self.predictor.class_name}.predict received a batch of {len(batch)} payloads "
                        f"(batching is on) and must return a list of {len(batch)} predictions; it returned {got}."
                    )
                for (index, arguments), prediction in zip(batch, predictions, strict=True):
                    try:
                        results[index] = self._reply(requests[index], prediction, arguments)
                    except LocalServeError as exc:
                        results[index] = exc
            except LocalServeError as exc:
                for index, _ in batch:
                    results[index] = exc
        return [r for r in results if r is not None]


def job_result(where: str, result: Any) -> str:
    """An AsyncAPI's prediction as the JSON text its job stores; a HandlerError when it is not JSON (Cortex's
    AsyncAPIs: ``predict`` returns JSON-parseable objects)."""
    try:
        text = json.dumps(result, ensure_ascii=False, allow_nan=False)
        if not text.isascii():
            text.encode("utf-8")  # a lone surrogate (a str made by os.fsdecode, say) cannot be stored as UTF-8...
        return text
    except UnicodeEncodeError:
        return json.dumps(result, allow_nan=False)  # ...but as JSON's \u escape it can, as the answers write it
    except (TypeError, ValueError) as exc:
        kind = f"a {type(result).__module__}.{type(result).__qualname__}".replace("a builtins.", "a ")
        raise HandlerError(
            f"{where} returned {kind}, which is not JSON-serialisable ({exc}); an AsyncAPI's predict must "
            "return JSON-parseable objects (dict, list, str, int, float, bool, None)."
        ) from None


_NONE = object()  # predict did not ask for the payload: post_predict decodes it if it asks


def _post_predict_params(cls: type, path: str, class_name: str) -> list[str] | None:
    """The parameters ``post_predict`` declares (Cortex passed only those), or None when the class has none."""
    post_predict = getattr(cls, "post_predict", None)
    if post_predict is None:
        return None
    if not callable(post_predict):
        raise HandlerLoadError(f"{path}: {class_name}.post_predict must be a method.")
    params = parameter_names(post_predict)[1:]
    _refuse_unknown(f"{path}: {class_name}.post_predict", params, POST_PREDICT_PARAMS)
    return params
