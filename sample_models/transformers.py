"""Keras 3 transformers the way Keras writes them, at configurable (small) sizes: a BERT-like
encoder and a GPT-2-like decoder. With `activation="gelu"` Keras 3 computes the exact GELU
through `Erfc`, which TF-TRT 2.17 does not convert (the rewrites' lesson and benchmark)."""

from __future__ import annotations

from pathlib import Path

import keras
import tensorflow as tf
from keras import ops

from sample_models import export


class PositionAdd(keras.layers.Layer):
    """Adds a learned [seq, hidden] position table to [batch, seq, hidden] embeddings."""

    def build(self, input_shape: tuple) -> None:
        self.table = self.add_weight(shape=tuple(input_shape[1:]), name="positions",
                                     initializer=keras.initializers.TruncatedNormal(0.02))

    def call(self, x: keras.KerasTensor) -> keras.KerasTensor:
        return x + self.table


def _block(x: keras.KerasTensor, heads: int, intermediate: int, gelu: str, name: str,
           mask: keras.KerasTensor | None = None, causal: bool = False) -> keras.KerasTensor:
    """A post-norm encoder block (pre-norm when causal, as GPT-2)."""
    hidden = x.shape[-1]
    attention = keras.layers.MultiHeadAttention(heads, hidden // heads, name=f"{name}_attention")
    norm_1 = keras.layers.LayerNormalization(epsilon=1e-12, name=f"{name}_norm_1")
    norm_2 = keras.layers.LayerNormalization(epsilon=1e-12, name=f"{name}_norm_2")
    up = keras.layers.Dense(intermediate, activation=gelu, name=f"{name}_intermediate")
    down = keras.layers.Dense(hidden, name=f"{name}_output")
    if causal:
        h = norm_1(x)
        x = x + attention(h, h, use_causal_mask=True)
        return x + down(up(norm_2(x)))
    x = norm_1(x + attention(x, x, attention_mask=mask))
    return norm_2(x + down(up(x)))


def _gelu(exact: bool) -> str | object:
    return "gelu" if exact else (lambda t: keras.activations.gelu(t, approximate=True))


def bert_like(layers: int = 4, hidden: int = 128, heads: int = 2, intermediate: int = 512,
              seq: int = 128, vocab: int = 1000, exact_gelu: bool = True) -> keras.Model:
    """BERT's shape: word + position embeddings, a padding mask, `layers` post-norm blocks
    with GELU feed-forward, a tanh pooler. BERT-Base is layers=12, hidden=768, heads=12,
    intermediate=3072, vocab=30522."""
    export.seed_everything()
    ids = keras.Input((seq,), dtype="int32", name="input_word_ids")
    padding = keras.Input((seq,), dtype="int32", name="input_mask")
    x = PositionAdd(name="position_embedding")(keras.layers.Embedding(vocab, hidden)(ids))
    x = keras.layers.LayerNormalization(epsilon=1e-12, name="embeddings_norm")(x)
    keep = ops.cast(padding, "float32")
    mask = ops.expand_dims(ops.ones_like(keep), 2) * ops.expand_dims(keep, 1)
    for i in range(layers):
        x = _block(x, heads, intermediate, _gelu(exact_gelu), f"layer_{i}", mask=mask)
    pooled = keras.layers.Dense(hidden, activation="tanh", name="pooler")(x[:, 0, :])
    model = keras.Model([ids, padding], {"pooled_output": pooled, "sequence_output": x},
                        name="bert_like")
    export.trained_looking(model)
    return model


def gpt_like(layers: int = 2, hidden: int = 128, heads: int = 2, seq: int = 64,
             vocab: int = 1000) -> keras.Model:
    """GPT-2's shape: embeddings, `layers` pre-norm causal blocks with exact GELU, a final
    norm and logits."""
    export.seed_everything()
    ids = keras.Input((seq,), dtype="int32", name="input_ids")
    x = PositionAdd(name="position_embedding")(keras.layers.Embedding(vocab, hidden)(ids))
    for i in range(layers):
        x = _block(x, heads, 4 * hidden, "gelu", f"layer_{i}", causal=True)
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
    model = keras.Model(ids, keras.layers.Dense(vocab, name="logits")(x), name="gpt_like")
    export.trained_looking(model)
    return model


def save(model: keras.Model, directory: str | Path) -> Path:
    """`model` as a SavedModel whose `serving_default` signature takes its named inputs."""
    specs = [tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0]) for t in model.inputs]
    names = [spec.name for spec in specs]

    @tf.function(input_signature=specs)
    def serve(*args: tf.Tensor) -> dict:
        outputs = model(dict(zip(names, args, strict=True)), training=False)
        return outputs if isinstance(outputs, dict) else {"output_0": outputs}

    owner = tf.Module()
    owner.model_variables = list(model.variables)
    tf.saved_model.save(owner, str(directory), signatures={export.SIGNATURE_KEY: serve})
    return Path(directory)
