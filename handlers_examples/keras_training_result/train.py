"""Train a tiny Keras iris classifier and save it where ABEJA's training jobs save results.

Writes $ABEJA_TRAINING_RESULT_DIR/model.keras (default: abejainc_training_result/ beside this file).
Run: python handlers_examples/keras_training_result/train.py
"""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

# Typical measurements (sepal length, sepal width, petal length, petal width) of each species.
CENTRES = np.array([[5.0, 3.4, 1.5, 0.25], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]], dtype=np.float32)
SPREAD = np.array([0.35, 0.35, 0.2, 0.1], dtype=np.float32)


def main() -> Path:
    default = Path(__file__).with_name("abejainc_training_result")
    out = Path(os.environ.get("ABEJA_TRAINING_RESULT_DIR", default))
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    y = np.repeat(np.arange(3), 200)
    x = CENTRES[y] + rng.standard_normal((len(y), 4)).astype(np.float32) * SPREAD
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=30, batch_size=32, verbose=0)
    print("accuracy:", model.evaluate(x, y, verbose=0)[1])
    path = out / "model.keras"
    model.save(path)
    return path


if __name__ == "__main__":
    print(main())
