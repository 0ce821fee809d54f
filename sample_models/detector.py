"""`detector`: a small single-shot detector whose graph holds ops TF-TRT rejects.

uint8 images are cast to float32 (TF-TRT can't take uint8), a feature-pyramid step upsamples
with `tf.image.resize` (ResizeBilinear with align_corners=False), and the post-processing is
CombinedNonMaxSuppression. Between them is an ordinary conv backbone and box/score heads that
TF-TRT converts, so the model splits into several segments. Untrained, seeded weights.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from sample_models import export
from sample_models.recipes import DETECTOR_MAX_DETECTIONS, Recipe

IMAGE_SIZE = 64
GRID = 16  # detection grid (stride 4), one anchor per cell
ANCHOR_SIZE = 0.25  # in normalised image coordinates
NUM_CLASSES = 3
MAX_PER_CLASS = 10
IOU_THRESHOLD = 0.5
SCORE_THRESHOLD = 0.3
BOX_SCALE = (0.1, 0.1, 0.2, 0.2)  # centre and log-size scales of the usual box encoding


def _conv(filters: int, name: str, kernel: int = 3, strides: int = 1, relu: bool = True
          ) -> keras.layers.Conv2D:
    return keras.layers.Conv2D(filters, kernel, strides=strides, padding="same",
                               activation="relu" if relu else None, name=name)


class DetectorNet(keras.Model):
    """float32 images in [0, 1] -> box encodings [b, cells, 4] and class logits [b, cells, C]."""

    def __init__(self) -> None:
        super().__init__(name="detector")
        self.stem = _conv(16, "stem", strides=2)  # 32x32
        self.c3 = _conv(32, "c3", strides=2)  # 16x16
        self.c4 = _conv(64, "c4", strides=2)  # 8x8
        self.lateral = _conv(64, "lateral", kernel=1, relu=False)
        self.smooth = _conv(64, "smooth")
        self.box_head = _conv(4, "box_head", relu=False)
        self.class_head = _conv(NUM_CLASSES, "class_head", relu=False)

    def call(self, images: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        c3 = self.c3(self.stem(images))
        c4 = self.c4(c3)
        # The resize TF-TRT >= 7.1 refuses: bilinear with align_corners=False.
        top_down = tf.image.resize(c4, [GRID, GRID], method="bilinear")
        features = self.smooth(self.lateral(c3) + top_down)
        cells = GRID * GRID
        boxes = tf.reshape(self.box_head(features), [-1, cells, 4])
        logits = tf.reshape(self.class_head(features), [-1, cells, NUM_CLASSES])
        return boxes, logits


def anchors() -> np.ndarray:
    """[cells, 4] anchors as (centre y, centre x, height, width), row-major over the grid."""
    centres = (np.arange(GRID, dtype=np.float32) + 0.5) / GRID
    cy, cx = np.meshgrid(centres, centres, indexing="ij")
    size = np.full(cy.size, ANCHOR_SIZE, dtype=np.float32)
    return np.stack([cy.ravel(), cx.ravel(), size, size], axis=1)


def decode(encodings: tf.Tensor) -> tf.Tensor:
    """Box encodings relative to the anchors -> [b, cells, 4] (ymin, xmin, ymax, xmax)."""
    a_cy, a_cx, a_h, a_w = tf.unstack(tf.constant(anchors()), axis=1)
    ty, tx, th, tw = tf.unstack(encodings * tf.constant(BOX_SCALE), axis=2)
    cy, cx = a_cy + ty * a_h, a_cx + tx * a_w
    half_h, half_w = 0.5 * a_h * tf.exp(th), 0.5 * a_w * tf.exp(tw)
    return tf.stack([cy - half_h, cx - half_w, cy + half_h, cx + half_w], axis=2)


def serve(net: DetectorNet, images: tf.Tensor) -> dict[str, tf.Tensor]:
    pixels = tf.cast(images, tf.float32) / 255.0
    encodings, logits = net(pixels)
    boxes, scores, classes, valid = tf.image.combined_non_max_suppression(
        tf.expand_dims(decode(encodings), 2),  # one box per cell, shared by all classes
        tf.sigmoid(logits),
        max_output_size_per_class=MAX_PER_CLASS,
        max_total_size=DETECTOR_MAX_DETECTIONS,
        iou_threshold=IOU_THRESHOLD,
        score_threshold=SCORE_THRESHOLD,
        clip_boxes=True,
    )
    return {"boxes": boxes, "scores": scores, "classes": classes, "valid_detections": valid}


def model() -> DetectorNet:
    export.seed_everything()
    net = DetectorNet()
    net(np.zeros((1, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.float32))  # create variables eagerly
    export.trained_looking(net)
    return net


def make(recipe: Recipe, directory: Path) -> None:
    net = model()
    export.save(directory, recipe, net, lambda images: serve(net, images))
