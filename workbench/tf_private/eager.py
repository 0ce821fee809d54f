"""The eager context: its registry of functions, and the device scope in force.

TF-TRT used `context.context()` for both: it removed its converted functions from the
process-wide registry (their names clash with a later conversion's) and read the device scope
to refuse a CPU one. TensorFlow exposes neither publicly.
"""

from __future__ import annotations

from collections.abc import Iterable


def _context() -> object:
    from tensorflow.python.eager import context

    return context.context()


def has_functions(names: Iterable[str]) -> bool:
    context = _context()
    return any(context.has_function(name) for name in names)


def remove_functions(names: Iterable[str]) -> None:
    """Removes those of `names` the registry holds."""
    context = _context()
    for name in names:
        if context.has_function(name):
            context.remove_function(name)


def device_scope() -> str:
    """The device of the enclosing `tf.device` scope, "" without one."""
    return _context().device_name or ""
