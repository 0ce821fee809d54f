"""The sample models as data: names, recipe versions and serving signatures.

Importing this module is cheap (no TensorFlow), so the CLI can list names, check the build
cache and reject unknown names without paying for a TensorFlow import.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Spec:
    """One signature tensor: dtype name and shape (None = any size)."""

    dtype: str
    shape: tuple[int | None, ...]


@dataclass(frozen=True)
class Recipe:
    """How to build one sample model and what its `serving_default` signature looks like.

    `version` goes into the build marker: bump it whenever the model, its training or the
    shared export code changes, so cached builds are rebuilt.
    """

    name: str
    version: int
    module: str  # submodule of sample_models with `make(directory: Path) -> None`
    inputs: dict[str, Spec]
    outputs: dict[str, Spec]
    keras: bool = False  # also saved as `model.keras`, served by `keras_model()`
    files: tuple[str, ...] = field(default=())  # extra files written next to the SavedModel


KERAS_FILE = "model.keras"  # written next to the SavedModel by Keras-based recipes
DATA_FILE = "data.npz"  # digits models: held-out split and a calibration slice

DIGITS_CLASSES = 10
IMAGENET_CLASSES = 1000
BERT_HIDDEN = 128
BERT_VOCAB = 30522
BERT_MAX_SEQ = 512
DETECTOR_MAX_DETECTIONS = 20
CONTROL_FLOW_CLASSES = 4  # the loop and cond samples (control_flow.py)
SEQUENCE_STEPS = 12
SEQUENCE_FEATURES = 8
IMAGE_SIDE = 16

_IMAGENET_IO = {
    "inputs": {"images": Spec("float32", (None, 224, 224, 3))},
    "outputs": {"predictions": Spec("float32", (None, IMAGENET_CLASSES))},
}

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "quickstart_mlp", 1, "mlp",
            inputs={"images": Spec("float32", (None, 8, 8))},
            outputs={"logits": Spec("float32", (None, DIGITS_CLASSES))},
            keras=True, files=(DATA_FILE,),
        ),
        Recipe(
            "digits_cnn", 1, "cnn",
            inputs={"images": Spec("float32", (None, 8, 8, 1))},
            outputs={"logits": Spec("float32", (None, DIGITS_CLASSES))},
            keras=True, files=(DATA_FILE,),
        ),
        # v2 of the untrained samples: trained-looking biases and batch-norm statistics.
        Recipe("resnet50", 2, "applications", keras=True, **_IMAGENET_IO),
        Recipe("mobilenet_v2", 2, "applications", keras=True, **_IMAGENET_IO),
        Recipe(
            "tiny_bert", 2, "bert",
            inputs={
                "input_word_ids": Spec("int32", (None, None)),
                "input_mask": Spec("int32", (None, None)),
                "input_type_ids": Spec("int32", (None, None)),
            },
            outputs={
                "pooled_output": Spec("float32", (None, BERT_HIDDEN)),
                "sequence_output": Spec("float32", (None, None, BERT_HIDDEN)),
            },
        ),
        Recipe(
            "detector", 2, "detector",
            inputs={"images": Spec("uint8", (None, 64, 64, 3))},
            outputs={
                "boxes": Spec("float32", (None, DETECTOR_MAX_DETECTIONS, 4)),
                "scores": Spec("float32", (None, DETECTOR_MAX_DETECTIONS)),
                "classes": Spec("float32", (None, DETECTOR_MAX_DETECTIONS)),
                "valid_detections": Spec("int32", (None,)),
            },
        ),
        *(
            Recipe(name, 1, "control_flow", keras=name in ("lstm", "gru"),
                   inputs={key: Spec(dtype, shape)},
                   outputs={"logits": Spec("float32", (None, CONTROL_FLOW_CLASSES))})
            for name, key, dtype, shape in (
                ("lstm", "sequence", "float32", (None, SEQUENCE_STEPS, SEQUENCE_FEATURES)),
                ("gru", "sequence", "float32", (None, SEQUENCE_STEPS, SEQUENCE_FEATURES)),
                ("map_fn_cnn", "images", "float32", (None, IMAGE_SIDE, IMAGE_SIDE, 3)),
                ("png_cnn", "png", "string", (None,)),
                ("cond_mlp", "features", "float32", (None, SEQUENCE_FEATURES)),
            )
        ),
    )
}

NAMES: tuple[str, ...] = tuple(RECIPES)
