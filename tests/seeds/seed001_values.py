# Seed 001, "You can access values.json in your Predictor like this" (predict added to answer with it).
import json
class PythonPredictor:
    def __init__(self, config):
        with open('values.json', 'r') as values_file:
            values = json.load(values_file)
        self.values = values

    def predict(self, payload):
        return self.values
