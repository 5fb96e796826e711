def pre_inference(sample, signature, metadata):
    # signature is the SavedModel's map<string, SignatureDef>; find the input's name there.
    # A missing feature becomes None, which the model's input refuses with a 400.
    input_name = next(iter(signature["serving_default"].inputs))
    if not isinstance(sample, dict):
        sample = {}
    return {input_name: [[sample.get(feature) for feature in metadata["features"]]]}


def post_inference(prediction, signature, metadata):
    class_id = int(prediction["class_id"][0])
    return {
        "class_label": metadata["labels"][class_id],
        "probabilities": [round(float(p), 4) for p in prediction["probabilities"][0]],
    }
