"""The Open Inference Protocol (KServe V2, Triton's HTTP API) beside the native routes.

- ``codec``: V2 tensors (JSON and the binary tensor data extension) to and from numpy;
- ``models``: which APIs are V2 models, their metadata and Triton model configuration;
- ``routes``: the routes, inference going through each API's own engine;
- ``stats``: Triton's statistics extension from the server's metrics.

The server imports ``localserve.protocols.v2.routes``; the codec imports nothing of the server.
"""
