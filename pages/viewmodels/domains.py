"""The pool's domain tree (:func:`scheduler.reads.domains.pool_domain_tree`) as the pages draw it: nested
:class:`DomainBox` values (zone > spine > rack > gpu-clique > node cells) that the pool page and the
workflow page decorate (occupants, this workflow's tasks) and fold (single-child chains, untouched
siblings) for display.

Only labelled domains are drawn: machines missing a topology label are counted by the tree
(``unlabelled_node_count``) and named under the map, not drawn in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pages.viewmodels.common import heat_level, percent
from scheduler.reads.domains import Domain, DomainMachine, DomainTree
from workflows.models import Task

DomainKey = tuple[str, ...]


@dataclass(slots=True)
class NodeCell:
    name: str
    gpu: int
    in_use: int  # external usage + every reservation (ours included)
    free: int
    schedulable: bool
    ours: int = 0  # GPUs this page's workflow holds here (active tasks)
    tasks: list[Task] = field(default_factory=list)  # this page's workflow's tasks placed here

    @property
    def others(self) -> int:
        return max(self.in_use - self.ours, 0)

    @property
    def used_percent(self) -> int:
        return percent(self.gpu - max(self.free, 0), self.gpu) if self.schedulable else 100

    @property
    def heat(self) -> int:
        return heat_level(self.gpu - max(self.free, 0), self.gpu)

    @property
    def others_percent(self) -> int:
        return percent(self.others, self.gpu)

    @property
    def ours_percent(self) -> int:
        return percent(self.ours, self.gpu)


@dataclass(slots=True)
class Occupant:
    workflow_id: str
    username: str
    gpu: int
    tasks: int
    visible: bool = False  # False: the other users' workflows in this domain, summed (no id, no owner)
    url: str = ""  # its page, when visible
    others: int = 0  # how many workflows a summed occupant stands for


@dataclass(slots=True)
class DomainBox:
    """One domain (or the pool root) as drawn: totals, children, maybe node cells."""

    key: str
    value: str
    path: DomainKey
    capacity: int = 0
    in_use: int = 0
    free: int = 0
    node_count: int = 0
    schedulable_node_count: int = 0
    children: list[DomainBox] = field(default_factory=list)
    merged: list[tuple[str, str]] = field(default_factory=list)  # single-child chain folded into this box
    compact: bool = False
    touched: bool = False
    ours_tasks: int = 0
    hidden_count: int = 0
    hidden_capacity: int = 0
    hidden_free: int = 0
    hidden_key: str = ""
    nodes: list[NodeCell] | None = None
    occupants: list[Occupant] = field(default_factory=list)
    occupants_more: int = 0  # workflows holding capacity here beyond those in ``occupants``

    @property
    def labels(self) -> list[tuple[str, str]]:
        return [(self.key, self.value), *self.merged]

    @property
    def used_percent(self) -> int:
        return percent(self.capacity - self.free, self.capacity)

    @property
    def heat(self) -> int:
        """0..5: the colour class of the heat map (0 idle, 5 full)."""
        return heat_level(self.capacity - self.free, self.capacity)

    @property
    def hidden_used_percent(self) -> int:
        return percent(self.hidden_capacity - self.hidden_free, self.hidden_capacity)

    @property
    def dom_id(self) -> str:
        return "/".join(self.path)


def _node_cell(machine: DomainMachine) -> NodeCell:
    return NodeCell(
        name=machine.name,
        gpu=machine.gpu,
        in_use=machine.gpu_in_use,
        free=machine.gpu_free,
        schedulable=machine.schedulable,
    )


def domain_boxes(tree: DomainTree) -> tuple[DomainBox, dict[DomainKey, DomainBox]]:
    """The tree's labelled domains as boxes, and every box by its path (the root's is ``()``). The
    finest domains whose machines the tree loaded get their node cells."""
    boxes: dict[DomainKey, DomainBox] = {}

    def box_of(domain: Domain) -> DomainBox:
        path = tuple(value for value in domain.path if value is not None)
        box = DomainBox(
            key=domain.key,
            value=domain.value,
            path=path,
            capacity=domain.gpu_capacity,
            in_use=domain.gpu_in_use,
            free=domain.gpu_free,
            node_count=domain.node_count,
            schedulable_node_count=domain.schedulable_node_count,
        )
        boxes[path] = box
        box.children = [box_of(child) for child in domain.children if child.labelled]
        if domain.machines and path:
            box.nodes = [_node_cell(machine) for machine in domain.machines]
        return box

    return box_of(tree.root), boxes


def merge_chains(box: DomainBox) -> None:
    """Fold a domain with exactly one child covering the same nodes into that child (rack r1 and its
    one gpu-clique become one box labelled with both)."""
    for child in box.children:
        merge_chains(child)
    while box.path and len(box.children) == 1 and box.children[0].node_count == box.node_count:
        child = box.children[0]
        if child.compact != box.compact:
            break
        box.merged.append((child.key, child.value))
        box.merged.extend(child.merged)
        box.children = child.children
        box.nodes = child.nodes
        box.occupants = child.occupants
        box.occupants_more = child.occupants_more
        box.hidden_count, box.hidden_capacity, box.hidden_free = (
            child.hidden_count, child.hidden_capacity, child.hidden_free)
        box.hidden_key = child.hidden_key
        box.ours_tasks = max(box.ours_tasks, child.ours_tasks)
