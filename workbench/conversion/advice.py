"""Advice on every TF-TRT knob, after Torch-TensorRT's dry run: what each setting would change.

From the session's cached clusterings, each setting below is converted for real (one candidate
test and clustering per mode, precision and denylist, cached; thresholds and engine limits are read
off a clustering) and compared with the current conversion:

- `use_dynamic_shape` flipped (with the Range profile strategy when turned on);
- each other precision family, only where an op rule differs by precision: FP16 splits every
  `Cast(x->float)` (x not half) in two, INT8 gives the quantization ops a converter; a graph with
  neither segments identically, so there is nothing to measure;
- the denylist: each denylisted op type taken off it, and each op type whose denylisting could
  remove an engine (an engine with fewer other effective nodes than the threshold) put on it;
- the engine limit (`max_engines`, TF_TRT_MAX_ALLOWED_ENGINES) raised to keep every segment;
- the model itself: the verified rewrites (conversion/rewrites/) whose pattern TF-TRT rejects
  here, applied to a copy of the model (`setting` "rewrites", no parameter changes: the
  rewritten model is written with `workbench rewrite`), converted by the same rules.

Gain, in this order: fewer nodes left to TensorFlow (top-level nodes outside engines), then fewer
engines, then a larger largest engine. Nodes left to TensorFlow, not the percentage, because a
setting can change the node total (FP16's split Casts, the Consts copied into each engine).
A setting that leaves more nodes to TensorFlow is advised only when it is a denylisting that
removes engines better than any `minimum_segment_size` could (fewer engines for fewer nodes
left to TensorFlow than every threshold of the current clustering); such trade-offs rank after
every strict gain. The threshold itself has its own recommendation (`recommend.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.conversion.candidates import REASON_EXCLUDED, REASON_IMPLICIT_BATCH
from workbench.conversion.ops import QUANTIZATION_OPS
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult
from workbench.conversion.rewrites import REWRITES, rewrites_for
from workbench.conversion.segmenter import NOOP_OPS, Segmentation
from workbench.conversion.session import ConversionSession
from workbench.graph.nodes import SINK, SOURCE, Graph
from workbench.words import counted

RANGE = "Range"  # TF-TRT's default strategy; ImplicitBatchModeCompatible is deprecated
MAX_DENYLIST_TRIALS = 8  # op types tried on the denylist: those emptying the most engines
NAMED_OPS = 3  # op types a reason names before "and N more"
# Op types never worth denylisting: weights, graph plumbing, or nothing to compute.
NOT_DENYLISTED = frozenset({"Const", "NoOp", *NOOP_OPS})


@dataclass(frozen=True)
class Advice:
    """One setting and what converting with it gives (measured, not estimated).

    `params` are the parameter changes that reproduce it (`replace(params, **advice.params)`);
    `native_nodes` the top-level nodes TensorFlow still runs; `trade_off` marks a setting that
    leaves more nodes to TensorFlow for fewer engines.
    """

    setting: str
    value: Any
    engines: int
    percent_converted: float
    largest_engine: int
    native_nodes: int
    why: str
    params: dict[str, Any] = field(default_factory=dict)
    trade_off: bool = False

    @property
    def value_text(self) -> str:
        """The value as a person writes it: `Cast, Shape` for a denylist, `(none)` if empty."""
        if isinstance(self.value, tuple):
            return ", ".join(self.value) or "(none)"
        return str(self.value)

    @property
    def value_words(self) -> str:
        """The value as the controls show it, for tables: a switch reads on/off (not True);
        `value_text` keeps `setting=True` pasteable in printed lines."""
        if isinstance(self.value, bool):
            return "on" if self.value else "off"
        return self.value_text

    def to_json(self) -> dict[str, Any]:
        """The entry of `convert --json`'s `"advice"` list."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"setting": self.setting, "value": value, "engines": self.engines,
                "percent_converted": self.percent_converted,
                "largest_engine": self.largest_engine, "native_nodes": self.native_nodes,
                "why": self.why, "trade_off": self.trade_off,
                "params": {k: list(v) if isinstance(v, tuple) else v
                           for k, v in self.params.items()}}


@dataclass(frozen=True)
class _Trial:
    """A setting to measure: its name and value, the parameter changes, the cause of a gain."""

    setting: str
    value: Any
    changes: dict[str, Any]
    cause: str  # how the current setting holds nodes back, e.g. "implicit batch"


def advise(session: ConversionSession, params: ConversionParams) -> list[Advice]:
    """Every setting that would convert better than `params`, largest gain first (see the
    module docstring for the gain); empty when nothing helps."""
    if params.minimum_segment_size == -1:
        return []  # the main graph is not converted; no setting but the threshold matters
    now = session.convert(params)
    found: list[Advice] = []
    for trial in _trials(session, params, now):
        changed = replace(params, **trial.changes)
        then = session.convert(changed)
        gain = _key(then) < _key(now)
        trade = (not gain and trial.setting == "denylist" and len(then.engines) < len(now.engines)
                 and then.engines and _beats_thresholds(session, params, then))
        if gain or trade:
            why = _why(session, params, changed, trial, now, then)
            found.append(_advice(trial, then, why, trade))
    rewrites = _rewrite_advice(session, params, now)
    if rewrites is not None:
        found.append(rewrites)
    # Strict gains by the gain order, then trade-offs, fewest engines first.
    return sorted(found, key=lambda a: (a.trade_off, (a.engines, a.native_nodes) if a.trade_off
                                        else (a.native_nodes, a.engines, -a.largest_engine)))


def _key(result: ConversionResult) -> tuple[int, int, int]:
    """Smaller is better: nodes left to TensorFlow, engines, minus the largest engine."""
    return (result.not_converted_top_level, len(result.engines), -_largest(result))


def _largest(result: ConversionResult) -> int:
    return max((e.native_node_count for e in result.engines), default=0)


def _advice(trial: _Trial, then: ConversionResult, why: str, trade: bool) -> Advice:
    return Advice(trial.setting, trial.value, len(then.engines), then.percent_converted,
                  _largest(then), then.not_converted_top_level, why, dict(trial.changes), trade)


# --- the settings worth measuring ------------------------------------------------------------

def _trials(session: ConversionSession, params: ConversionParams,
            now: ConversionResult) -> Iterable[_Trial]:
    dynamic = not params.use_dynamic_shape
    yield _Trial("use_dynamic_shape", dynamic,
                 {"use_dynamic_shape": dynamic,
                  "dynamic_shape_profile_strategy": RANGE if dynamic else None},
                 "implicit batch" if dynamic else "dynamic shape")
    yield from _precision_trials(session, params)
    yield from _denylist_trials(session, params, now)
    limit = _engine_limit_needed(session.segmentation(params), params)
    if limit is not None:
        yield _Trial("max_engines", limit, {"max_engines": limit},
                     f"the engine limit {params.max_engines}")


def _precision_trials(session: ConversionSession, params: ConversionParams
                      ) -> Iterable[_Trial]:
    """The other precision families whose op rules differ for this graph."""
    graph = session.prepared(params.precision_mode).graph
    has_quantization = any(node.op in QUANTIZATION_OPS for node in graph)
    splits_casts = any(_splits_in_fp16(node) for node in graph)
    for mode in ("FP32", "FP16", "INT8"):
        if mode == params.precision_mode:
            continue
        differs = has_quantization if "INT8" in (mode, params.precision_mode) else False
        differs |= splits_casts if "FP16" in (mode, params.precision_mode) else False
        if differs:
            yield _Trial("precision_mode", mode, {"precision_mode": mode}, params.precision_mode)


def precision_changes_segments(session: ConversionSession, params: ConversionParams) -> bool:
    """Whether another precision family segments this graph differently (an op rule differs by
    precision for one of its nodes); otherwise precision_mode only changes the engines' kernels."""
    return any(True for _ in _precision_trials(session, params))


def _splits_in_fp16(node: Any) -> bool:
    """A Cast to float from anything but half, which FP16 conversion splits in two."""
    return node.op == "Cast" and node.attr("DstT") == "float" and node.attr("SrcT") != "half"


def _denylist_trials(session: ConversionSession, params: ConversionParams,
                     now: ConversionResult) -> Iterable[_Trial]:
    for op in params.denylist:
        rest = tuple(d for d in params.denylist if d != op)
        yield _Trial("denylist", rest, {"denylist": rest}, "the denylist")
    for op in _engine_removing_ops(session.segmentation(params), now, params):
        more = tuple(sorted({*params.denylist, op}))
        yield _Trial("denylist", more, {"denylist": more}, op)


def _engine_removing_ops(segmentation: Segmentation, now: ConversionResult,
                         params: ConversionParams) -> list[str]:
    """Op types whose denylisting would leave some engine below the threshold: the only way a
    denylisting removes engines (the greedy clustering's own reshuffles aside). The ones that
    would empty the most engines first, at most MAX_DENYLIST_TRIALS (each is a clustering)."""
    if len(now.engines) < 2:
        return []  # denylisting cannot lower one engine but to none
    graph, threshold = segmentation.graph, max(params.minimum_segment_size, 1)
    emptied: Counter[str] = Counter()  # op type -> engines its denylisting would empty
    for engine in now.engines:
        ops = Counter(graph[name].op for name in engine.nodes)
        emptied.update(op for op, count in ops.items()
                       if op not in NOT_DENYLISTED and engine.effective_size - count < threshold)
    ranked = sorted(emptied.items(), key=lambda item: (-item[1], item[0]))
    return [op for op, _ in ranked[:MAX_DENYLIST_TRIALS]]


def _engine_limit_needed(segmentation: Segmentation, params: ConversionParams) -> int | None:
    """The engine limit that keeps every segment at this threshold, when the current one
    drops some."""
    threshold = max(params.minimum_segment_size, 1)
    eligible = sum(1 for s in segmentation.segments if s.effective_size >= threshold)
    return eligible if 0 < params.max_engines < eligible else None


def _beats_thresholds(session: ConversionSession, params: ConversionParams,
                      then: ConversionResult) -> bool:
    """No `minimum_segment_size` reaches `then`'s engines leaving as few nodes to TensorFlow."""
    largest = max((s.effective_size for s in session.segmentation(params).segments), default=0)
    for result in session.sweep(params, range(1, largest + 2)):
        if len(result.engines) <= len(then.engines) and \
                result.not_converted_top_level <= then.not_converted_top_level:
            return False
    return True


def _rewrite_advice(session: ConversionSession, params: ConversionParams,
                    now: ConversionResult) -> Advice | None:
    """The model with every rewrite applied (what `workbench rewrite` writes), as one setting,
    when one of the rewrites addresses an op rejected here and the rewritten model converts
    better; None otherwise. One rewritten model per session, whatever the parameters."""
    rejected = [n for n in now.unconverted if n.in_tftrt_report and n.reason != REASON_EXCLUDED]
    graph = session.prepared(params.precision_mode).graph
    if not rewrites_for(graph, [n.name for n in rejected], params.use_dynamic_shape):
        return None
    rewritten = session.rewritten()
    if not rewritten.rewrite_counts:
        return None
    then = rewritten.convert(params)
    if not _key(then) < _key(now):
        return None
    applied = tuple(rewritten.rewrite_counts)
    counts = ", ".join(f"{name} ({count})" for name, count in rewritten.rewrite_counts.items())
    ops = sorted({op for name in applied for op in REWRITES[name].ops} & {n.op for n in rejected})
    why = (f"TF-TRT rejects {', '.join(ops)} here; the model rewritten ({counts}; exact or "
           f"within stated bounds; `workbench rewrite MODEL -o DIR` writes it) gives "
           f"{_effect(now, then)}")
    return Advice("rewrites", applied, len(then.engines), then.percent_converted,
                  _largest(then), then.not_converted_top_level, why)


# --- the one-line reasons, from the actual non-conversion reasons ------------------------------

def _why(session: ConversionSession, params: ConversionParams, changed: ConversionParams,
         trial: _Trial, now: ConversionResult, then: ConversionResult) -> str:
    effect = _effect(now, then)
    if trial.setting == "max_engines":
        dropped = sum(1 for n in now.unconverted if "dropped by the engine limit" in n.reason)
        return (f"the engine limit TF_TRT_MAX_ALLOWED_ENGINES={params.max_engines} leaves "
                f"{counted(trial.value - params.max_engines, 'more segment')} ({dropped} nodes) "
                f"to TensorFlow; {effect}")
    if trial.setting == "denylist" and len(changed.denylist) > len(params.denylist):
        op = trial.cause
        return (f"denylisting {op} leaves its small engines to TensorFlow: {effect}; no "
                f"minimum_segment_size gets {counted(len(then.engines), 'engine')} with so few "
                "nodes left")
    unblocked = _unblocked(session.segmentation(params), session.segmentation(changed))
    if not unblocked:
        return f"{trial.cause} keeps segments apart: {effect}"
    return (f"{trial.cause} rejects {_things(unblocked)}: "
            f"{counted(sum(unblocked.values()), 'node')}; {effect}")


def _effect(now: ConversionResult, then: ConversionResult) -> str:
    parts = [f"{counted(len(now.engines), 'engine')} -> {len(then.engines)}"]
    moved = now.not_converted_top_level - then.not_converted_top_level
    if moved:
        parts.append(f"{abs(moved)} {'fewer' if moved > 0 else 'more'} nodes left to TensorFlow")
    if _largest(then) != _largest(now):
        parts.append(f"largest engine {_largest(now)} -> {_largest(then)} nodes")
    return ", ".join(parts)


def _unblocked(now: Segmentation, then: Segmentation) -> Counter[tuple[str, str]]:
    """(op, current reason) -> count, for the nodes rejected now that are candidates then."""
    graph: Graph = now.graph
    rejected_then = then.candidates.reasons
    counts: Counter[tuple[str, str]] = Counter()
    for name, reason in now.candidates.reasons.items():
        if name in (SOURCE, SINK) or reason == REASON_EXCLUDED or name in rejected_then:
            continue
        if name in then.graph.by_name:
            counts[(graph[name].op, reason)] += 1
    return counts


def _things(unblocked: Counter[tuple[str, str]]) -> str:
    """What the current setting rejects, in its words: the op types by node count, and the
    tensors of rank < 2 that implicit batch mode cannot take."""
    low_rank = sum(n for (_, reason), n in unblocked.items() if reason == REASON_IMPLICIT_BATCH)
    by_op: Counter[str] = Counter()
    for (op, reason), n in unblocked.items():
        if reason != REASON_IMPLICIT_BATCH:
            by_op[op] += n
    ops = [op for op, _ in sorted(by_op.items(), key=lambda item: (-item[1], item[0]))]
    names = ops[:NAMED_OPS]
    if len(ops) > NAMED_OPS:
        names.append(f"{counted(len(ops) - NAMED_OPS, 'more op type')}")
    if low_rank:
        names.append(f"{counted(low_rank, 'node')} with inputs of rank < 2")
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def advice_lines(advice: list[Advice]) -> list[str]:
    """The advice as text: a title, then one line per setting (the CLI's text output)."""
    if not advice:
        return ["Advice: no other setting converts more nodes or makes fewer engines."]
    lines = ["Advice (largest gain first):"]
    for a in advice:
        lines.append(f"  {a.setting}={a.value_text}: {counted(a.engines, 'engine')}, "
                     f"{a.percent_converted:.2f}% converted. {a.why}")
    return lines
