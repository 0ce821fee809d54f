"""TensorFlow's v1 control flow in a prepared graph: loop frames and their back edges.

Freezing lowers `While`/`If` to `Enter`, `Exit`, `NextIteration`, `Merge`, `Switch` and
`LoopCond`. Each `NextIteration -> Merge` edge closes a loop, so these graphs are cyclic; TF
(and TF-TRT) order them by ignoring those back edges, and place every node in a frame: the
loop body an `Enter` opens, left again through an `Exit`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, Node
from workbench.words import counted

ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})
CONTROL_FLOW_OPS = ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS | MERGE_OPS | frozenset(
    {"Switch", "RefSwitch", "LoopCond", "ControlTrigger"})
ROOT_FRAME = ""  # the frame of every node outside loops


@dataclass(frozen=True)
class Frames:
    """The loop frame of every node (`ROOT_FRAME` outside loops) and each frame's parent."""

    frame_of: dict[str, str]
    parent: dict[str, str]

    @property
    def names(self) -> list[str]:
        """Loop frames, outer ones before the frames nested in them."""
        return sorted(self.parent, key=lambda f: (self.depth(f), f))

    def depth(self, frame: str) -> int:
        depth = 0
        while frame != ROOT_FRAME:
            frame, depth = self.parent[frame], depth + 1
        return depth

    def in_loop(self, name: str) -> bool:
        return self.frame_of.get(name, ROOT_FRAME) != ROOT_FRAME


def is_back_edge(producer: Node, consumer: Node) -> bool:
    """True for a loop's `NextIteration -> Merge` edge, the one edge TF's orders skip."""
    return producer.op in NEXT_ITERATION_OPS and consumer.op in MERGE_OPS


def has_loops(graph: Graph) -> bool:
    return any(node.op in NEXT_ITERATION_OPS for node in graph.real_nodes)


def loop_frames(graph: Graph) -> Frames:
    """Each node's frame, found like TF's BuildControlFlowInfo: a breadth-first walk from the
    nodes without inputs; an `Enter` opens its `frame_name`, the consumers of an `Exit` are
    back in the parent frame, everything else inherits its producer's frame."""
    frame_of: dict[str, str] = {}
    parent: dict[str, str] = {}
    consumers, control_consumers = graph.consumers, graph.control_consumers
    queue = deque(n for n in graph.real_nodes if not n.inputs and not n.control_inputs)
    for node in queue:
        frame_of[node.name] = ROOT_FRAME
    while queue:
        node = queue.popleft()
        frame = frame_of[node.name]
        if node.op in EXIT_OPS:
            frame = parent.get(frame, ROOT_FRAME)
        outs = [c for c, _ in consumers[node.name]] + control_consumers[node.name]
        for out in outs:
            if out.name in frame_of:
                continue
            if out.op in ENTER_OPS:
                child = str(out.attr("frame_name", out.name))
                parent.setdefault(child, frame)
                frame_of[out.name] = child
            else:
                frame_of[out.name] = frame
            queue.append(out)
    return Frames(frame_of, parent)


class MixedFramesError(WorkbenchError):
    """A node takes inputs from different loop frames: TensorFlow cannot run the graph."""


def mixed_frame_nodes(graph: Graph) -> dict[str, dict[str, str]]:
    """The nodes whose inputs (data and control) come from different loop frames, each with
    its inputs' frames. Walked in graph order (producers first, back edges aside), a node is
    in the innermost frame among its inputs', so a Const left outside a loop shows at its
    consumer inside the loop, as TensorFlow's executor reports it."""
    frame_of: dict[str, str] = {}
    parent: dict[str, str] = {}
    walked = Frames(frame_of, parent)  # filled as the walk goes
    ops = {node.name: node.op for node in graph.real_nodes}
    mixed = {}
    for node in graph.real_nodes:
        sources = {}
        for producer in [ref.node for ref in node.inputs] + list(node.control_inputs):
            if producer not in frame_of:
                continue  # a back edge: NextIteration -> Merge
            frame = frame_of[producer]
            sources[producer] = parent.get(frame, ROOT_FRAME) if ops[producer] in EXIT_OPS \
                else frame
        frames = set(sources.values())
        if len(frames) > 1:
            mixed[node.name] = sources
        frame = max(frames, key=walked.depth, default=ROOT_FRAME)
        if node.op in ENTER_OPS:
            child = str(node.attr("frame_name", node.name))
            parent.setdefault(child, frame)
            frame = child
        frame_of[node.name] = frame
    return mixed


def check_frames(graph: Graph) -> None:
    """Raises `MixedFramesError` when a node of `graph` takes inputs from different loop
    frames: TensorFlow would refuse to run it ("has inputs from different frames")."""
    if not has_loops(graph):
        return
    mixed = mixed_frame_nodes(graph)
    if mixed:
        node, sources = next(iter(mixed.items()))
        shown = ", ".join(f"{name} in {frame or 'no loop'!r}" for name, frame in sources.items())
        raise MixedFramesError(
            f"the prepared graph cannot run: node {node} takes inputs from different loop "
            f"frames ({shown}; {counted(len(mixed), 'such node')}), so TensorFlow would refuse it. "
            "Freezing left a node outside its while loop, a case the workbench does not "
            "repair yet: report it with this message.")


# --- tf.cond branches ----------------------------------------------------------------------

SWITCH_OPS = frozenset({"Switch", "RefSwitch", "_SwitchN"})  # _SwitchN: a lowered tf.switch_case
# The branches a node runs in: (predicate tensor, Switch output port) pairs it hangs from, not
# yet closed by a Merge; empty outside every cond. A lowered cond switches each of its inputs
# apart, all on one predicate: the predicate, not the Switch, names the branch. A loop's own
# Switch (on its LoopCond) is left out: loop frames are tracked apart.
Branch = frozenset[tuple[str, int]]
UNCONDITIONAL: Branch = frozenset()


def cond_branches(graph: Graph) -> dict[str, Branch | None]:
    """The cond branch each node runs in, None for nodes without inputs (a Const can serve any
    branch). TensorFlow runs a node only when every input is live, so nodes of different
    branches must never share one engine: it would wait for the branch that did not run, and
    take the one that did down with it. A Merge (the cond's end) runs in what its data inputs
    share; back edges (NextIteration -> Merge) are left out, as TF's order leaves them."""
    nodes = graph.real_nodes
    ops = {node.name: node.op for node in nodes}
    pending = {node.name: len(_forward_inputs(node, ops)) for node in nodes}
    branch: dict[str, Branch | None] = {}
    queue = deque(node for node in nodes if pending[node.name] == 0)
    while queue:
        node = queue.popleft()
        branch[node.name] = _branch_of(graph, node, ops, branch)
        for consumer in _forward_consumers(graph, node):
            pending[consumer.name] -= 1
            if pending[consumer.name] == 0:
                queue.append(consumer)
    return branch


def _forward_inputs(node: Node, ops: dict[str, str]) -> list[str]:
    names = [ref.node for ref in node.inputs] + list(node.control_inputs)
    if node.op in MERGE_OPS:
        names = [n for n in names if ops.get(n) not in NEXT_ITERATION_OPS]
    return [n for n in names if n in ops]


def _forward_consumers(graph: Graph, node: Node) -> list[Node]:
    consumers = [c for c, _ in graph.consumers[node.name]] + graph.control_consumers[node.name]
    if node.op in NEXT_ITERATION_OPS:
        consumers = [c for c in consumers if c.op not in MERGE_OPS]
    return consumers


def _branch_of(graph: Graph, node: Node, ops: dict[str, str],
               branch: dict[str, Branch | None]) -> Branch | None:
    def through(name: str, port: int | None) -> Branch:
        own = branch.get(name) or UNCONDITIONAL
        source = graph.by_name[name]
        if port is None or source.op not in SWITCH_OPS or _is_loop_switch(graph, source):
            return own
        return own | {(str(source.inputs[1]), port)}

    data = [through(ref.node, ref.port) for ref in node.inputs if ref.node in branch]
    if node.op in MERGE_OPS:
        return frozenset.intersection(*data) if data else UNCONDITIONAL
    control = [through(name, None) for name in node.control_inputs if name in branch]
    if not node.inputs and not node.control_inputs:
        return None
    return frozenset().union(*data, *control)


def _is_loop_switch(graph: Graph, switch: Node) -> bool:
    return len(switch.inputs) > 1 and graph.by_name[switch.inputs[1].node].op == "LoopCond"


def branches_join(a: Branch | None, b: Branch | None) -> bool:
    """Whether clusters of branches `a` and `b` may become one (None joins any)."""
    return a is None or b is None or a == b
