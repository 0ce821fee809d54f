"""Third-party model code through the workbench: keras-hub and TF Model Garden models, each
exported by its own library in its own environment, converted here with TF-TRT's defaults.

    python benchmarks/third_party.py [--venvs DIR] [--out DIR] [--only NAME,...]

Each library gets a venv under `--venvs` (created on first use with the pinned versions
below; tf-models-official pins its TensorFlow), where this same file runs with `--export` and
writes SavedModels built from constructors with small configs and random weights (nothing is
downloaded at run time: no presets, no vocabularies), each with a `.npz` of sample inputs.
Then, in this environment, every model is converted (TF-TRT's defaults: FP32, minimum
segment size 3; dynamic shape for the text models), run against native TensorFlow, built,
saved, reloaded and run again; one table row per model, or the one-line error it got.
Too heavy for CI (two venvs, about 2 GB); the docs page docs/third-party-models.md keeps
the figures.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import record

HERE = Path(__file__).resolve()
VENVS = {  # name -> pinned requirements; the exporters below are written for these versions
    "keras-hub": ["keras-hub==0.32.0", "tensorflow==2.21.0", "tensorflow-text==2.21.1"],
    "tf-models": ["tf-models-official==2.20.0"],  # pins TensorFlow 2.20 and tf-keras
}
SEQUENCE = 16  # tokens per text sample


# --- exporting (runs inside a library's venv) ---------------------------------------------


def _save(out: Path, name: str, model: object, specs: dict, sample: dict, call: object,
          text: bool = True) -> dict:
    """`call(model, inputs)` as the serving signature of a SavedModel `out/name`; the module
    tracks the model's variables only (tf_keras would trace every layer's call, and Model
    Garden's decoder edits its cache dict, which tracing refuses)."""
    import numpy as np
    import tensorflow as tf

    call(model, {k: tf.constant(v) for k, v in sample.items()})  # builds the variables

    @tf.function(input_signature=[specs])
    def serve(inputs: dict) -> dict:
        return call(model, inputs)

    module = tf.Module()
    module.weights = list(model.variables)
    tf.saved_model.save(module, str(out / name), signatures={"serving_default": serve})
    np.savez(out / f"{name}.npz", **sample)
    return {name: {"tf": tf.__version__, "text": text}}


def _text_sample(names: tuple[str, ...]) -> tuple[dict, dict]:
    import numpy as np
    import tensorflow as tf

    ids = np.random.default_rng(0).integers(2, 100, (2, SEQUENCE)).astype(np.int32)

    def value(name: str) -> object:  # ids, all-ones masks, zero segment/type ids
        if name.endswith(("token_ids", "word_ids")):
            return ids
        return np.ones_like(ids) if name.endswith("mask") else np.zeros_like(ids)

    specs = {k: tf.TensorSpec([None, SEQUENCE], tf.int32, name=k) for k in names}
    return specs, {k: value(k) for k in names}


def export_keras_hub(out: Path) -> dict:
    import keras

    keras.utils.set_random_seed(0)
    return _keras_hub_text(out) | _keras_hub_vision(out)


def _keras_hub_text(out: Path) -> dict:
    """Encoders, decoders and encoder-decoders, two layers of width 32."""
    import keras_hub
    import numpy as np
    import tensorflow as tf

    models = keras_hub.models
    small = dict(vocabulary_size=100, num_layers=2, hidden_dim=32, intermediate_dim=64)
    tiny = dict(small, num_heads=2, max_sequence_length=SEQUENCE)
    hidden = lambda m, x: {"hidden": m(x, training=False)}  # noqa: E731
    every = lambda m, x: dict(m(x, training=False))  # noqa: E731
    done = {}
    specs, sample = _text_sample(("token_ids", "segment_ids", "padding_mask"))
    bert = models.BertBackbone(**tiny)
    done |= _save(out, "keras_hub_bert_backbone", bert, specs, sample,
                  lambda m, x: {"sequence_output": m(x, training=False)["sequence_output"]})
    classifier = models.BertTextClassifier(backbone=bert, num_classes=3, preprocessor=None)
    done |= _save(out, "keras_hub_bert_classifier", classifier, specs, sample,
                  lambda m, x: {"logits": m(x, training=False)})
    specs, sample = _text_sample(("token_ids", "padding_mask"))
    done |= _save(out, "keras_hub_gpt2_backbone", models.GPT2Backbone(**tiny), specs, sample,
                  hidden)
    heads = dict(num_query_heads=4, num_key_value_heads=2)
    done |= _save(out, "keras_hub_llama_backbone", models.LlamaBackbone(**heads, **small),
                  specs, sample, hidden)
    done |= _save(out, "keras_hub_gemma_backbone",
                  models.GemmaBackbone(**heads, head_dim=8, **small), specs, sample, hidden)
    specs, sample = _text_sample(("encoder_token_ids", "encoder_padding_mask",
                                  "decoder_token_ids", "decoder_padding_mask"))
    done |= _save(out, "keras_hub_t5_backbone",
                  models.T5Backbone(num_heads=2, dropout=0.0, **small), specs, sample, every)
    done |= _save(out, "keras_hub_bart_backbone",
                  models.BartBackbone(dropout=0.0, **tiny), specs, sample, every)
    specs, sample = _text_sample(("decoder_token_ids", "decoder_padding_mask"))
    mels = (2 * SEQUENCE, 8)  # audio frames x mel bins
    specs["encoder_features"] = tf.TensorSpec([None, *mels], tf.float32, name="encoder_features")
    sample["encoder_features"] = (
        np.random.default_rng(4).standard_normal((2, *mels)).astype(np.float32))
    whisper = models.WhisperBackbone(num_heads=2, num_mels=mels[1], **small,
                                     max_encoder_sequence_length=mels[0],
                                     max_decoder_sequence_length=SEQUENCE)
    return done | _save(out, "keras_hub_whisper_backbone", whisper, specs, sample, every)


def _keras_hub_vision(out: Path) -> dict:
    """Classification backbones, a detector with its NMS, and two segmenters, at 32-64 px."""
    import keras_hub
    import numpy as np
    import tensorflow as tf

    models = keras_hub.models

    def resnet(size: int, filters: list[int]) -> object:
        return models.ResNetBackbone(
            input_conv_filters=[64], input_conv_kernel_sizes=[3],
            stackwise_num_filters=filters, stackwise_num_blocks=[1] * len(filters),
            stackwise_num_strides=[1] + [2] * (len(filters) - 1), block_type="basic_block",
            image_shape=(size, size, 3))

    def images(size: int, batch: int | None = None) -> tuple[dict, dict]:
        spec = tf.TensorSpec([batch, size, size, 3], tf.float32, name="images")
        value = np.random.default_rng(1).standard_normal((batch or 2, size, size, 3))
        return {"images": spec}, {"images": value.astype(np.float32)}

    def features(training: bool) -> object:
        return lambda m, x: {"features": m(x["images"], training=training)}

    def masks(m: object, x: dict) -> dict:
        return {"masks": m(x["images"], training=False)}

    done = {}
    small = resnet(32, [64, 32])
    done |= _save(out, "keras_hub_resnet_backbone", small, *images(32), features(False),
                  text=False)
    # Served in training mode, its BatchNormalizations update their statistics: TensorFlow
    # cannot freeze it; the workbench says so and how to export for inference.
    done |= _save(out, "keras_hub_resnet_training_mode", small, *images(32), features(True),
                  text=False)
    vit = models.ViTBackbone(image_shape=(64, 64, 3), patch_size=16, num_layers=2, num_heads=2,
                             hidden_dim=32, mlp_dim=64)
    done |= _save(out, "keras_hub_vit_backbone", vit, *images(64), features(False), text=False)
    pyramid = models.RetinaNetBackbone(image_encoder=resnet(64, [64, 32, 32, 32]), min_level=3,
                                       max_level=5, use_p5=False, image_shape=(64, 64, 3))
    retinanet = models.RetinaNetObjectDetector(backbone=pyramid, num_classes=4,
                                               pre_logits_num_conv_layers=2)
    # Its NMS (two while loops) needs a static batch.
    done |= _save(out, "keras_hub_retinanet", retinanet, *images(64, batch=1),
                  lambda m, x: dict(m.decode_predictions(m(x["images"], training=False),
                                                         x["images"])), text=False)
    deeplab = models.DeepLabV3Backbone(
        image_encoder=resnet(64, [64, 32, 32, 32]), spatial_pyramid_pooling_key="P4",
        upsampling_size=4, dilation_rates=[2, 4], low_level_feature_key="P2",
        image_shape=(64, 64, 3))
    done |= _save(out, "keras_hub_deeplabv3",
                  models.DeepLabV3ImageSegmenter(backbone=deeplab, num_classes=3),
                  *images(64), masks, text=False)
    mit = models.MiTBackbone(
        layerwise_depths=[1, 1], num_layers=2, layerwise_num_heads=[1, 2],
        layerwise_sr_ratios=[2, 1], max_drop_path_rate=0.0, layerwise_patch_sizes=[7, 3],
        layerwise_strides=[4, 2], image_shape=(64, 64, 3), hidden_dims=[16, 32])
    segformer = models.SegFormerImageSegmenter(
        backbone=models.SegFormerBackbone(image_encoder=mit, projection_filters=32),
        num_classes=3)
    return done | _save(out, "keras_hub_segformer", segformer, *images(64), masks, text=False)


def export_model_garden(out: Path) -> dict:
    import numpy as np
    import tensorflow as tf
    from official.nlp.modeling import models, networks

    tf.random.set_seed(0)
    done = {}
    specs, sample = _text_sample(("input_word_ids", "input_mask", "input_type_ids"))
    encoder = networks.BertEncoder(vocab_size=100, hidden_size=32, num_layers=2,
                                   num_attention_heads=2, intermediate_size=64,
                                   max_sequence_length=SEQUENCE, dict_outputs=True)
    done |= _save(out, "model_garden_bert_encoder", encoder, specs, sample,
                  lambda m, x: {k: m(x, training=False)[k]
                                for k in ("pooled_output", "sequence_output")})
    layer = dict(num_layers=1, num_attention_heads=2, intermediate_size=64)
    seq2seq = models.Seq2SeqTransformer(
        vocab_size=50, embedding_width=32, dropout_rate=0.0, padded_decode=False,
        decode_max_length=6, beam_size=2, alpha=0.6, eos_id=1, extra_decode_length=2,
        encoder_layer=models.TransformerEncoder(**layer),
        decoder_layer=models.TransformerDecoder(**layer))
    source = np.random.default_rng(2).integers(2, 50, (2, 8)).astype(np.int32)
    done |= _save(out, "model_garden_seq2seq_beam_search", seq2seq,
                  {"inputs": tf.TensorSpec([None, 8], tf.int32, name="inputs")},
                  {"inputs": source}, lambda m, x: dict(m(x)))
    return done | export_retinanet(out)


def export_retinanet(out: Path) -> dict:
    """RetinaNet (ResNet-18 FPN, 128 px, 4 classes) through Model Garden's own export module:
    its serving signature decodes a uint8 image batch and runs NMS."""
    import numpy as np
    import tensorflow as tf
    from official.core import exp_factory
    from official.vision.serving import detection

    params = exp_factory.get_exp_config("retinanet_resnetfpn_coco")
    model = params.task.model
    model.backbone.resnet.model_id = 18
    model.input_size, model.num_classes = [128, 128, 3], 4
    model.min_level, model.max_level = 3, 5
    model.decoder.fpn.num_filters = model.head.num_filters = 32
    model.head.num_convs = 2
    module = detection.DetectionModule(params, batch_size=1, input_image_size=[128, 128])
    signatures = module.get_inference_signatures({"image_tensor": "serving_default"})
    tf.saved_model.save(module, str(out / "model_garden_retinanet"), signatures=signatures)
    image = np.random.default_rng(3).integers(0, 255, (1, 128, 128, 3)).astype(np.uint8)
    np.savez(out / "model_garden_retinanet.npz", inputs=image)
    return {"model_garden_retinanet": {"tf": tf.__version__, "text": False}}


EXPORTERS = {"keras-hub": export_keras_hub, "tf-models": export_model_garden}


# --- the venvs and the conversions (run in the workbench's environment) --------------------


def ensure_venv(root: Path, name: str) -> Path:
    """The venv's python, creating the venv with the pinned versions when missing."""
    python = root / name / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(root / name)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *VENVS[name]], check=True)
    return python


def export(root: Path, name: str, out: Path, again: bool) -> dict:
    """The models the `name` venv exports into `out` (kept in `out/<name>.json`: a later run
    converts them again without exporting, unless `again`)."""
    record = out / f"{name}.json"
    if record.exists() and not again:
        return json.loads(record.read_text())
    python = ensure_venv(root, name)
    run = subprocess.run([str(python), str(HERE), "--export", name, "--out", str(out)],
                         capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ""})
    lines = [line for line in run.stdout.splitlines() if line.startswith("EXPORTED ")]
    if run.returncode or not lines:
        raise SystemExit(f"exporting with {name} failed:\n{run.stderr[-3000:]}")
    record.write_text(lines[-1].removeprefix("EXPORTED "))
    return json.loads(record.read_text())


def matches(want: dict, got: dict) -> tuple[bool, float]:
    """All outputs equal (ints) or close (floats, rtol/atol 1e-4); the largest difference."""
    import numpy as np

    worst, same = 0.0, True
    for key, value in want.items():
        a, b = np.asarray(value), np.asarray(got[key])
        if a.shape != b.shape:
            return False, float("inf")
        if a.dtype.kind == "f":
            worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)))
            same &= bool(np.allclose(a, b, rtol=1e-4, atol=1e-4))
        else:
            same &= bool(np.array_equal(a, b))
    return same, worst


def convert_row(name: str, info: dict, out: Path) -> dict:
    """Converts one SavedModel with TF-TRT's defaults; its table row."""
    import numpy as np
    import tensorflow as tf

    from workbench import trt_convert as trt
    from workbench.errors import WorkbenchError

    path = str(out / name)
    feeds = {k: tf.constant(v) for k, v in np.load(out / f"{name}.npz").items()}
    row = {"model": name, "tf": info["tf"], "dynamic": info["text"]}
    want = tf.saved_model.load(path).signatures["serving_default"](**feeds)
    start = time.perf_counter()
    try:
        converter = trt.TrtGraphConverterV2(input_saved_model_dir=path,
                                            use_dynamic_shape=info["text"])
        function = converter.convert()
        result = converter.report.result
        row |= {"nodes": result.total_nodes, "engines": len(result.engines),
                "converted": result.percent_converted}
        row["match"], row["max_diff"] = matches(want, function(**feeds))
        row["native"] = len(function.native_runs)  # engines that ran their native segment
        converter.build(lambda: [tuple(feeds.values())])
        with tempfile.TemporaryDirectory() as saved:
            converter.save(saved)
            reloaded = tf.saved_model.load(saved).signatures["serving_default"]
            row["reload_match"], _ = matches(want, reloaded(**feeds))
    except WorkbenchError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    row["seconds"] = time.perf_counter() - start
    return row


def print_table(rows: list[dict]) -> None:
    print(f"{'model':34} {'TF':7} {'nodes':>6} {'engines':>7} {'native':>6} {'conv %':>7} "
          f"{'match':>6} "
          f"{'max diff':>9} {'save/reload':>11} {'s':>6}")
    for row in rows:
        if "error" in row:
            print(f"{row['model']:34} {row['tf']:7} error: {row['error']}")
            continue
        print(f"{row['model']:34} {row['tf']:7} {row['nodes']:6} {row['engines']:7} "
              f"{row['native']:6} "
              f"{row['converted']:7.2f} {'yes' if row['match'] else 'NO':>6} "
              f"{row['max_diff']:9.1e} {'yes' if row['reload_match'] else 'NO':>11} "
              f"{row['seconds']:6.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venvs", type=Path, default=HERE.parent / ".third_party" / "venvs")
    parser.add_argument("--out", type=Path, default=HERE.parent / ".third_party" / "models")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--export-again", action="store_true",
                        help="export even when --out holds the models already")
    parser.add_argument("--export", choices=sorted(EXPORTERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.export:  # inside a library's venv
        print("EXPORTED " + json.dumps(EXPORTERS[args.export](args.out)))
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.getLogger("workbench").setLevel(logging.ERROR)  # convert()'s TF-TRT reports
    models: dict = {}
    for name in VENVS:
        models |= export(args.venvs, name, args.out, args.export_again)
    only = [name for name in args.only.split(",") if name]
    rows = [convert_row(name, info, args.out) for name, info in models.items()
            if not only or name in only]
    print_table(rows)
    record.write("third_party", [record.figure(
        f"{row['model']} (TF {row['tf']}): convert, run, save, reload",
        row["error"] if "error" in row else
        f"{row['engines']} engines, {row['converted']:.2f}% converted, "
        f"{'matches' if row['match'] else 'DIFFERS'} (max {row['max_diff']:.1e}), reload "
        f"{'matches' if row['reload_match'] else 'DIFFERS'}",
        "converts, matches, reloads", "error" not in row and row["match"]
        and row["reload_match"]) for row in rows])


if __name__ == "__main__":
    main()
