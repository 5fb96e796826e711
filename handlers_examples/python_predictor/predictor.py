import json

from starlette.responses import JSONResponse


class PythonPredictor:
    def __init__(self, config):
        # Project files are readable by relative path (the project directory is the working directory).
        with open("values.json") as values_file:
            values = json.load(values_file)
        self.tax_rate = values["tax_rate"]
        self.currency = config["currency"]
        self.digits = config.get("digits", 0)

    def predict(self, payload):
        # Bad input is the client's mistake: a 400 that says what to send, not a 500 from a KeyError.
        amount = payload.get("total_without_tax") if isinstance(payload, dict) else None
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return JSONResponse({"error": 'send a JSON object with a number "total_without_tax"'}, status_code=400)
        total = round(payload["total_without_tax"] * (1 + self.tax_rate), self.digits)
        return {"total": total, "currency": self.currency}
