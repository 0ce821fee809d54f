"""The converter registry: op type -> validation rule (docs/tftrt-behaviour.md#op-rules), TensorRT
8.6 assumed.

Each family module exports `RULES`; they are merged here. With TRT 8.6 every version-gated
converter (>= 7.1.3, >= 8.2, EfficientNMS) is registered.
"""

from __future__ import annotations

from workbench.conversion.ops import (
    binary,
    conv,
    matmul,
    misc,
    nms,
    normalization,
    pooling,
    quantization,
    reduction,
    selection,
    shape,
    slicing,
    unary,
)
from workbench.conversion.ops.rule import Check
from workbench.errors import merge_registry

_FAMILIES = (unary, binary, conv, pooling, normalization, matmul, shape, slicing, reduction,
             selection, nms, quantization, misc)


REGISTRY: dict[str, Check] = merge_registry("op rules", (f.RULES for f in _FAMILIES))
QUANTIZATION_OPS = frozenset(quantization.QUANTIZATION_OPS)
