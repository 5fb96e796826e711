from starlette.responses import JSONResponse


class TensorFlowPredictor:
    def __init__(self, config, tensorflow_client):
        self.client = tensorflow_client
        self.suffix = config.get("suffix", "")

    def predict(self, payload):
        # A sample that is not a JSON object with a string "text" is the client's mistake: a 400 saying what to send.
        if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
            return JSONResponse({"error": 'send a JSON object with a string "text"'}, status_code=400)
        prediction = self.client.predict({"text": [payload["text"]]})
        upper = prediction["upper"][0]
        if isinstance(upper, bytes):  # TensorFlow returns strings as bytes
            upper = upper.decode("utf-8")
        return {"text": upper + self.suffix, "length": int(prediction["length"][0])}
