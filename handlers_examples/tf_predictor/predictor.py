class TensorFlowPredictor:
    def __init__(self, config, tensorflow_client):
        self.client = tensorflow_client
        self.suffix = config.get("suffix", "")

    def predict(self, payload):
        prediction = self.client.predict({"text": [payload["text"]]})
        upper = prediction["upper"][0]
        if isinstance(upper, bytes):  # TensorFlow returns strings as bytes
            upper = upper.decode("utf-8")
        return {"text": upper + self.suffix, "length": int(prediction["length"][0])}
