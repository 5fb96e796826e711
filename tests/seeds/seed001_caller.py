# Seed 001, "It is possible to make requests from one API to another".
import requests
class PythonPredictor:
    def predict(self, payload):
        response = requests.post("http://api-text-generator:8888/predict", json={"text": "machine learning is"})
        # ...
