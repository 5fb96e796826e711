"""Write text_savedmodel/: a SavedModel with one string signature.

Signature ``serving_default``: ``text`` string [None] -> ``upper`` string [None] and ``length``
int32 [None] (characters). Run: python handlers_examples/tf_predictor/make_model.py
"""

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf


class Text(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def shout(self, text):
        return {"upper": tf.strings.upper(text), "length": tf.strings.length(text, unit="UTF8_CHAR")}


def main(path: Path = Path(__file__).with_name("text_savedmodel")) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    module = Text()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.shout})
    return path


if __name__ == "__main__":
    print(main())
