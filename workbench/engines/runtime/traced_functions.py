"""The converted graph as TensorFlow functions, and the call that falls back when an engine misses.

Each engine node calls its engine op with or without a native fallback branch (a `cond`,
`hybrid_graph.engine_function`). An engine already built is called directly, without the branch,
which halves the cost of a call; a call where such an engine finds no engine to run (new shapes)
raises, its counts are undone, and it reruns with that engine's branch, kept from then on. So
there is one function per set of engines called directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.engines.runtime.engine_op import ENGINE_MISS, EngineOp
from workbench.engines.runtime.hybrid_graph import engine_function, engines_in_loops, wrap_converted
from workbench.engines.runtime.runtime_graph import RuntimeGraph
from workbench.engines.weights import as_tensor
from workbench.hardware import release_free_memory
from workbench.lazy import tf

EVERY_ENGINE_WITH_FALLBACK: frozenset[str] = frozenset()


class ConvertedFunctions:
    """The converted graph's functions, one per set of engines called directly."""

    def __init__(self, graph: RuntimeGraph, ops: Mapping[str, EngineOp]):
        self._graph = graph
        self._ops = dict(ops)
        # None until the first call decides; engines that missed or whose build failed are
        # kept with the fallback branch for good.
        self.called_directly: frozenset[str] | None = None
        self.kept_with_fallback: set[str] = set()
        self._by_direct_engines: dict[frozenset[str], Any] = {}
        self._engine_functions: dict[tuple[str, bool], Any] = {}  # (engine, with fallback)
        self._weights: tuple[Any, dict[str, Any]] | None = None  # see _lifted_weights

    @property
    def captured_weights(self) -> dict[str, Any]:
        """Placeholder -> the eager tensor the functions capture for it (empty before one
        is made)."""
        return {} if self._weights is None else self._weights[1]

    def current(self) -> Any:
        """The function calling every engine built so far directly (decided again when
        more engines are built)."""
        if self.called_directly is None or self._more_engines_ready():
            self._decide_called_directly()
        return self.calling_directly(self.called_directly)

    def every_engine_with_fallback(self) -> Any:
        """The function with every fallback branch (what collecting ops need)."""
        return self.calling_directly(EVERY_ENGINE_WITH_FALLBACK)

    def call(self, tensors: list[Any]) -> list[Any]:
        """One call of `current()`, rerun with their branches when engines called directly
        found no engine to run."""
        while True:
            function = self.current()
            if not self.called_directly:
                return function(*tensors)
            counts = {name: op.call_counts() for name, op in self._ops.items()}
            try:
                return function(*tensors)
            except tf.errors.OpError as exc:
                missed = [n for n in self.called_directly
                          if f"{ENGINE_MISS}[{n}]" in str(exc.message)]
                if not missed:
                    raise
            for name, op in self._ops.items():
                op.restore_counts(counts[name])
            self.kept_with_fallback.update(missed)
            self.called_directly = self.called_directly - set(missed)

    def _more_engines_ready(self) -> bool:
        direct = self.called_directly or frozenset()
        if len(direct) + len(self.kept_with_fallback) == len(self._ops):
            return False  # every engine decided (the common case, checked on every call)
        return any(op.ready_without_fallback for name, op in self._ops.items()
                   if name not in direct and name not in self.kept_with_fallback)

    def _decide_called_directly(self) -> None:
        for name, op in self._ops.items():
            if not op.ready_without_fallback and len(op.cache):  # failed or refused: for good
                self.kept_with_fallback.add(name)
        self.called_directly = frozenset(
            name for name, op in self._ops.items()
            if op.ready_without_fallback and name not in self.kept_with_fallback)

    def calling_directly(self, direct: frozenset[str]) -> Any:
        """The function calling the engines `direct` without their fallback branch; kept
        with the one calling none directly."""
        if direct not in self._by_direct_engines:
            function = self._made(direct)
            self._by_direct_engines = {k: f for k, f in self._by_direct_engines.items()
                                       if k == EVERY_ENGINE_WITH_FALLBACK}
            self._by_direct_engines[direct] = function
        return self._by_direct_engines[direct]

    def _made(self, direct: frozenset[str]) -> Any:
        graph = self._graph
        lifted, weights = self._lifted_weights()  # the converted GraphDef, no weights
        in_loops = self._engines_never_inlined(lifted)
        functions = {segment.engine.name: self._engine_function(
            segment, direct, inline=segment.engine.name not in in_loops)
            for segment in graph.segments}
        return wrap_converted(lifted, graph.input_tensors, graph.feed_specs(),
                              graph.output_tensors, functions, captured=weights)

    def _engines_never_inlined(self, lifted: Any) -> set[str]:
        """Engines in a loop, and those inside a function (which may run inside a loop
        wherever it is called)."""
        return engines_in_loops(lifted) | {
            node.name for function in lifted.library.function
            for node in function.node_def if node.name in self._ops}

    def _engine_function(self, segment: Any, direct: frozenset[str], inline: bool) -> Any:
        name = segment.engine.name
        key = (name, name not in direct)
        if key not in self._engine_functions:
            self._engine_functions[key] = engine_function(
                self._ops[name], segment, inline=inline, fallback=key[1])
        return self._engine_functions[key]

    def _lifted_weights(self) -> tuple[Any, dict[str, Any]]:
        """The converted GraphDef with its large weights as Placeholders, and the weights as
        eager tensors for the functions to capture (made once, shared by them)."""
        if self._weights is None:
            lifted = self._graph.lifted_converted()
            protos = lifted.weights  # each let go once it is a tensor (a saved model's own)
            self._weights = lifted.graph_def, {
                name: as_tensor(protos.pop(name)) for name in list(protos)}
            del lifted
            release_free_memory()  # each weight's bytes, read to make its tensor
            self._graph.release_converted()  # its weights are the tensors now
        return self._weights
