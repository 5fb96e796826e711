from starlette.responses import JSONResponse

from cortex_internal.lib.log import logger

LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload):
        # A sample that is not a JSON object, or lacks a feature, is the client's mistake: a 400 saying what to send.
        if not isinstance(payload, dict) or not all(k in payload for k in FEATURES):
            return JSONResponse({"error": f"send a JSON object with the numbers {', '.join(FEATURES)}"}, 400)
        (probabilities,) = self.client.predict({"input": [[payload[k] for k in FEATURES]]})
        return {"class_label": LABELS[int(probabilities[0].argmax())], "api": "iris-onnx"}

    def post_predict(self, response, payload):
        # Runs after the client has its answer: the place for slow bookkeeping.
        logger.info("iris-onnx answered %s for %s", response["class_label"], payload)
