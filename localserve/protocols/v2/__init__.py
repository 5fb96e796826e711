"""The Open Inference Protocol (KServe V2, Triton's HTTP API) beside the native routes.

- ``codec``: requests decoded into a feed, answers encoded; ``binary``: the binary tensor data
  extension; ``tensors``: datatypes, ``TensorSpec``, the outputs a request asks for;
- ``models``: which APIs are V2 models, their metadata and Triton model configuration;
- ``routes``: the REST routes, a thin front door onto the engine (``protocols.http.HttpDoor``);
- ``stats``: Triton's statistics extension from the server's metrics.

Nothing here imports the server (the layer contract).
"""
