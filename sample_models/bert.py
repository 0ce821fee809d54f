"""`tiny_bert`: a 2-layer BERT-style encoder with the serving signature of TF Hub's BERT encoders.

Same inputs and outputs as the Hub encoders (int32 `input_word_ids`, `input_mask`,
`input_type_ids` of shape [batch, seq]; `pooled_output`, `sequence_output`) and the same
building blocks (word/position/type embeddings, post-norm self-attention with an additive mask,
GELU feed-forward, tanh pooler), only much smaller and untrained. Batch and sequence length are
both dynamic, which is what dynamic-shape profiles are exercised with.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
from keras import ops

from sample_models import export
from sample_models.recipes import BERT_HIDDEN, BERT_MAX_SEQ, BERT_VOCAB, Recipe

LAYERS = 2
HEADS = 2
INTERMEDIATE = 512
TYPE_VOCAB = 2
NORM_EPSILON = 1e-12


def _init() -> keras.initializers.Initializer:
    return keras.initializers.TruncatedNormal(stddev=0.02)  # BERT's initializer range


class PositionEmbedding(keras.layers.Layer):
    """A learned [max_seq, hidden] table, sliced to the input's sequence length."""

    def build(self, input_shape: tuple) -> None:
        self.table = self.add_weight(shape=(BERT_MAX_SEQ, BERT_HIDDEN), initializer=_init(),
                                     name="embeddings")

    def call(self, word_embeddings: keras.KerasTensor) -> keras.KerasTensor:
        seq_len = ops.shape(word_embeddings)[1]
        return ops.expand_dims(self.table[:seq_len], 0)


class TransformerBlock(keras.layers.Layer):
    """Post-norm encoder block: attention, add & norm, GELU feed-forward, add & norm."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.attention = keras.layers.MultiHeadAttention(
            HEADS, BERT_HIDDEN // HEADS, kernel_initializer=_init(), name="self_attention")
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=NORM_EPSILON, name="self_attention_layer_norm")
        self.intermediate = keras.layers.Dense(
            INTERMEDIATE, activation="gelu", kernel_initializer=_init(), name="intermediate")
        self.output_dense = keras.layers.Dense(
            BERT_HIDDEN, kernel_initializer=_init(), name="output")
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=NORM_EPSILON, name="output_layer_norm")

    def call(self, x: keras.KerasTensor, attention_mask: keras.KerasTensor) -> keras.KerasTensor:
        x = self.attention_norm(x + self.attention(x, x, attention_mask=attention_mask))
        return self.output_norm(x + self.output_dense(self.intermediate(x)))


class TinyBert(keras.Model):
    def __init__(self) -> None:
        super().__init__(name="tiny_bert")
        self.word_embeddings = keras.layers.Embedding(
            BERT_VOCAB, BERT_HIDDEN, embeddings_initializer=_init(), name="word_embeddings")
        self.position_embeddings = PositionEmbedding(name="position_embedding")
        self.type_embeddings = keras.layers.Embedding(
            TYPE_VOCAB, BERT_HIDDEN, embeddings_initializer=_init(), name="type_embeddings")
        self.embeddings_norm = keras.layers.LayerNormalization(
            epsilon=NORM_EPSILON, name="embeddings_layer_norm")
        self.blocks = [TransformerBlock(f"transformer_layer_{i}") for i in range(LAYERS)]
        self.pooler = keras.layers.Dense(
            BERT_HIDDEN, activation="tanh", kernel_initializer=_init(), name="pooler_transform")

    def call(self, input_word_ids: keras.KerasTensor, input_mask: keras.KerasTensor,
             input_type_ids: keras.KerasTensor) -> dict[str, keras.KerasTensor]:
        words = self.word_embeddings(input_word_ids)
        x = words + self.position_embeddings(words) + self.type_embeddings(input_type_ids)
        x = self.embeddings_norm(x)
        # [batch, seq] padding mask -> [batch, from_seq, to_seq], as BERT's SelfAttentionMask.
        mask = ops.cast(input_mask, "float32")
        attention_mask = ops.expand_dims(ops.ones_like(mask), 2) * ops.expand_dims(mask, 1)
        for block in self.blocks:
            x = block(x, attention_mask)
        return {"pooled_output": self.pooler(x[:, 0, :]), "sequence_output": x}


def model() -> TinyBert:
    export.seed_everything()
    net = TinyBert()
    ids = np.zeros((1, 4), dtype=np.int32)
    net(ids, np.ones_like(ids), ids)  # create the variables eagerly, before any tracing
    export.trained_looking(net)
    return net


def make(recipe: Recipe, directory: Path) -> None:
    net = model()
    export.save(directory, recipe, net, lambda **inputs: net(**inputs))
