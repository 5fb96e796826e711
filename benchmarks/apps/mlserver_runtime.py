"""An MLServer custom runtime serving an ONNX model with onnxruntime, as MLServer's docs write one.

MLServer has no ONNX runtime of its own; this is the documented way (an ``MLModel`` subclass named by
``implementation`` in ``model-settings.json``). ``peers.py`` writes the settings files beside a copy of
this module; ``max_batch_size`` / ``max_batch_time`` there turn MLServer's adaptive batching on.
"""

from __future__ import annotations

import os

import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxModel(MLModel):
    async def load(self) -> bool:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        uri = self.settings.parameters.uri if self.settings.parameters else None
        self.session = ort.InferenceSession(uri, options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        batch = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float32, copy=False)
        output = self.session.run(None, {self.input_name: batch})[0]
        return InferenceResponse(model_name=self.name, outputs=[NumpyCodec.encode_output("output", output)])
