import http
import json
import os

import keras
import numpy as np

LABELS = ["iris-setosa", "iris-versicolor", "iris-virginica"]

# The training job's results are unpacked into ABEJA_TRAINING_RESULT_DIR before the handler is imported.
model = keras.models.load_model(
    os.path.join(os.environ.get("ABEJA_TRAINING_RESULT_DIR", "abejainc_training_result"), "model.keras")
)


def handler(request, context):
    data = json.loads(request.read())
    features = data.get("features") if isinstance(data, dict) else None
    if not isinstance(features, list) or len(features) != 4:
        return {
            "status_code": http.HTTPStatus.BAD_REQUEST,
            "content_type": "application/json; charset=utf8",
            "content": {"message": 'expected {"features": [sepal_length, sepal_width, petal_length, petal_width]}'},
        }
    logits = model.predict(np.array([features], dtype=np.float32), verbose=0)[0]
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    class_id = int(np.argmax(probabilities))
    return {
        "status_code": http.HTTPStatus.OK,
        "content_type": "application/json",
        "content": {
            "label": LABELS[class_id],
            "probabilities": [round(float(p), 4) for p in probabilities],
        },
    }
