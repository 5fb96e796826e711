"""The Open Inference Protocol over gRPC (``inference.GRPCInferenceService``, KServe v2 and Triton's RPCs).

- ``inference.proto``: the messages (see its header for where they come from and their licences),
  and ``inference_pb2``, generated from it by grpcio-tools;
- ``head``: the model a ModelInfer message names, read on the event loop;
- ``tensors``: typed and raw contents to numpy; ``outputs``: numpy to a ModelInferResponse;
- ``status``: errors as gRPC statuses (the one renderer of this wire);
- ``call``: one call as the engine sees it (its ``Client``, its request id, its deadline's error);
- ``servicer``: the RPCs, onto the engine;
- ``server``: ``GrpcDoor``, the ``grpc.aio`` server started and stopped with the app.

Nothing here is imported unless ``serve`` has ``--grpc-port``: ``grpcio`` and ``protobuf`` are the
``grpc`` extra's, and ``localserve --help`` or an ABEJA handler never load them.
"""
