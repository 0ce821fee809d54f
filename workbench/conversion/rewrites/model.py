"""A model with the rewrites applied: an ordinary TensorFlow model with the same signature.

The signature function is frozen (weights become Consts, as TF-TRT's own conversion does),
rewritten, and wrapped again: `rewrite_model` gives a `LoadedModel` any conversion session
opens like the original, and `save_rewritten` writes it as a SavedModel that plain TensorFlow
(and TF-TRT) load.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.conversion.rewrites import RewrittenGraph, rewrite_graph
from workbench.errors import ModelLoadError, WorkbenchError, first_line
from workbench.graph.freeze import FrozenGraph, freeze_function
from workbench.graph.loading import LoadedModel
from workbench.lazy import tf


@dataclass
class RewrittenModel:
    """The rewritten model and how many matches each rewrite changed."""

    model: LoadedModel
    counts: dict[str, int]


def freeze(loaded: LoadedModel) -> FrozenGraph:
    """`loaded`'s signature function frozen with its real weights (TensorFlow's freezing)."""
    try:
        return freeze_function(loaded.function, fast=False, signature=loaded.signature_key)
    except WorkbenchError:
        raise
    except Exception as exc:  # TensorFlow's freezing raises many types
        raise ModelLoadError(f"Could not freeze {loaded.source}: {first_line(exc)}") from None


def rewrite_model(loaded: LoadedModel, only: Iterable[str] | None = None,
                  frozen: FrozenGraph | None = None) -> RewrittenModel:
    """`loaded`'s signature function frozen and rewritten (`only`: the rewrites to apply);
    `frozen`, when given, is `freeze(loaded)` done before."""
    frozen = frozen or freeze(loaded)
    input_names = [name.split(":")[0] for name in frozen.inputs]
    if sorted(input_names) != sorted(loaded.input_names):
        raise WorkbenchError(f"{loaded.source}: the frozen signature's inputs "
                             f"{', '.join(input_names)} are not named as its inputs "
                             f"{', '.join(loaded.input_names)}; rewrite a SavedModel instead")
    rewritten = rewrite_graph(frozen.graph_def, frozen.inputs, frozen.outputs, only)
    function = wrap(rewritten, frozen.inputs, frozen.outputs)
    names = ",".join(rewritten.counts) or "nothing to rewrite"
    # The wrapped function takes its inputs in the frozen graph's order, and a graph_def
    # LoadedModel is called positionally in `input_names` order: that order, then.
    model = LoadedModel(f"{loaded.source} (rewritten: {names})", "graph_def", function,
                        loaded.signature_key, loaded.tags, input_names,
                        list(loaded.output_names))
    return RewrittenModel(model, rewritten.counts)


def wrap(rewritten: RewrittenGraph, inputs: list[str], outputs: list[str]) -> Any:
    """The rewritten GraphDef as a function of its input tensors returning its outputs."""
    graph_def = rewritten.graph_def

    def _import() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    graph = wrapped.graph
    return wrapped.prune([graph.get_tensor_by_name(name) for name in inputs],
                         [graph.get_tensor_by_name(name) for name in outputs])


def save_rewritten(model: LoadedModel, directory: str | Path) -> Path:
    """Writes a rewritten model (`RewrittenModel.model`) as a SavedModel with the original's
    signature key, input names and output names (weights are Consts in its graph)."""
    function = model.function
    specs = [tf.TensorSpec(t.shape, t.dtype, name=name)
             for t, name in zip(function.inputs, model.input_names, strict=True)]
    output_names = list(model.output_names)

    def serve(*args: Any) -> dict[str, Any]:
        return dict(zip(output_names, function(*args), strict=True))

    module = tf.Module()
    module.serve = tf.function(serve, input_signature=specs)
    directory = Path(directory)
    try:
        # Inference only, its weights frozen: custom gradients (keras-hub's) are not saved,
        # and a frozen graph's gradient captures would refuse to save.
        tf.saved_model.save(module, str(directory),
                            signatures={model.signature_key: module.serve},
                            options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
    except Exception as exc:  # TensorFlow raises many types
        raise WorkbenchError(f"could not write the rewritten model to {directory}: "
                             f"{first_line(exc)}") from None
    return directory
