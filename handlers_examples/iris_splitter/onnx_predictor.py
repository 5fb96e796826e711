from cortex_internal.lib.log import logger

LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload):
        (probabilities,) = self.client.predict({"input": [[payload[k] for k in FEATURES]]})
        return {"class_label": LABELS[int(probabilities[0].argmax())], "api": "iris-onnx"}

    def post_predict(self, response, payload):
        # Runs after the client has its answer: the place for slow bookkeeping.
        logger.info("iris-onnx answered %s for %s", response["class_label"], payload)
