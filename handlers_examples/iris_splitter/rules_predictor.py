from starlette.responses import JSONResponse

LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]


class PythonPredictor:
    def __init__(self, config):
        self.setosa_below = config["setosa_below"]
        self.virginica_above = config["virginica_above"]

    def predict(self, payload):
        # Bad input is the client's mistake: a 400 that says what to send, not a 500 from a KeyError.
        if not isinstance(payload, dict) or not all(
            _is_number(payload.get(k)) for k in ("petal_length", "petal_width")
        ):
            return JSONResponse({"error": 'send a JSON object with numbers "petal_length" and "petal_width"'}, 400)
        petals = payload["petal_length"] + payload["petal_width"]
        index = 0 if petals < self.setosa_below else 2 if petals > self.virginica_above else 1
        return {"class_label": LABELS[index], "api": "iris-rules"}


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
