"""A Dense model as big as a user's, past protobuf's 2 GB, written by a child process (so the
caller holds none of it): float32 layers `inputs -> hidden... -> outputs` with ReLU between,
random He-scaled weights (activations stay of order one), input `x` and output `y`.

    python -m sample_models.big_dense DIR [INPUTS HIDDEN OUTPUTS]   # 4096 16384,16384,16384 1000
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ISSUE_SHAPE = (4096, (16384, 16384, 16384), 1000)  # issue 42's model: 2.48 GB


def weight_bytes(inputs: int, hidden: Sequence[int], outputs: int) -> int:
    sizes = [inputs, *hidden, outputs]
    return sum(4 * (a * b + b) for a, b in zip(sizes, sizes[1:], strict=False))


def build(path: str | os.PathLike, inputs: int = ISSUE_SHAPE[0],
          hidden: Sequence[int] = ISSUE_SHAPE[1], outputs: int = ISSUE_SHAPE[2]) -> int:
    """Writes the SavedModel at `path` in a child process; returns its weights' bytes."""
    subprocess.run([sys.executable, "-m", "sample_models.big_dense", str(path), str(inputs),
                    ",".join(map(str, hidden)), str(outputs)], check=True,
                   cwd=Path(__file__).resolve().parents[1],
                   env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    return weight_bytes(inputs, hidden, outputs)


def _write(path: str, sizes: list[int]) -> None:
    import tensorflow as tf

    class Dense(tf.Module):
        def __init__(self, fan_in: int, fan_out: int, seed: int) -> None:
            scale = (2.0 / fan_in) ** 0.5
            self.kernel = tf.Variable(
                tf.random.stateless_normal([fan_in, fan_out], [seed, 0]) * scale)
            self.bias = tf.Variable(tf.zeros([fan_out]))

    class Model(tf.Module):
        def __init__(self) -> None:
            pairs = zip(sizes, sizes[1:], strict=False)
            self.layers = [Dense(a, b, i) for i, (a, b) in enumerate(pairs)]

        @tf.function(input_signature=[tf.TensorSpec([None, sizes[0]], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            for index, layer in enumerate(self.layers):
                x = tf.matmul(x, layer.kernel) + layer.bias
                x = tf.nn.relu(x) if index < len(self.layers) - 1 else x
            return {"y": x}

    model = Model()
    tf.saved_model.save(model, path, signatures={"serving_default": model.serve})


if __name__ == "__main__":
    inputs, hidden, outputs = ISSUE_SHAPE
    if len(sys.argv) == 5:
        inputs, hidden, outputs = int(sys.argv[2]), tuple(map(int, sys.argv[3].split(","))), \
            int(sys.argv[4])
    _write(sys.argv[1], [inputs, *hidden, outputs])
