"""Device memory for the TensorRT engines' inputs and outputs, through cuda-python's runtime
bindings (cudaMalloc, cudaMemcpy, cudaFree); imported only where a GPU runs an engine."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.engines.backends.base import EngineBuildError


def cudart_call(function: str, *args: Any) -> Any:
    from cuda.bindings import runtime as cudart

    error, *result = getattr(cudart, function)(*args)
    if int(error) != 0:
        raise EngineBuildError(f"CUDA {function} failed: {error}")
    return result[0] if result else None


class DeviceBuffer:
    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.pointer = int(cudart_call("cudaMalloc", max(nbytes, 1)))

    @classmethod
    def empty(cls, nbytes: int) -> DeviceBuffer:
        return cls(nbytes)

    @classmethod
    def of(cls, array: np.ndarray) -> DeviceBuffer:
        from cuda.bindings import runtime as cudart

        array = np.ascontiguousarray(array)
        buffer = cls(array.nbytes)
        cudart_call("cudaMemcpy", buffer.pointer, array.ctypes.data, array.nbytes,
                     cudart.cudaMemcpyKind.cudaMemcpyHostToDevice)
        return buffer

    def copy_to(self, out: np.ndarray) -> None:
        from cuda.bindings import runtime as cudart

        cudart_call("cudaMemcpy", out.ctypes.data, self.pointer, out.nbytes,
                     cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost)

    def __del__(self) -> None:
        try:
            cudart_call("cudaFree", self.pointer)
        except Exception:  # interpreter shutdown: the driver frees it anyway
            pass
