import numpy as np  # noqa: F401  (the documented handler imports it; numpy is always there)

labels = ["iris-setosa", "iris-versicolor", "iris-virginica"]
features = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def pre_inference(sample, signature, metadata):
    # Convert the request payload to a flattened list; a missing feature becomes None, which the
    # model's input refuses with a 400 (the client's mistake, not this function's).
    if not isinstance(sample, dict):
        sample = {}
    return {signature[0].name: [sample.get(name) for name in features]}


def post_inference(prediction, signature, metadata):
    # Respond with a string label
    predicted_class_id = prediction[0][0]
    return labels[predicted_class_id]
