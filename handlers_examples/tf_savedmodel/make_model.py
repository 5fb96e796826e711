"""Write iris_savedmodel/: a SavedModel with one signature, the hand-set iris classifier.

Signature ``serving_default``: ``measurements`` float32 [None, 4] -> ``probabilities`` float32
[None, 3] and ``class_id`` int64 [None]. Run: python handlers_examples/tf_savedmodel/make_model.py
"""

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

# Petals decide: small (length + width < 3.3) is setosa, large (> 6.6) virginica, between versicolor.
WEIGHTS = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-2.0, 0.0, 2.0], [-2.0, 0.0, 2.0]]
BIAS = [6.6, 0.0, -13.2]


class Iris(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="measurements")])
    def classify(self, measurements):
        logits = tf.matmul(measurements, tf.constant(WEIGHTS)) + tf.constant(BIAS)
        return {"probabilities": tf.nn.softmax(logits), "class_id": tf.argmax(logits, axis=1)}


def main(path: Path = Path(__file__).with_name("iris_savedmodel")) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    module = Iris()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.classify})
    return path


if __name__ == "__main__":
    print(main())
