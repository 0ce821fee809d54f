"""A disk cache of prepared graphs, so reopening a model skips freezing and Grappler.

An entry is keyed by everything that determines `optimize`'s result: the model files' contents
(hashed, not sizes or mtimes), the signature and tags (or a frozen graph's named inputs and
outputs), the TensorFlow version, `PREPARATION_VERSION` and the preparation settings (the
device prepared for among them: a GPU's compute capability or the CPU). In-memory
Keras models have no files to hash and are never cached. A SavedModel's variable data shards
are not read: `variables.index`, which is hashed, holds a CRC32C of every tensor in them, and
TensorFlow refuses to restore bytes that do not match it; so hashing the index (plus the
shards' sizes) keys the weights at a fraction of the cost (VGG16: 528 MB not read).

One directory per entry: `graph.pb` (the optimized GraphDef), `shapes.json` (its inferred
static shapes: a fresh process's first Grappler shape inference costs about a second) and
`entry.json` (key, fetches, nodes, CRC32s, sizes, times). Entries are written to a temporary
directory and renamed into place; a partial, corrupt or foreign entry is removed and rebuilt,
never trusted. The cache is capped in bytes and evicts the least recently used entries first
(a hit only touches its directory's mtime).

`WORKBENCH_CACHE_DIR` picks the directory (`off` disables the cache); the default is
`$XDG_CACHE_HOME/tftrt-workbench` or `~/.cache/tftrt-workbench`. `WORKBENCH_CACHE_MAX_BYTES`
sets the cap (default 2 GiB).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from workbench import environment
from workbench.durable_files import atomic_write
from workbench.graph.gpu import CPU, PreparationTarget, preparation_target, tf32_enabled
from workbench.graph.loading import LoadedModel
from workbench.graph.nodes import TensorSpec
from workbench.graph.prepare import PREPARATION_VERSION, OptimizedGraph, fp32_shapes, optimize
from workbench.graph.wire import write_graph_def
from workbench.tf_compat import tensorflow_version

DISABLED = ("off", "0", "false", "none")
GRAPH_FILE, ENTRY_FILE, SHAPES_FILE = "graph.pb", "entry.json", "shapes.json"
CHUNK = 8 << 20  # hashing reads this much at a time


def cache_dir() -> Path | None:
    """The cache directory, or None when the cache is switched off."""
    configured = environment.CACHE_DIR.read()
    if configured:
        return None if configured.lower() in DISABLED else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tftrt-workbench"


def max_bytes() -> int:
    return environment.CACHE_MAX_BYTES.read()


def cached_optimize(loaded: LoadedModel, disable_non_trt_optimizers: bool = False,
                    use_cache: bool = True, fast_freeze: bool = True,
                    target: PreparationTarget | str | None = None,
                    keep_variables: bool = False) -> OptimizedGraph:
    """`optimize`, read from the cache when an entry matches, stored there otherwise."""
    target = preparation_target(target)
    root = cache_dir() if use_cache else None
    start = time.perf_counter()
    key = model_key(loaded, disable_non_trt_optimizers, fast_freeze, target,
                    keep_variables) if root else None
    if root is None or key is None:
        return optimize(loaded, disable_non_trt_optimizers, fast_freeze, target, keep_variables)
    hash_s = time.perf_counter() - start
    hit = read_entry(root, key)
    if hit is not None:
        hit.timings = {"hash_s": hash_s, "cache_read_s": time.perf_counter() - start - hash_s}
        hit.target = target
        return hit
    optimized = optimize(loaded, disable_non_trt_optimizers, fast_freeze, target, keep_variables)
    optimized.timings["hash_s"] = hash_s
    fp32_shapes(optimized)  # finish() needs them next; stored with the graph
    start = time.perf_counter()
    write_entry(root, key, optimized)
    optimized.timings["cache_write_s"] = time.perf_counter() - start
    return optimized


# --- keys ---------------------------------------------------------------------------------


def model_key(loaded: LoadedModel, disable_non_trt_optimizers: bool,
              fast_freeze: bool = True, target: PreparationTarget | None = None,
              keep_variables: bool = False) -> str | None:
    """The entry key for `loaded`, or None when it has no files to hash (in-memory Keras)."""
    path = Path(loaded.source)
    files = model_files(path) if loaded.kind in ("saved_model", "keras", "graph_def") else None
    if files is None:
        return None
    digest = hashlib.blake2b(digest_size=20)
    settings = {
            "preparation": PREPARATION_VERSION,
            "tensorflow": tensorflow_version(),
        "kind": loaded.kind,
        "signature_key": loaded.signature_key,
        "tags": sorted(loaded.tags),
        "inputs": loaded.input_names,
        "outputs": loaded.output_names,
        "disable_non_trt_optimizers": disable_non_trt_optimizers,
        "fast_freeze": fast_freeze,  # the same graph either way, but a separate entry
        **({"keep_variables": True} if keep_variables else {}),  # old keys stay valid
        "prepare_for": (target or CPU).key,  # the GPU's compute capability, or "cpu"
        # The layout optimizer keeps NHWC on Ampere+ only while TensorFloat-32 is on.
        "tf32": tf32_enabled() if (target or CPU).is_gpu else None,
    }
    digest.update(json.dumps(settings, sort_keys=True).encode())
    _hash_files(digest, path, files)
    return digest.hexdigest()


def content_key(path: str | os.PathLike) -> str | None:
    """A digest of a model's files alone (SavedModel directory, `.keras` or `.pb` file), hashed
    as `model_key` hashes them; None when `path` is neither a directory nor a file. It needs no
    TensorFlow, so a process that only schedules work (the tuner's driver) can key a model."""
    path = Path(path)
    files = model_files(path)
    if files is None:
        return None
    digest = hashlib.blake2b(digest_size=20)
    _hash_files(digest, path, files)
    return digest.hexdigest()


def model_files(path: Path) -> list[Path] | None:
    """The files that make up a model: every file of a directory, or the file itself."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if path.is_file():
        return [path]
    return None


def _hash_files(digest: Any, path: Path, files: list[Path]) -> None:
    for file in files:
        digest.update(str(file.relative_to(path) if file != path else file.name).encode())
        if _is_variable_shard(file):
            digest.update(str(file.stat().st_size).encode())  # contents: see the module doc
        else:
            digest.update(_file_digest(file))


def _is_variable_shard(file: Path) -> bool:
    return file.parent.name == "variables" and ".data-" in file.name


def _file_digest(path: Path) -> bytes:
    digest = hashlib.blake2b(digest_size=20)
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.digest()


# --- entries ------------------------------------------------------------------------------


def read_entry(root: Path, key: str) -> OptimizedGraph | None:
    """The cached graph for `key`; a damaged or foreign entry is removed and None returned."""
    entry = root / key
    if not entry.is_dir():
        return None
    try:
        meta = json.loads((entry / ENTRY_FILE).read_text())
        shapes = (entry / SHAPES_FILE).read_bytes()
        if (meta["key"] != key or meta["preparation"] != PREPARATION_VERSION
                or meta["tensorflow"] != tensorflow_version()
                or meta["shapes_crc32"] != zlib.crc32(shapes)):
            raise ValueError("foreign or damaged entry")
        graph_def = _read_graph_def(entry / GRAPH_FILE, meta["graph_bytes"],
                                    meta["graph_crc32"])
        optimized = OptimizedGraph(graph_def=graph_def,
                                   fetches=list(meta["fetches"]),
                                   input_nodes=list(meta["input_nodes"]),
                                   output_nodes=list(meta["output_nodes"]), from_cache=True,
                                   fp32_shapes=_specs_from_json(shapes))
    except (OSError, ValueError, KeyError, TypeError):
        shutil.rmtree(entry, ignore_errors=True)
        return None
    # The directory's mtime is its last use, for eviction's order (no rewrite, no fsync). An
    # explicit time: the kernel stamps files from a coarse clock (milliseconds), which could
    # tie this hit with an entry written just before it.
    try:
        now = time.time_ns()
        os.utime(entry, ns=(now, now))
    except OSError:  # another process may be replacing the entry
        pass
    return optimized


def _read_graph_def(path: Path, size: int, crc32: int) -> Any:
    """The stored GraphDef, checked against its size and CRC; ValueError when damaged.

    The file is mapped rather than read: a copy of VGG16's 550 MB costs about 0.5 s and the
    peak memory of that copy (the parser makes its own).
    """
    from google.protobuf import message
    from tensorflow.core.framework import graph_pb2

    with path.open("rb") as stream, mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if len(data) != size or zlib.crc32(data) != crc32:
            raise ValueError("damaged graph")
        graph_def = graph_pb2.GraphDef()
        with memoryview(data) as view:
            try:
                graph_def.ParseFromString(view)
            except message.DecodeError as exc:
                raise ValueError(str(exc)) from None
    return graph_def


def _specs_to_json(specs: dict[str, list[TensorSpec]]) -> bytes:
    return json.dumps({name: [[s.dtype, s.shape] for s in outputs]
                       for name, outputs in specs.items()}).encode()


def _specs_from_json(data: bytes) -> dict[str, list[TensorSpec]]:
    return {name: [TensorSpec(dtype, None if shape is None else tuple(shape))
                   for dtype, shape in outputs]
            for name, outputs in json.loads(data).items()}


def write_entry(root: Path, key: str, optimized: OptimizedGraph) -> None:
    """Stores `optimized` under `key` (atomically), then evicts down to the size cap.

    A full disk or unwritable directory only costs the next open its speed-up, so it is
    ignored.
    """
    shapes = _specs_to_json(fp32_shapes(optimized))
    cap = max_bytes()
    staging = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        with (staging / GRAPH_FILE).open("wb") as out:
            graph_bytes, graph_crc32 = write_graph_def(optimized.graph_def, out)
        if graph_bytes + len(shapes) > cap:
            raise OSError("the graph alone is above the cache's cap")
        (staging / SHAPES_FILE).write_bytes(shapes)
        _write_json(staging / ENTRY_FILE, {
            "key": key,
        "preparation": PREPARATION_VERSION,
        "tensorflow": tensorflow_version(),
            "fetches": optimized.fetches,
            "input_nodes": optimized.input_nodes,
            "output_nodes": optimized.output_nodes,
            "graph_bytes": graph_bytes,
            "graph_crc32": graph_crc32,  # 4x faster than blake2b; guards against damage
            "shapes_crc32": zlib.crc32(shapes),
            "timings": optimized.timings,
            "created": time.time(),
        })
        shutil.rmtree(root / key, ignore_errors=True)
        staging.rename(root / key)
    except OSError:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        return
    evict(root, cap)


def evict(root: Path, cap: int) -> list[str]:
    """Removes least recently used entries (oldest directory mtime) until the cache holds at
    most `cap` bytes; also clears entries without an `entry.json` (partial writes). Returns
    removed keys."""
    entries = []
    removed = []
    for entry in root.iterdir():
        if not entry.is_dir():
            continue
        try:
            if not (entry / ENTRY_FILE).is_file():
                raise FileNotFoundError(entry / ENTRY_FILE)
            last_used = entry.stat().st_mtime  # set by read_entry on every hit
        except OSError:
            if not entry.name.startswith(".tmp-") or _stale(entry):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry.name)
            continue
        try:
            size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        except OSError:  # another process removed it meanwhile
            continue
        entries.append((last_used, size, entry))
    total = sum(size for _, size, _ in entries)
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= cap:
            break
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
        total -= size
    return removed


def _stale(staging: Path, age_s: float = 3600.0) -> bool:
    """A staging directory another process may still be writing is left alone for an hour."""
    try:
        return time.time() - staging.stat().st_mtime > age_s
    except OSError:
        return False


def _write_json(path: Path, value: dict) -> None:
    atomic_write(path, json.dumps(value, indent=1).encode())
