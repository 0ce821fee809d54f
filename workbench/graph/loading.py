"""Loading models: SavedModel directories, Keras models and `.keras` files, frozen GraphDefs.

Every failure becomes a `ModelLoadError` with one line that says what is wrong and what to do,
instead of a traceback from deep inside TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import ModelLoadError, first_line
from workbench.lazy import tf
from workbench.words import counted

DEFAULT_TAGS = ("serve",)
DEFAULT_SIGNATURE_KEY = "serving_default"


@dataclass
class LoadedModel:
    """A model reduced to one signature function, plus where it came from.

    `function` is a TensorFlow ConcreteFunction whose graph TF-TRT would have converted;
    `input_names`/`output_names` are the signature's structured names, in call order.
    A SavedModel's function is loaded by `loader` on first use: preparing its graph (cold,
    graph/direct_freeze.py, or from the cache) does not need it, only native runs need
    TensorFlow's (slow) `tf.saved_model.load`.
    """

    source: str
    kind: str  # "saved_model" | "keras" | "graph_def"
    function: Any = field(repr=False, compare=False)  # a property below: loaded lazily
    signature_key: str = DEFAULT_SIGNATURE_KEY
    tags: tuple[str, ...] = DEFAULT_TAGS
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    keepalive: Any = field(default=None, repr=False, compare=False)  # keeps variables alive
    loader: Callable[[], tuple[Any, Any]] | None = field(default=None, repr=False,
                                                         compare=False)

    def __call__(self, *args: Any, **inputs: Any) -> dict[str, Any]:
        """Runs the model natively, like TF-TRT's converted function: inputs by position (in
        `input_names` order) or by name, numpy or tensors; returns the named output tensors."""
        if len(args) > len(self.input_names):
            raise ModelLoadError(f"the model takes {counted(len(self.input_names), 'input')} "
                                 f"({', '.join(self.input_names)}), got {len(args)}")
        inputs.update(zip(self.input_names, args, strict=False))
        missing = [name for name in self.input_names if name not in inputs]
        if missing:
            raise ModelLoadError(f"missing {counted(len(missing), 'input')} "
                                 f"({', '.join(missing)}); the model takes "
                                 f"{', '.join(self.input_names)}")
        tensors = [tf.convert_to_tensor(inputs[name]) for name in self.input_names]
        if self.kind == "saved_model":
            outputs = self.function(**dict(zip(self.input_names, tensors, strict=True)))
        else:
            outputs = self.function(*tensors)
        if not isinstance(outputs, dict):
            outputs = dict(zip(self.output_names, outputs, strict=True))
        return dict(outputs)


def _get_function(self: LoadedModel) -> Any:
    if self._function is None and self.loader is not None:
        self._function, self.keepalive = self.loader()
        self.loader = None
    return self._function


def _set_function(self: LoadedModel, value: Any) -> None:
    self._function = value


# Installed after @dataclass so its __init__ assigns through the property.
LoadedModel.function = property(_get_function, _set_function)  # type: ignore[assignment]


def load_model(
    model: Any,
    signature_key: str | None = None,
    tags: Sequence[str] | None = None,
    output_node_names: Sequence[str] | None = None,
    input_node_names: Sequence[str] | None = None,
) -> LoadedModel:
    """Loads `model`: a SavedModel dir, a `.keras` file, a Keras model, or a frozen `.pb`.

    A frozen GraphDef needs `output_node_names` (the TF1 workflow); its inputs default to its
    Placeholders. A `LoadedModel` (a rewritten one, say) is taken as it is.
    """
    if isinstance(model, LoadedModel):
        return model
    if _is_keras_model(model):
        return _from_keras(model, source=type(model).__name__)
    if not isinstance(model, (str, os.PathLike)):
        raise ModelLoadError(
            f"Cannot load a {type(model).__name__}: give a SavedModel directory, a .keras file, "
            "a Keras model or a frozen GraphDef .pb file."
        )
    path = Path(model)
    if not path.exists():
        raise ModelLoadError(f"No such path: {path}. Give a SavedModel directory, .keras or .pb.")
    if path.is_dir():
        return _from_saved_model(path, signature_key, tags)
    if path.suffix == ".keras":
        return _from_keras_file(path)
    if path.suffix in (".pb", ".pbtxt"):
        return _from_graph_def_file(path, output_node_names, input_node_names)
    raise ModelLoadError(
        f"{path} is a file of unknown kind: expected a SavedModel directory, a .keras file or "
        "a frozen GraphDef .pb file."
    )


# --- SavedModel ---------------------------------------------------------------------------


def read_saved_model_proto(path: Path) -> Any:
    """Parses `saved_model.pb` (or `.pbtxt`) without loading the model."""
    from google.protobuf import message, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    binary, text = path / "saved_model.pb", path / "saved_model.pbtxt"
    try:
        if binary.exists():
            proto.ParseFromString(binary.read_bytes())
        elif text.exists():
            text_format.Parse(text.read_text(), proto)
        else:
            raise ModelLoadError(
                f"{path} is not a SavedModel: it has no saved_model.pb. "
                "Point at the directory that tf.saved_model.save() wrote."
            )
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as exc:
        raise ModelLoadError(
            f"{path}/saved_model.pb is corrupt and cannot be parsed ({first_line(exc)}); "
            "re-export the model."
        ) from None
    if not proto.meta_graphs:
        raise ModelLoadError(f"{path}/saved_model.pb holds no MetaGraph; re-export the model.")
    return proto


def _from_saved_model(
    path: Path, signature_key: str | None, tags: Sequence[str] | None
) -> LoadedModel:
    tags = tuple(tags) if tags else DEFAULT_TAGS
    key = signature_key or DEFAULT_SIGNATURE_KEY
    meta_graph = find_meta_graph(read_saved_model_proto(path), tags, path)
    _reject_tftrt_graph(meta_graph, path)
    # TF stores an internal init signature next to the user's; it is not a choice to offer.
    signatures = sorted(k for k in meta_graph.signature_def if not k.startswith("__"))
    if key not in meta_graph.signature_def:
        raise ModelLoadError(
            f"Signature key {key!r} not found in {path}; it has: "
            f"{', '.join(signatures) or 'no signatures'}."
        )
    signature = meta_graph.signature_def[key]
    inputs, outputs = sorted(signature.inputs), sorted(signature.outputs)
    return LoadedModel(str(path), "saved_model", None, key, tags, inputs, outputs,
                       loader=lambda: _load_signature(path, tags, key))


def _load_signature(path: Path, tags: tuple[str, ...], key: str) -> tuple[Any, Any]:
    """TensorFlow's load of the SavedModel: (the signature's function, the loaded object)."""
    try:
        loaded = tf.saved_model.load(str(path), tags=list(tags))
        return loaded.signatures[key], loaded
    except Exception as exc:  # TF raises many types; the user needs one line.
        raise ModelLoadError(f"TensorFlow could not load {path}: {first_line(exc)}") from None


def find_meta_graph(proto: Any, tags: Sequence[str], path: Path) -> Any:
    """The MetaGraph of `proto` with exactly the tag set `tags`."""
    for meta_graph in proto.meta_graphs:
        if set(meta_graph.meta_info_def.tags) == set(tags):
            return meta_graph
    available = "; ".join(",".join(m.meta_info_def.tags) for m in proto.meta_graphs)
    raise ModelLoadError(
        f"No MetaGraph with tags {','.join(tags)!r} in {path}; available tag sets: {available}."
    )


# The manifest a converted model the workbench saved carries in its assets
# (engines/runtime/saving.py writes it).
WORKBENCH_MANIFEST = "workbench_converted.json"


def saved_by_workbench(path: Path) -> bool:
    """A converted model the workbench's save() wrote (its manifest in the assets)."""
    return (path / "assets" / WORKBENCH_MANIFEST).is_file()


def _reject_tftrt_graph(meta_graph: Any, path: Path) -> None:
    """An already converted model has TRTEngineOps, which TensorFlow >= 2.18 cannot load."""
    graph = meta_graph.graph_def
    ops = {n.op for n in graph.node}
    for fn in graph.library.function:
        ops.update(n.op for n in fn.node_def)
    if "TRTEngineOp" in ops and saved_by_workbench(path):
        raise ModelLoadError(
            f"{path} is a converted model the workbench saved (it contains TRTEngineOp "
            f"nodes): convert the original model instead, or reload this one with its engines "
            f"with workbench.load({str(path)!r}).")
    if "TRTEngineOp" in ops:
        raise ModelLoadError(
            f"{path} is already converted by TF-TRT (it contains TRTEngineOp nodes): convert "
            f"the original SavedModel instead, or inspect its engines with "
            f"workbench.inspect_tftrt({str(path)!r}) or `workbench inspect {path}`."
        )


# --- Keras --------------------------------------------------------------------------------


def _is_keras_model(obj: Any) -> bool:
    return any(cls.__name__ in ("Model", "Functional", "Sequential") for cls in type(obj).__mro__)


def _from_keras_file(path: Path) -> LoadedModel:
    import keras

    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as exc:
        raise ModelLoadError(f"Keras could not load {path}: {first_line(exc)}") from None
    return _from_keras(model, source=str(path))


def _from_keras(model: Any, source: str) -> LoadedModel:
    inputs = list(model.inputs or [])
    if not inputs:
        raise ModelLoadError(f"{source} has no defined inputs; build or call the model once.")
    names = [_keras_input_name(t, i) for i, t in enumerate(inputs)]
    specs = [tf.TensorSpec(t.shape, t.dtype, name=n) for t, n in zip(inputs, names, strict=False)]

    @tf.function(input_signature=specs)
    def serve(*args: Any) -> dict[str, Any]:
        outputs = model(list(args) if len(args) > 1 else args[0], training=False)
        if isinstance(outputs, dict):
            return dict(outputs)
        if isinstance(outputs, (list, tuple)):
            return {f"output_{i}": o for i, o in enumerate(outputs)}
        return {"output_0": outputs}

    function = serve.get_concrete_function()
    outputs = sorted(function.structured_outputs)
    return LoadedModel(source, "keras", function, DEFAULT_SIGNATURE_KEY, DEFAULT_TAGS, names,
                       outputs, model)


def _keras_input_name(tensor: Any, index: int) -> str:
    name = getattr(tensor, "name", "") or f"input_{index}"
    return name.split(":")[0].replace("/", "_")


# --- Frozen GraphDef ----------------------------------------------------------------------


def read_graph_def(path: Path) -> Any:
    """Parses a binary (`.pb`) or text (`.pbtxt`) GraphDef file."""
    from google.protobuf import message, text_format
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    try:
        if path.suffix == ".pbtxt":
            text_format.Parse(path.read_text(), graph_def)
        else:
            graph_def.ParseFromString(path.read_bytes())
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as exc:
        raise ModelLoadError(
            f"{path} is not a valid GraphDef ({first_line(exc)}); give a frozen graph "
            "written with tf.io.write_graph or SerializeToString()."
        ) from None
    if not graph_def.node:
        raise ModelLoadError(f"{path} holds an empty GraphDef.")
    return graph_def


def _from_graph_def_file(
    path: Path,
    output_node_names: Sequence[str] | None,
    input_node_names: Sequence[str] | None,
) -> LoadedModel:
    graph_def = read_graph_def(path)
    if not output_node_names:
        raise ModelLoadError(
            f"{path} is a frozen GraphDef: name its outputs with output_node_names "
            "(CLI: --outputs NAME[,NAME])."
        )
    names = {n.name: n for n in graph_def.node}
    missing = [n for n in [*output_node_names, *(input_node_names or [])]
               if n.split(":")[0] not in names]
    if missing:
        raise ModelLoadError(f"{path} has no node named {', '.join(missing)}.")
    inputs = list(input_node_names or [n.name for n in graph_def.node if n.op == "Placeholder"])
    function = _wrap_graph_def(graph_def, inputs, list(output_node_names), path)
    return LoadedModel(str(path), "graph_def", function, DEFAULT_SIGNATURE_KEY, DEFAULT_TAGS,
                       inputs, list(output_node_names))


def _wrap_graph_def(graph_def: Any, inputs: list[str], outputs: list[str], path: Path) -> Any:
    def _import() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    try:
        wrapped = tf.compat.v1.wrap_function(_import, [])
        graph = wrapped.graph
        return wrapped.prune(
            [graph.get_tensor_by_name(_tensor_name(n)) for n in inputs],
            [graph.get_tensor_by_name(_tensor_name(n)) for n in outputs],
        )
    except Exception as exc:
        raise ModelLoadError(f"TensorFlow could not import {path}: {first_line(exc)}") from None


def _tensor_name(name: str) -> str:
    return name if ":" in name else f"{name}:0"
