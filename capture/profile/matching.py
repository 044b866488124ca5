"""Which graph node each activity CUPTI recorded is: activities of one replay matched to the
export's nodes. Pure functions of the nodes and the activities (no GPU). By order
(`match_by_order`, always: ready nodes of the activity's kind and name, in start order)
and by id (`match_by_id`, where the driver's tools ids and CUPTI's graph node ids exist;
`agreement` compares the two; `ids_consistent` checks the order match against ids alone).
The rules in full: docs/profile.md, "Matching, in detail"."""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from graph_harness.capture.profile.activities import Activity
from graph_harness.capture.profile.match_plan import Key, MatchPlan
from graph_harness.capture.profile.match_plan import plan_of as plan_of  # re-exported

LOCAL_ID_MASK = 0xFFFFFFFF  # a graph node id's low 32 bits: the node's id in its graph


UNKNOWN = ("kernel", "<unknown>")  # a kernel node whose name the driver would not give


def activity_keys(a: Activity) -> list[Key]:
    """The node keys an activity can be, best first: a kernel by its name, then (for the
    driver's copy and set kernels) a memcpy or memset node, then a kernel node of unknown
    name (capture/graph/reader.py names it so when the driver gives none)."""
    if a.kind != "kernel":
        return [(a.kind, "")]
    keys = [("kernel", a.name)]
    low = a.name.lower()
    if low.startswith("memcpy"):
        keys.append(("memcpy", ""))
    if low.startswith("memset"):
        keys.append(("memset", ""))
    return [*keys, UNKNOWN]


@dataclass
class Match:
    """One replay's activities (in the order given) matched to nodes."""

    node: list[int | None]  # per activity: the node it ran, or None
    unmatched_nodes: list[int]
    out_of_order: int = 0  # activities given a node whose dependencies had not all started

    @property
    def unmatched_activities(self) -> list[int]:
        return [i for i, n in enumerate(self.node) if n is None]

    @property
    def complete(self) -> bool:
        return not self.unmatched_nodes and None not in self.node and not self.out_of_order


def match_by_order(plan: MatchPlan, acts: Sequence[Activity]) -> Match:
    """Match one replay's activities (start order) to nodes: see the module docstring."""
    remaining = {n: len(plan.deps[n]) for n in plan.nodes}
    ready: dict[Key, list[int]] = defaultdict(list)
    pending: dict[Key, list[int]] = defaultdict(list)  # every node of a key, index order
    for n in plan.nodes:
        pending[plan.key[n]].append(n)
        if remaining[n] == 0:
            ready[plan.key[n]].append(n)  # index order: already a heap
    cursor: dict[Key, int] = defaultdict(int)
    matched: set[int] = set()
    out: list[int | None] = []
    late = 0
    for a in acts:
        keys = activity_keys(a)
        pick = _ready_node(ready, keys, matched)
        if pick is None:
            pick = _pending_node(pending, cursor, keys, matched)
            late += pick is not None
        out.append(pick)
        if pick is None:
            continue
        matched.add(pick)
        for m in plan.dependents.get(pick, ()):
            remaining[m] -= 1
            if remaining[m] == 0 and m not in matched:
                heapq.heappush(ready[plan.key[m]], m)
    greedy = Match(out, [n for n in plan.nodes if n not in matched], late)
    if not greedy.complete and len(acts) == len(plan.nodes):
        found = _search(plan, acts)
        if found is not None:
            return Match(found, [])
    return greedy


def _ready_node(ready: dict[Key, list[int]], keys: list[Key], matched: set[int]) -> int | None:
    """The lowest unmatched node, of the activity's best key that has one, whose
    dependencies have all started (taken off its heap), or None."""
    for key in keys:
        heap = ready.get(key)
        while heap and heap[0] in matched:
            heapq.heappop(heap)
        if heap:
            return heapq.heappop(heap)
    return None


def _pending_node(
    pending: dict[Key, list[int]], cursor: dict[Key, int], keys: list[Key], matched: set[int]
) -> int | None:
    """Out of order: the first unmatched node of the activity's best key that has one,
    whatever its dependencies, or None."""
    for key in keys:
        todo = pending.get(key, [])
        while cursor[key] < len(todo) and todo[cursor[key]] in matched:
            cursor[key] += 1
        if cursor[key] < len(todo):
            return todo[cursor[key]]
    return None


def _search(plan: MatchPlan, acts: Sequence[Activity], budget: int = 100_000) -> list[int] | None:
    """Depth-first over the choices among equal ready nodes (lower index first): an
    assignment of every activity to a ready node of its key, or None (none exists, or
    none within `budget` steps). Changes are undone from a log when a choice is revised."""
    st = _Ready(plan)
    choices: list[list] = []  # [activity, candidates, next to try, log length]
    assigned: list[int] = []
    # Two pruning rules keep this from trying equal orders again and again (a step's many
    # kernels of one name): a set of matched nodes once found to lead nowhere is not
    # entered again (the activity it reaches is fixed by its size), and of ready nodes of
    # one key with the same dependents only the first is tried (the other is the same
    # choice under another index).
    dead: set[frozenset[int]] = set()
    i = 0
    for _ in range(budget):
        if i == len(acts):
            return assigned
        state = frozenset(assigned)
        candidates = (
            []
            if state in dead
            else _distinct(plan, [n for k in activity_keys(acts[i]) for n in st.ready.get(k, ())])
        )
        if candidates:
            if len(candidates) > 1:
                choices.append([i, candidates, 1, len(st.log)])
            pick = candidates[0]
        else:  # a dead end: revise the latest choice that has another candidate
            dead.add(state)
            revised = _revise(st, choices, assigned, dead)
            if revised is None:
                return None
            i, pick = revised
        st.take(pick)
        assigned.append(pick)
        i += 1
    return assigned if i == len(acts) else None


class _Ready:
    """The search's state: each node's dependencies not yet taken, the ready nodes of
    each key (sorted), and a log of every change, to undo."""

    def __init__(self, plan: MatchPlan) -> None:
        self.plan = plan
        self.remaining = {n: len(plan.deps[n]) for n in plan.nodes}
        self.ready: dict[Key, list[int]] = defaultdict(list)  # sorted
        for n in plan.nodes:
            if self.remaining[n] == 0:
                self.ready[plan.key[n]].append(n)
        self.log: list[tuple[str, int]] = []

    def take(self, n: int) -> None:
        """Node n matched: off the ready list; its dependents one dependency nearer."""
        plan, remaining, ready = self.plan, self.remaining, self.ready
        ready[plan.key[n]].remove(n)
        self.log.append(("take", n))
        for m in plan.dependents.get(n, ()):
            remaining[m] -= 1
            self.log.append(("dec", m))
            if remaining[m] == 0:
                bisect.insort(ready[plan.key[m]], m)
                self.log.append(("ready", m))

    def undo(self, length: int) -> None:
        """Every change after the log's first `length` undone."""
        plan, log = self.plan, self.log
        while len(log) > length:
            what, x = log.pop()
            if what == "ready":
                self.ready[plan.key[x]].remove(x)
            elif what == "dec":
                self.remaining[x] += 1
            else:
                bisect.insort(self.ready[plan.key[x]], x)


def _revise(
    st: _Ready, choices: list[list], assigned: list[int], dead: set[frozenset[int]]
) -> tuple[int, int] | None:
    """At a dead end: the latest choice that has another candidate, its changes undone
    and the assignment cut back to it; (its activity, the candidate to try now), or None
    where no choice has another (each exhausted one's state marked dead)."""
    while choices and choices[-1][2] >= len(choices[-1][1]):
        dead.add(frozenset(assigned[: choices.pop()[0]]))
    if not choices:
        return None
    c = choices[-1]
    st.undo(c[3])
    del assigned[c[0] :]
    pick = c[1][c[2]]
    c[2] += 1
    return c[0], pick


def _distinct(plan: MatchPlan, candidates: list[int]) -> list[int]:
    """The candidates less those the same as an earlier one for what follows (one key,
    the same dependents)."""
    seen, out = set(), []
    for n in candidates:
        sig = (plan.key[n], frozenset(plan.dependents.get(n, ())))
        if sig not in seen:
            seen.add(sig)
            out.append(n)
    return out


def match_by_id(plan: MatchPlan, acts: Sequence[Activity], local_ids: dict[int, int]) -> Match:
    """Match by CUPTI's graph node id: activity `a` is the node whose local id (the low
    32 bits of its tools id, `local_ids[node]`) equals a.graph_node_id's low 32 bits, if
    that node's key fits the activity; else it is unmatched."""
    by_id = {lid & LOCAL_ID_MASK: n for n, lid in local_ids.items() if n in plan.key}
    matched: set[int] = set()
    out: list[int | None] = []
    for a in acts:
        n = None if a.graph_node_id is None else by_id.get(a.graph_node_id & LOCAL_ID_MASK)
        if n is not None and (n in matched or plan.key[n] not in activity_keys(a)):
            n = None
        out.append(n)
        if n is not None:
            matched.add(n)
    return Match(out, [n for n in plan.nodes if n not in matched])


def agreement(a: Match, b: Match) -> float:
    """The share of activities both matches give the same node (1.0: they agree)."""
    if len(a.node) != len(b.node):
        raise ValueError("matches of different replays")
    if not a.node:
        return 1.0
    return sum(x is not None and x == y for x, y in zip(a.node, b.node)) / len(a.node)


def ids_consistent(replays: Sequence[Sequence[Activity]], matches: Sequence[Match]) -> bool | None:
    """Whether an order match is one-to-one with CUPTI's graph node ids over all replays:
    every node always given activities of one id, no two nodes the same id. None when the
    trace carries no graph node ids."""
    ids: dict[int, set[int]] = defaultdict(set)
    seen_any = False
    for acts, m in zip(replays, matches):
        for a, n in zip(acts, m.node):
            if a.graph_node_id is None:
                continue
            seen_any = True
            if n is not None:
                ids[n].add(a.graph_node_id & LOCAL_ID_MASK)
    if not seen_any:
        return None
    if any(len(v) != 1 for v in ids.values()):
        return False
    owners = [next(iter(v)) for v in ids.values()]
    return len(owners) == len(set(owners))
