LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]


class PythonPredictor:
    def __init__(self, config):
        self.setosa_below = config["setosa_below"]
        self.virginica_above = config["virginica_above"]

    def predict(self, payload):
        petals = payload["petal_length"] + payload["petal_width"]
        index = 0 if petals < self.setosa_below else 2 if petals > self.virginica_above else 1
        return {"class_label": LABELS[index], "api": "iris-rules"}
