"""One TRTEngineOp at run time: its engine cache, engine selection and native fallback.

TF-TRT's kernel (trt_engine_op.cc) keeps, per engine op, an LRU cache bounded by
`maximum_cached_engines`. Implicit batch mode keys the cache by the input shapes an engine was
built for; an engine serves inputs whose batch is <= its batch and whose other dims are equal,
the compatible engine with the smallest batch winning. Explicit batch mode (dynamic shape) has
one engine holding every optimization profile; the first profile that accepts the input shapes
is used, and when none does the segment runs natively. A failed or refused build is remembered
in the cache as an empty entry, so it is not retried for the same shapes. Whenever no engine
runs, the native segment does, unless TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION is false.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench import environment
from workbench.engines.backends.base import Engine
from workbench.engines.profiles import Profile, ShapeSet
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.errors import WorkbenchError, first_line
from workbench.graph.nodes import numpy_dtype

logger = logging.getLogger("workbench.engines")

DISALLOWED = "User disallowed engine native segment execution"  # TF-TRT's words
MAX_RECORDED_FALLBACKS = 100


class NativeExecutionDisallowedError(WorkbenchError):
    """An engine could not run and the user disallowed the native segment (TF-TRT's abort)."""


# Raised inside a fallback-free engine call (hybrid_graph.engine_function) when no engine ran: the
# converted model reruns the call with that engine's fallback branch in the graph.
ENGINE_MISS = "workbench-engine-miss"


class EngineMissError(WorkbenchError):
    """A call compiled without the native fallback found no engine to run."""

    def __init__(self, engine: str):
        super().__init__(f"{ENGINE_MISS}[{engine}]")
        self.engine = engine


# Implicit batch: the input shapes an engine was built for; explicit: its profiles.
CacheKey = ShapeSet | tuple[Profile, ...]


@dataclass
class CacheEntry:
    """A cached engine, or None for a build that failed or was refused (not retried)."""

    engine: Engine | None
    reason: str = ""
    profiles: tuple[Profile, ...] = ()


@dataclass(frozen=True)
class NativeRun:
    """One call the native segment served instead of an engine, and why."""

    shapes: ShapeSet
    reason: str


@dataclass
class EngineOpStats:
    calls: int = 0
    engine_calls: int = 0
    native_calls: int = 0
    builds: int = 0
    failed_builds: int = 0
    compiled_calls: int = 0  # of the engine calls, those the compiled engine op served


class EngineCache:
    """TF-TRT's LRU engine cache: inserting beyond capacity evicts the least recently used."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise WorkbenchError(f"maximum_cached_engines must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[CacheKey, CacheEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[CacheKey]:
        """Keys from least to most recently used."""
        return list(self._entries)

    def get(self, key: CacheKey) -> CacheEntry:
        """The entry for `key`, marked most recently used."""
        self._entries.move_to_end(key)
        return self._entries[key]

    def put(self, key: CacheKey, entry: CacheEntry) -> list[CacheKey]:
        """Inserts `entry`; returns the keys it evicted."""
        self._entries[key] = entry
        self._entries.move_to_end(key)
        evicted = []
        while len(self._entries) > self.capacity:
            old, _ = self._entries.popitem(last=False)
            evicted.append(old)
        return evicted

    def items(self) -> list[tuple[CacheKey, CacheEntry]]:
        return list(self._entries.items())


@dataclass
class EngineOp:
    """Runs one segment: a cached engine when one fits, else builds one, else the native segment.

    `build_engine(request)` builds an engine for a `BuildRequest` with the op's settings (it
    exports the segment once and calls the backend; it raises on failure); `native(inputs)`
    runs the segment in TensorFlow. `output_dtypes` are the numpy dtypes of the segment's
    outputs; `settings` are the conversion's, as the engine op runs with them.
    """

    name: str
    build_engine: Callable[[BuildRequest], Engine]
    native: Callable[[list[np.ndarray]], list[np.ndarray]]
    output_dtypes: Sequence[str]
    settings: EngineSettings = field(default_factory=EngineSettings)
    profiles: tuple[Profile, ...] = ()
    calibration_data: tuple[tuple[np.ndarray, ...], ...] = ()
    native_runs: list[NativeRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stats = EngineOpStats()
        # Counters of the compiled engine op's sessions (native_op): calls served outside
        # try_engine, folded into the stats whenever they are read.
        self._native_counters: dict[int, tuple[Any, int]] = {}
        self.cache = EngineCache(self.settings.maximum_cached_engines)
        self._last: tuple[ShapeSet, Engine] | None = None  # the last shapes and the engine served
        # While collecting (start_collecting): the input shapes (profile generation) or
        # batches (calibration) recorded, the segment running natively, as TF-TRT's kernel
        # did in its profile-generation and calibration modes.
        self._shapes: list[ShapeSet] | None = None
        self._batches: list[tuple[np.ndarray, ...]] | None = None

    @property
    def collecting(self) -> bool:
        return self._shapes is not None or self._batches is not None

    def start_collecting(self, shapes: bool) -> None:
        """From now on, record each call's input shapes (`shapes`) or input batches and run
        the native segment, until `stop_collecting()`."""
        self._shapes, self._batches = ([], None) if shapes else (None, [])

    def stop_collecting(self) -> Collected:
        """The shapes and batches recorded since `start_collecting`; calls run engines again."""
        collected = (self._shapes or [], self._batches or [])
        self._shapes = self._batches = None
        return collected

    @property
    def ready_without_fallback(self) -> bool:
        """Built, with no failed or refused entry: calls need no native fallback branch (a
        later miss, e.g. new shapes, is caught and rerun with the branch)."""
        entries = self.cache.items()
        return (bool(entries) and all(e.engine is not None for _, e in entries)
                and not self.collecting)

    @property
    def stats(self) -> EngineOpStats:
        for ident, (counter, seen) in list(self._native_counters.items()):
            now = counter.calls()
            if now > seen:
                self._stats.calls += now - seen
                self._stats.engine_calls += now - seen
                self._stats.compiled_calls += now - seen
                self._native_counters[ident] = (counter, now)
        return self._stats

    def count_native_calls(self, counter: Any) -> None:
        """Adds a compiled engine op's session (`calls()`: calls served so far) to the stats."""
        if id(counter) not in self._native_counters:
            self._native_counters[id(counter)] = (counter, counter.calls())

    def call_counts(self) -> tuple[int, ...]:
        """The per-call counters, to undo a call that is rerun (builds are not undone)."""
        s = self.stats
        return s.calls, s.engine_calls, s.native_calls, s.compiled_calls, len(self.native_runs)

    def restore_counts(self, counts: tuple[int, ...]) -> None:
        s = self.stats
        s.calls, s.engine_calls, s.native_calls, s.compiled_calls, runs = counts
        del self.native_runs[runs:]

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        arrays = [np.asarray(x) for x in inputs]
        outputs = self.try_engine(*arrays)
        return outputs if outputs is not None else self._cast(self.native(arrays))

    def try_engine(self, *inputs: np.ndarray) -> list[np.ndarray] | None:
        """The engine's outputs, or None when the native segment must run (recorded with its
        reason; raises when the user disallowed native execution). The converted graph runs
        the native segment itself, so no TensorFlow call is nested inside this one."""
        arrays = [np.asarray(x) for x in inputs]
        shapes = tuple(x.shape for x in arrays)
        self._stats.calls += 1
        if self.collecting:
            self._collect(arrays, shapes)
            return None
        last = self._last
        if last is not None and last[0] == shapes:  # the common case: the same shapes again
            engine, reason = last[1], ""
        else:
            engine, reason = self.engine_for(shapes)
            self._last = (shapes, engine) if engine is not None else None
        if engine is not None:
            try:
                outputs = engine.run(arrays)
            except Exception as exc:  # TF-TRT retried any failed enqueue natively
                reason = f"engine {self.name} failed to run: {first_line(exc)}"
            else:
                self._stats.engine_calls += 1
                return self._cast(outputs)
        self.record_native(shapes, reason)
        return None

    # --- engine selection ---------------------------------------------------------------------

    def engine_for(self, shapes: ShapeSet) -> tuple[Engine | None, str]:
        """The engine serving these input shapes (building one if allowed), or None and why."""
        if self.settings.use_implicit_batch:
            return self._implicit_engine(shapes)
        return self._explicit_engine(shapes)

    def _implicit_engine(self, shapes: ShapeSet) -> tuple[Engine | None, str]:
        key = compatible_key(self.cache.keys(), shapes)
        if key is None:
            key = shapes
            if not self.settings.allow_build_at_runtime:
                reason = (f"found no engine in cache matching input shapes {_describe(shapes)}; "
                          "not building a new engine because allow_build_at_runtime=False")
                self.cache.put(key, CacheEntry(None, reason))
                return None, reason
            self._build_into_cache(key, max_batch_size=shapes[0][0] if shapes[0] else 1)
        entry = self.cache.get(key)
        return entry.engine, entry.reason

    def _explicit_engine(self, shapes: ShapeSet) -> tuple[Engine | None, str]:
        if not self.profiles:
            # build() was not called: the first input makes a Range profile with min = max.
            self.profiles = (Profile(shapes, shapes, shapes),)
        if self.profile_index(shapes) is None:
            return None, (f"no optimization profile of {self.name} accepts input shapes "
                          f"{_describe(shapes)} (profiles: "
                          f"{', '.join(p.describe() for p in self.profiles)})")
        key = self.profiles
        if key not in self.cache:
            if not self.settings.allow_build_at_runtime:
                reason = (f"found no engine in cache for profiles of {self.name}; not building "
                          "a new engine because allow_build_at_runtime=False")
                self.cache.put(key, CacheEntry(None, reason))
                return None, reason
            self._build_into_cache(key, profiles=self.profiles)
        entry = self.cache.get(key)
        return entry.engine, entry.reason

    def profile_index(self, shapes: ShapeSet) -> int | None:
        """The first optimization profile accepting these shapes (TF-TRT's GetProfileNumber)."""
        return next((i for i, p in enumerate(self.profiles) if p.accepts(shapes)), None)

    # --- building -----------------------------------------------------------------------------

    def build(self, shapes: ShapeSet | None = None) -> CacheEntry:
        """Builds the engine build() asks for: the profiles (explicit) or these shapes."""
        if self.settings.use_implicit_batch:
            if shapes is None:
                raise WorkbenchError(f"{self.name}: implicit batch engines need input shapes")
            key = compatible_key(self.cache.keys(), shapes)
            if key is None:
                key = shapes
                self._build_into_cache(key, max_batch_size=shapes[0][0] if shapes[0] else 1)
            return self.cache.get(key)
        if not self.profiles:
            if shapes is None:
                raise WorkbenchError(f"{self.name}: no profiles and no input shapes to build for")
            self.profiles = (Profile(shapes, shapes, shapes),)
        if self.profiles not in self.cache:
            self._build_into_cache(self.profiles, profiles=self.profiles)
        return self.cache.get(self.profiles)

    def _build_into_cache(self, key: CacheKey, max_batch_size: int | None = None,
                          profiles: tuple[Profile, ...] = ()) -> None:
        request = BuildRequest(max_batch_size, profiles, self.calibration_data)
        try:
            engine = self.build_engine(request)
        except Exception as exc:  # any build failure falls back natively (TF-TRT's rule)
            reason = f"engine creation for {self.name} failed: {first_line(exc)}"
            logger.warning("%s. The native segment will be used instead.", reason)
            self._stats.failed_builds += 1
            self.cache.put(key, CacheEntry(None, reason, profiles))
            return
        self._stats.builds += 1
        self._last = None
        evicted = self.cache.put(key, CacheEntry(engine, "", profiles))
        if evicted:
            logger.info("%s: engine cache full (%d), evicted %s", self.name,
                        self.cache.capacity, ", ".join(_describe(k) for k in evicted))

    def add_engine(self, key: CacheKey, engine: Engine) -> None:
        """Puts an already built engine (a deserialized one) into the cache."""
        self._last = None
        self.cache.put(key, CacheEntry(engine, "", key if not self.settings.use_implicit_batch
                                       else ()))

    def engines(self) -> list[tuple[CacheKey, Engine]]:
        """(cache key, engine) for every built engine, least recently used first."""
        return [(key, entry.engine) for key, entry in self.cache.items()
                if entry.engine is not None]

    # --- native execution ---------------------------------------------------------------------

    def record_native(self, shapes: ShapeSet, reason: str) -> None:
        """Records a native run and its reason; refused when the user disallows it."""
        if not environment.ALLOW_NATIVE_SEGMENT.read():
            raise NativeExecutionDisallowedError(
                f"{DISALLOWED} ({environment.ALLOW_NATIVE_SEGMENT.name}=false): "
                f"{reason}")
        self._stats.native_calls += 1
        if len(self.native_runs) < MAX_RECORDED_FALLBACKS:
            self.native_runs.append(NativeRun(shapes, reason))

    def _collect(self, arrays: list[np.ndarray], shapes: ShapeSet) -> None:
        if self._shapes is not None:
            self._shapes.append(shapes)
        if self._batches is not None:
            self._batches.append(tuple(np.array(x) for x in arrays))
        self._stats.native_calls += 1

    def _cast(self, outputs: Sequence[Any]) -> list[np.ndarray]:
        return [np.asarray(out).astype(dtype, copy=False)
                for out, dtype in zip(outputs, self._numpy_dtypes, strict=True)]

    @property
    def _numpy_dtypes(self) -> list[np.dtype]:
        if getattr(self, "_dtypes", None) is None:
            self._dtypes = [numpy_dtype(d) for d in self.output_dtypes]
        return self._dtypes

    @property
    def fallback_reasons(self) -> dict[str, int]:
        """Why the native segment ran, with counts (the first recorded runs)."""
        counts: dict[str, int] = {}
        for run in self.native_runs:
            counts[run.reason] = counts.get(run.reason, 0) + 1
        return counts


Collected = tuple[list[ShapeSet], list[tuple[np.ndarray, ...]]]  # see stop_collecting


@contextmanager
def collecting_natively(ops: Mapping[str, EngineOp], shapes: bool
                        ) -> Iterator[dict[str, Collected]]:
    """Inside the block every op runs its native segment and records its inputs' shapes
    (`shapes`) or batches; the dict holds what each recorded (by name) once the block ends."""
    collected: dict[str, Collected] = {}
    for op in ops.values():
        op.start_collecting(shapes)
    try:
        yield collected
    finally:
        collected.update({name: op.stop_collecting() for name, op in ops.items()})


def compatible_key(keys: Sequence[CacheKey], shapes: ShapeSet) -> ShapeSet | None:
    """Implicit batch: the cached input shapes serving `shapes` (same dims except a batch at
    least as large), the smallest batch first, as TF-TRT's GetEngineInputShapes chose."""
    fitting = [k for k in keys if _serves(k, shapes)]
    return min(fitting, key=lambda k: k[0][0]) if fitting else None


def _serves(key: ShapeSet, shapes: ShapeSet) -> bool:
    if len(key) != len(shapes):
        return False
    for cached, actual in zip(key, shapes, strict=True):
        if len(cached) != len(actual) or not cached:
            return False
        if actual[0] > cached[0] or cached[1:] != actual[1:]:
            return False
    return True



def _describe(key: CacheKey) -> str:
    if isinstance(key, tuple) and key and isinstance(key[0], Profile):
        return ", ".join(p.describe() for p in key)
    return "; ".join(str(list(s)) for s in key)

