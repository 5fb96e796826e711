# Seed 000, "Project files": read config.json from /mnt/project at import, then the seed's iris example.
import json
with open('/mnt/project/config.json', 'r') as config_file:
    config = json.load(config_file)

import numpy as np
labels = ["iris-setosa", "iris-versicolor", "iris-virginica"]
def pre_inference(sample, metadata):
    # Convert a dictionary of features to a flattened in list in the order expected by the model
    return {
        metadata[0].name : [
            sample["sepal_length"],
            sample["sepal_width"],
            sample["petal_length"],
            sample["petal_width"],
        ]
    }
def post_inference(prediction, metadata):
    # Update the model prediction to include the index and the label of the predicted class
    probabilites = prediction[0][0]
    predicted_class_id = int(np.argmax(probabilites))
    return {
        "class_label": labels[predicted_class_id],
        "class_index": predicted_class_id,
        "probabilities": probabilites,
    }
