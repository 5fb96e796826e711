import collections


class PythonPredictor:
    def __init__(self, config):
        self.top = config["top"]

    def predict(self, payload, request_id):
        # An AsyncAPI job: POST /words answers {"id": ...} at once; this runs later on a worker, and
        # GET /words/<id> returns what it returns (JSON-serialisable values only).
        words = payload["text"].lower().split()
        common = collections.Counter(words).most_common(self.top)
        return {"job": request_id, "words": len(words), "top": [word for word, _ in common]}
