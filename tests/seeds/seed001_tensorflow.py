# Seed 001's TensorFlowPredictor; predict names the signature, as a model with several needs.
class TensorFlowPredictor:
    def __init__(self, config, tensorflow_client, metrics_client):
        self.client = tensorflow_client
        # Additional initialization may be done here
    def predict(self, payload, request_id):
        return {key: self.client.predict(payload["x"], signature_key=key)["probabilities"].tolist() for key in ("a", "b")}
