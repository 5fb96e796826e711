import numpy as np

labels = ["iris-setosa", "iris-versicolor", "iris-virginica"]
features = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def pre_inference(sample, metadata):
    # Convert a dictionary of features to a flattened list in the order expected by the model.
    # A feature that is missing (or a sample that is not a dictionary) becomes None, which the
    # model's input refuses: the client gets a 400, not a 500 from this function.
    if not isinstance(sample, dict):
        sample = {}
    return {metadata[0].name: [sample.get(name) for name in features]}


def post_inference(prediction, metadata):
    # Update the model prediction to include the index and the label of the predicted class
    probabilites = prediction[0][0]
    predicted_class_id = int(np.argmax(probabilites))
    return {
        "class_label": labels[predicted_class_id],
        "class_index": predicted_class_id,
        "probabilities": probabilites,
    }
