"""Generated inputs for a conversion session: random arrays matching its signature, and valid
encoded images for string inputs the graph decodes (`encoded_inputs`).

The checks (validation, the conversion check, TensorRT's verdicts), the TF-TRT-compatible
facade's `build()` and the app feed these when the user gives no inputs of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from workbench.checks.encoded_inputs import encoded_images, image_input, string_input_error
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, Node

# random_inputs: unknown non-batch dims (sequence lengths, image sizes) get this size; integer
# inputs draw from [0, _INT_HIGH) unless an embedding table they index is smaller.
DEFAULT_OTHER_DIM = 16
_INT_HIGH = 100
# Inputs whose name says they are masks take 0/1 (BERT's input_mask, attention_mask).
_BINARY_NAME_HINTS = ("mask",)
# Gathers whose input 1 holds indices into the table in input 0.
_GATHER_OPS = frozenset({"GatherV2", "Gather", "ResourceGather"})
# Their integer outputs depend on a tensor's shape, not its values: they carry no index values.
_SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
_INDEX_SEARCH_DEPTH = 6


def random_inputs(
    session: ConversionSession,
    batch_size: int = 1,
    seed: int = 0,
    *,
    other_dim: int = DEFAULT_OTHER_DIM,
) -> dict[str, np.ndarray]:
    """Random inputs matching the signature: input name -> array.

    Unknown dims: the first becomes `batch_size`, the others `other_dim`. Floats are uniform
    in [0, 1); integers in [0, 100), narrowed to the smallest embedding table they index (so
    ids never fall outside a vocabulary), or 0/1 for masks; uint8 covers [0, 256).
    """
    if batch_size < 1 or other_dim < 1:
        raise WorkbenchError("batch_size and other_dim must be >= 1")
    rng = np.random.default_rng(seed)
    prepared = session.prepared("FP32")
    tensors = session.optimized.input_specs
    arrays = {}
    for name, node_name, tensor in zip(
        session.loaded.input_names, session.optimized.input_nodes, tensors, strict=True
    ):
        shape = _concrete_shape(tensor.shape, batch_size, other_dim)
        dtype = np.dtype(tensor.dtype.as_numpy_dtype)
        if tensor.dtype.name == "string":  # strings: encoded images where the graph decodes them
            use = image_input(prepared.graph, prepared.graph_def.library, node_name)
            if use is None:
                raise string_input_error(prepared.graph, prepared.graph_def.library,
                                         node_name, name)
            arrays[name] = encoded_images(rng, shape, use)
            continue
        arrays[name] = _random_array(rng, name, shape, dtype, prepared.graph, node_name)
    return arrays


def generated_input_notes(session: ConversionSession) -> list[str]:
    """What `random_inputs` generates beyond random numbers (images for string inputs)."""
    prepared = session.prepared("FP32")
    notes = []
    for name, node_name, tensor in zip(session.loaded.input_names,
                                       session.optimized.input_nodes,
                                       session.optimized.input_specs, strict=True):
        if tensor.dtype.name == "string":
            use = image_input(prepared.graph, prepared.graph_def.library, node_name)
            if use is not None:
                notes.append(use.describe(name))
    return notes


def generated_input_sets(session: ConversionSession, names: Sequence[str],
                         batch_sizes: Sequence[int] = (1, 8)) -> list[list[Any]]:
    """One random input set per batch size, in signature order (`random_inputs`, seeded by the
    batch size)."""
    return [[arrays[n] for n in names]
            for arrays in (random_inputs(session, b, seed=b) for b in batch_sizes)]


def _concrete_shape(shape: Any, batch_size: int, other_dim: int) -> tuple[int, ...]:
    if shape.rank is None:
        raise WorkbenchError("an input of unknown rank cannot be generated; pass inputs")
    dims = []
    for axis, dim in enumerate(shape.as_list()):
        dims.append(dim if dim is not None else batch_size if axis == 0 else other_dim)
    return tuple(dims)


def _random_array(rng: np.random.Generator, name: str, shape: tuple[int, ...],
                  dtype: np.dtype, graph: Graph, node_name: str) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.floating):
        return rng.random(shape).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, _int_high(name, dtype, graph, node_name), shape).astype(dtype)
    raise WorkbenchError(f"cannot generate input {name!r} of dtype {dtype}; pass inputs")


def _int_high(name: str, dtype: np.dtype, graph: Graph, node_name: str) -> int:
    if any(hint in name.lower() for hint in _BINARY_NAME_HINTS):
        return 2
    high = 256 if dtype == np.uint8 else _INT_HIGH
    return min([high, *_gathered_table_sizes(graph, node_name)])


def _gathered_table_sizes(graph: Graph, start: str) -> list[int]:
    """Rows of every table indexed by values flowing from `start` through integer tensors."""
    sizes, frontier, seen = [], [start], {start}
    for _ in range(_INDEX_SEARCH_DEPTH):
        following = []
        for name in frontier:
            for consumer, index in graph.consumers.get(name, []):
                if consumer.op in _GATHER_OPS and index == 1:
                    table = graph.output_spec(consumer.inputs[0])
                    if table is not None and table.shape and table.shape[0] > 0:
                        sizes.append(table.shape[0])
                elif _carries_ints(consumer) and consumer.name not in seen:
                    seen.add(consumer.name)
                    following.append(consumer.name)
        frontier = following
    return sizes


def _carries_ints(node: Node) -> bool:
    if node.op in _SHAPE_OPS or not node.output_specs:
        return False
    return node.output_specs[0].dtype.startswith(("int", "uint"))
