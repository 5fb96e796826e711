"""The Open Inference Protocol (KServe V2, Triton's HTTP API) beside the native routes.

- ``codec``: requests decoded into a feed, answers encoded; ``binary``: the binary tensor data
  extension; ``tensors``: datatypes, ``TensorSpec``, the outputs a request asks for;
- ``models``: which APIs are V2 models; ``view``: a model's metadata and Triton model configuration,
  from the loaded model that runs; ``multi``: the models of a multi-model API as models of their own;
- ``routes``: the REST routes, a thin front door onto the engine (one ``Engine.submit`` per inference);
- ``stats``: Triton's statistics extension from the server's metrics.

Nothing here imports the server (the layer contract).
"""
