# Seed 001, "You can use Cortex's logger in your predictor implemention".
from cortex_internal.lib.log import logger as log
class PythonPredictor:
    def predict(self, payload):
        log.info("received payload", extra={"payload": payload})
