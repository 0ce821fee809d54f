"""A conversion's prepared graph as a hierarchy of name scopes, TensorBoard's way: Keras layers
and blocks, while loops and inlined functions become groups, collapsed until opened.

Pure data, no drawing: `ScopeTree.build` makes the tree once per conversion; an open state
(the set of open group ids) says what is drawn, `scope_graphs` draws it, and the app, the HTML
report and `workbench graph` share both. So a real model's first view stays within about 60
boxes: single-child chains of scopes merge into one group (`StatefulPartitionedCall/resnet50`),
and a scope with many sibling groups splits them by their common name prefix
(`conv2_block1_1_conv`, ... -> `conv2_*` -> `conv2_block1_*`), as TensorBoard groups series.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.graph.nodes import Graph
from workbench.viz.style import reason_category

ROOT = ""  # the id of the root group
TOP_BOXES = 60  # the first view's budget: boxes that fit a 1280 px column
MAX_CHILDREN = 24  # more sibling groups than this split by name prefix
MAX_LEAVES = 40  # more loose nodes in one scope than this group by op type
SEARCH_BOXES = 90  # a search opens the groups of its matches while the boxes stay within this
WRAPPER = re.compile(r"^(Stateful)?PartitionedCall(_\d+)?$")
LOOP = re.compile(r"^while(_\d+)?$")
# Grappler names the nodes it makes `<optimizer>/<original name>`: they belong to that scope.
GRAPPLER_PREFIX = re.compile(
    r"^(Func|ConstantFolding|ArithmeticOptimizer|DependencyOptimizer|LayoutOptimizer|Remapper|"
    r"LoopOptimizer|AutoMixedPrecision|MemoryOptimizer|ScopedAllocator|PinToHostOptimizer)/")
OUTSIDE = "outside every engine"


@dataclass
class Group:
    """A scope (or a prefix series, or an op-type bundle) and what it holds.

    `id` is the full scope path, as `--open` names it; `label` what its box says (a merged
    chain shows every part). `nodes` counts prepared-graph nodes below it, `engines` how many of
    them each engine holds, `reasons` the reason category of the rest."""

    id: str
    label: str
    kind: str = "scope"  # scope, loop, function, series, ops
    parent: str | None = None
    children: list[str] = field(default_factory=list)  # group ids, in graph order
    leaves: list[str] = field(default_factory=list)  # node names directly inside
    # Weight Consts directly inside: counted, never boxes (drawings fold them into consumers).
    weights: list[str] = field(default_factory=list)
    nodes: int = 0
    engines: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)

    @property
    def converted(self) -> int:
        return sum(self.engines.values())

    @property
    def main_reason(self) -> str | None:
        """The reason category of most of the nodes left native, if any are."""
        return self.reasons.most_common(1)[0][0] if self.reasons else None


@dataclass
class ScopeTree:
    """Groups by id, the group of each node, and each node's engine or reason."""

    groups: dict[str, Group]
    group_of: dict[str, str]  # node name -> the group holding it directly
    engine_of: dict[str, str]
    reason_of: dict[str, str]  # node outside engines -> TF-TRT's (or the workbench's) reason
    op_of: dict[str, str]

    @classmethod
    def build(cls, graph: Graph, result: ConversionResult,
              only: Collection[str] | None = None) -> ScopeTree:
        """The tree of `graph`'s nodes (or of the nodes named in `only`) by name scope, with
        `result`'s engines and reasons."""
        engine_of = {name: e.name for e in result.engines for name in e.nodes}
        reasons = {u.name: u.reason for u in result.unconverted}
        nodes = [n for n in graph.real_nodes if only is None or n.name in only]
        tree = cls({ROOT: Group(ROOT, "model")}, {}, engine_of, {}, {n.name: n.op for n in nodes})
        for node in nodes:
            if node.name not in engine_of:
                tree.reason_of[node.name] = reasons.get(node.name, OUTSIDE)
            tree._add(node.name, node.op == "Const" and bool(graph.consumers[node.name]))
        tree._split(ROOT)
        tree._merge_chains(ROOT)
        tree._count(ROOT)
        return tree

    # --- building ----------------------------------------------------------------------------

    def _add(self, name: str, weight: bool) -> None:
        parts = GRAPPLER_PREFIX.sub("", name).split("/")
        parent = ROOT
        for depth in range(1, len(parts)):
            scope = "/".join(parts[:depth])
            if scope not in self.groups:
                self.groups[scope] = Group(scope, parts[depth - 1], _kind(parts[depth - 1]),
                                           parent)
                self.groups[parent].children.append(scope)
            parent = scope
        (self.groups[parent].weights if weight else self.groups[parent].leaves).append(name)
        self.group_of[name] = parent

    def _split(self, gid: str) -> None:
        """Bundles many sibling groups by name prefix and many loose nodes by op type."""
        group = self.groups[gid]
        if len(group.children) > MAX_CHILDREN:
            group.children = self._series(gid, group.children, 0)
        many = len(group.leaves) > MAX_LEAVES and (group.children or len(group.leaves) > TOP_BOXES)
        if many and group.kind != "ops":
            by_op: dict[str, list[str]] = {}
            for name in group.leaves:
                by_op.setdefault(self.op_of[name], []).append(name)
            kept = [names[0] for names in by_op.values() if len(names) == 1]
            for op, names in by_op.items():
                if len(names) > 1:
                    bundle = self._new_group(f"{_join(gid, op)}*", f"{op} ×{len(names)}", "ops",
                                             gid)
                    bundle.leaves = names
                    group.children.append(bundle.id)
                    for name in names:
                        self.group_of[name] = bundle.id
            group.leaves = kept
        for child in list(group.children):
            self._split(child)

    def _series(self, gid: str, children: list[str], depth: int) -> list[str]:
        """`children` grouped by their next `_`-separated name token, recursively, so every
        level keeps at most MAX_CHILDREN entries where the names allow it."""
        buckets: dict[str, list[str]] = {}
        for child in children:
            tokens = self.groups[child].label.split("_")
            key = "_".join(tokens[:depth + 1]) if len(tokens) > depth + 1 else ""
            buckets.setdefault(key, []).append(child)
        if len(buckets) == 1 and "" not in buckets:  # all share this token: look further
            return self._series(gid, children, depth + 1)
        result: list[str] = []
        for key, members in buckets.items():
            if key == "" or len(members) == 1:
                result += members
                continue
            series = self._new_group(f"{_join(gid, key)}_*", f"{key}_* ×{len(members)}",
                                     "series", gid)
            for member in members:
                self.groups[member].parent = series.id
            series.children = (self._series(series.id, members, depth + 1)
                               if len(members) > MAX_CHILDREN else members)
            result.append(series.id)
        return result

    def _new_group(self, gid: str, label: str, kind: str, parent: str) -> Group:
        self.groups[gid] = Group(gid, label, kind, parent)
        return self.groups[gid]

    def _merge_chains(self, gid: str) -> None:
        """A group holding one group and nothing else becomes that group (labels joined)."""
        group = self.groups[gid]
        for index, child_id in enumerate(list(group.children)):
            child = self.groups[child_id]
            while len(child.children) == 1 and not child.leaves:
                inner = self.groups[child.children[0]]
                del self.groups[child.id]
                inner.weights += child.weights
                inner.label = f"{child.label}/{inner.label}"
                inner.kind = child.kind if child.kind == "function" else inner.kind
                inner.parent = gid
                child = inner
            if not child.children and len(child.leaves) <= 1:  # a box of one node: the node
                group.leaves += child.leaves
                group.weights += child.weights
                for name in child.leaves + child.weights:
                    self.group_of[name] = gid
                del self.groups[child.id]
                group.children[index] = ""
                continue
            group.children[index] = child.id
            self._merge_chains(child.id)
        group.children = [c for c in group.children if c]

    def _count(self, gid: str) -> Group:
        group = self.groups[gid]
        for name in group.leaves + group.weights:
            group.nodes += 1
            if name in self.engine_of:
                group.engines[self.engine_of[name]] += 1
            else:
                group.reasons[reason_category(self.reason_of[name])] += 1
        for child_id in group.children:
            child = self._count(child_id)
            group.nodes += child.nodes
            group.engines.update(child.engines)
            group.reasons.update(child.reasons)
        return group

    # --- reading -----------------------------------------------------------------------------

    def ancestors(self, gid: str) -> list[str]:
        """The groups above `gid`, root first (root included, `gid` not)."""
        chain: list[str] = []
        parent = self.groups[gid].parent
        while parent is not None:
            chain.append(parent)
            parent = self.groups[parent].parent
        return chain[::-1]

    def breadcrumb(self, gid: str) -> list[tuple[str, str]]:
        """(group id, label) from the root down to `gid`: the way back."""
        return [(g, self.groups[g].label) for g in [*self.ancestors(gid), gid]]

    def path_label(self, gid: str) -> str:
        """`gid`'s label after its parents' (`transformer_layer_0/self_attention`), without the
        root, a lone top group (every path would repeat it) or the series above it (a block's
        name says its series)."""
        steps = [g for g in self.ancestors(gid) if g != ROOT
                 and self.groups[g].kind not in ("series", "ops")] + [gid]
        if len(steps) > 1 and self.groups[ROOT].children == [steps[0]]:
            steps = steps[1:]
        return "/".join(self.groups[g].label for g in steps)

    def nodes_under(self, gid: str) -> list[str]:
        """Every node name below `gid`, in graph order within each group."""
        group = self.groups[gid]
        names = group.leaves + group.weights
        for child in group.children:
            names += self.nodes_under(child)
        return names

    def outline(self, gid: str = ROOT, indent: int = 0) -> list[str]:
        """One line per group, indented by depth: id, nodes, how many converted."""
        group = self.groups[gid]
        lines = [] if gid == ROOT else [
            f"{'  ' * indent}{gid}  [{group.kind}, {group.nodes} nodes, "
            f"{group.converted} converted]"]
        for child in group.children:
            lines += self.outline(child, indent + (gid != ROOT))
        return lines

    def common_group(self, names: Iterable[str]) -> str:
        """The innermost group holding every one of `names` (an engine's place)."""
        common: list[str] | None = None
        for name in names:
            chain = [*self.ancestors(self.group_of[name]), self.group_of[name]]
            if common is None:
                common = chain
            else:
                size = next((i for i, (a, b) in enumerate(zip(common, chain, strict=False))
                             if a != b), min(len(common), len(chain)))
                common = common[:size]
        return common[-1] if common else ROOT

    def normalize(self, open_groups: Iterable[str]) -> frozenset[str]:
        """Known groups plus their ancestors (an open group is seen only through open
        parents); the root is always open. Unknown ids raise KeyError naming them."""
        unknown = [g for g in open_groups if g not in self.groups]
        if unknown:
            raise KeyError(unknown[0])
        opened = {ROOT}
        for gid in open_groups:
            opened.update([*self.ancestors(gid), gid])
        return frozenset(opened)

    def visible(self, open_groups: frozenset[str]) -> tuple[list[str], list[str]]:
        """(collapsed groups, nodes) drawn as boxes when `open_groups` are open."""
        groups: list[str] = []
        nodes: list[str] = []
        stack = [ROOT]
        while stack:
            group = self.groups[stack.pop()]
            nodes += group.leaves
            for child in group.children:
                (stack if child in open_groups else groups).append(child)
        return groups, nodes

    def boxes(self, open_groups: frozenset[str]) -> int:
        groups, nodes = self.visible(open_groups)
        return len(groups) + len(nodes)

    def first_view(self, budget: int = TOP_BOXES, depth: int | None = None) -> frozenset[str]:
        """The open state of the first drawing: level by level, all groups of a level open
        while the boxes stay within `budget`; when that leaves a sparse drawing (under a third
        of the budget), the largest groups of the next level that fit open too. With `depth`,
        exactly that many levels open."""
        opened, levels = {ROOT}, 0
        boxes = self.boxes(frozenset(opened))
        level = list(self.groups[ROOT].children)
        while level and (depth is None or levels < depth):
            more = {g: len(self.groups[g].children) + len(self.groups[g].leaves) - 1
                    for g in level}
            if depth is None and boxes + sum(more.values()) > budget:
                if boxes >= budget // 3:  # readable as it is: whole levels only
                    break
                for gid in sorted(level, key=lambda g: -self.groups[g].nodes):
                    if boxes + more[gid] <= budget:
                        opened.add(gid)
                        boxes += more[gid]
                break
            opened.update(level)
            boxes += sum(more.values())
            levels += 1
            level = [c for g in level for c in self.groups[g].children]
        return frozenset(opened)

    def representative(self, name: str, open_groups: frozenset[str]) -> str:
        """The box a node is seen in: itself, or its outermost collapsed group."""
        chain = [*self.ancestors(self.group_of[name]), self.group_of[name]]
        for gid in chain:
            if gid not in open_groups:
                return gid
        return name


@dataclass(frozen=True)
class Focus:
    """Where to look: the groups to open and the nodes to highlight."""

    open: frozenset[str]
    highlight: frozenset[str]


def find(tree: ScopeTree, text: str, open_groups: Iterable[str] = ()) -> Focus:
    """Nodes whose name or op type contains `text` (case-insensitive), and the nodes of groups
    whose id contains it; opens the groups holding them within SEARCH_BOXES boxes."""
    needle = text.strip().lower()
    if not needle:
        return Focus(tree.normalize(open_groups), frozenset())
    matches = [n for n, op in tree.op_of.items() if needle in n.lower() or needle == op.lower()]
    if not matches:
        for gid in tree.groups:
            if gid and needle in gid.lower():
                matches += tree.nodes_under(gid)
    return focus_on(tree, matches, open_groups)


def focus_on(tree: ScopeTree, names: Iterable[str], open_groups: Iterable[str] = (),
             budget: int = SEARCH_BOXES) -> Focus:
    """Highlights `names` and opens the groups holding them, match by match while the drawing
    stays within `budget` boxes (the others are seen in their collapsed groups, which count
    their matches)."""
    names = [n for n in dict.fromkeys(names) if n in tree.group_of]
    opened = tree.normalize(open_groups)
    for index, name in enumerate(names):  # the first match opens whatever it costs
        wider = opened | {*tree.ancestors(tree.group_of[name]), tree.group_of[name]}
        if wider != opened and (index == 0 or tree.boxes(wider) <= budget):
            opened = wider
    return Focus(frozenset(opened), frozenset(names))


def focus_on_row(tree: ScopeTree, result: ConversionResult, op: str,
                 reason: str | None = None) -> Focus:
    """A non-conversion report row (op type, and reason when given) -> its nodes, opened and
    highlighted. TF-TRT's report counts `_SOURCE`/`_SINK`, which no scope holds."""
    names = [u.name for u in result.unconverted
             if u.op == op and (reason is None or u.reason == reason)]
    return focus_on(tree, names)


def focus_on_engine(tree: ScopeTree, engine: EngineInfo, open_groups: Iterable[str] = ()
                    ) -> Focus:
    """An engine's box in the converted view: the group holding all its nodes (where the box
    sits) opened, the box highlighted."""
    gid = tree.common_group(n for n in engine.nodes if n in tree.group_of)
    return Focus(tree.normalize([*open_groups, gid]), frozenset({engine.name}))


def _kind(part: str) -> str:
    if LOOP.match(part):
        return "loop"
    return "function" if WRAPPER.match(part) else "scope"


def _join(parent: str, part: str) -> str:
    return f"{parent}/{part}" if parent else part
