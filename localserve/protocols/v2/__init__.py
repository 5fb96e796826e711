"""The Open Inference Protocol (KServe V2, Triton's HTTP API) beside the native routes.

- ``codec``: requests decoded into a feed, answers encoded; ``binary``: the binary tensor data extension; ``tensors``:
  datatypes, ``TensorSpec``, the outputs a request asks for;
- ``models``: which APIs are V2 models; ``view``: a model's metadata and Triton model configuration; ``multi``: a
  multi-model API's models as models of their own;
- ``routes``: the REST routes, one ``Engine.submit`` per inference; ``stats``: Triton's statistics extension.

Nothing here imports the server (the layer contract).
"""
