from starlette.responses import JSONResponse

LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]


class ONNXPredictor:
    def __init__(self, onnx_client, config):
        self.client = onnx_client

    def predict(self, payload):
        # A sample that is not a JSON object with "input" is the client's mistake: a 400 saying what to send.
        if not isinstance(payload, dict) or "input" not in payload:
            return JSONResponse({"error": 'send a JSON object with "input" (4 numbers), and "model", "version"'}, 400)
        # Cortex's client: predict(model_input, model_name, model_version="latest")
        model = payload.get("model", "iris")
        version = str(payload.get("version", "latest"))
        (probabilities,) = self.client.predict([payload["input"]], model, version)
        index = int(probabilities[0].argmax())
        return {
            "model": model,
            "version": version,
            "class_label": LABELS[index],
            "probability": round(float(probabilities[0][index]), 4),
        }
