"""Padding up a capture-size ladder, and the ladder worth capturing. Plain arithmetic on
the sweep's measured replay times: no torch.

A ladder's cost per step is the expected replay time of the sizes it pads to, given a
request distribution (batch size -> share of steps); times between measured sizes are
interpolated (`interpolated` says so). `choose`: the ladder minimizing it with at most K
sizes and/or within a memory budget (dynamic programming); with no replay times,
`ladder_cost` counts padded rows and `fewest_padded` pads fewest (docs/sweep.md, "How a
ladder is priced").
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Distribution = dict[int, float]  # batch size -> its share of steps (the shares sum to 1)


class RequestsError(ValueError):
    """A request distribution that cannot be read; the message names where and what."""


MAX_DIGITS = 18  # a size or count in a request file (counts to a quintillion)


def read_requests(text: str, where: str) -> Distribution:
    """One batch size per line (each line one step), or `SIZE COUNT` (a histogram); `#`
    starts a comment. RequestsError naming the line otherwise."""
    counts: dict[int, float] = {}
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 2 or not all(f.isascii() and f.isdigit() for f in fields):
            raise RequestsError(
                f"{where} line {n}: expected a batch size, or a size and its count "
                f"(whole numbers), got {line.strip()!r}"
            )
        if any(len(f.lstrip("0")) > MAX_DIGITS for f in fields):  # past int() and float()
            raise RequestsError(
                f"{where} line {n}: a size or count of at most {MAX_DIGITS} digits, got "
                f"{max(len(f) for f in fields)} digits"
            )
        size, count = int(fields[0]), int(fields[1]) if len(fields) == 2 else 1
        if size < 1:
            raise RequestsError(f"{where} line {n}: a batch size is >= 1, got {size}")
        counts[size] = counts.get(size, 0) + count
    return _normalized(counts, where)


def _normalized(counts: Mapping[int, float], where: str) -> Distribution:
    total = sum(counts.values())
    if not total:
        raise RequestsError(f"{where}: no request (give at least one batch size)")
    return {s: c / total for s, c in sorted(counts.items()) if c}


BUILTIN = {
    "uniform:LO-HI": "every batch size from LO to HI equally often",
    "poisson:MEAN": "batch sizes 1 + Poisson(MEAN - 1), up to the largest size swept",
    "zipf:A": "batch size b with weight b**-A, from 1 to the largest size swept",
}


def builtin_requests(spec: str, largest: int) -> Distribution:
    """A built-in distribution (BUILTIN) over batch sizes up to `largest`."""
    kind, _, arg = spec.partition(":")
    where = f"requests {spec!r}"
    try:
        if kind == "uniform":
            lo, _, hi = arg.partition("-")
            lo_i, hi_i = int(lo), int(hi)
            if not 1 <= lo_i <= hi_i:
                raise ValueError
            if hi_i > largest:  # said before a batch is made (a slip of 1-6400000000 for 1-64)
                raise RequestsError(
                    f"{where}: batches reach {hi_i}, above the largest size swept ({largest}): "
                    "add a size that covers them to --sizes"
                )
            return _normalized({b: 1.0 for b in range(lo_i, hi_i + 1)}, where)
        if kind == "poisson":
            mean = float(arg)
            if not 1 <= mean <= largest or not math.isfinite(mean):
                raise ValueError
            lam = mean - 1
            pmf = {b: math.exp(-lam + (b - 1) * math.log(lam) - math.lgamma(b)) if lam else
                   float(b == 1) for b in range(1, largest + 1)}  # fmt: skip
            return _normalized(pmf, where)
        if kind == "zipf":
            a = float(arg)
            if not 0 <= a <= 10:
                raise ValueError
            return _normalized({b: b**-a for b in range(1, largest + 1)}, where)
    except RequestsError:
        raise
    except ValueError:
        pass
    forms = "; ".join(f"{k} ({v})" for k, v in BUILTIN.items())
    raise RequestsError(
        f"{where}: not a request file or a built-in distribution; the built-in ones: {forms}"
    )


def replay_time(times: Mapping[int, float], batch: int) -> tuple[float, bool]:
    """Replay time of a graph of `batch` rows, from the measured ones: exact where
    measured, else linear between the measured sizes around it (the smallest's below
    it); and whether it was interpolated. ValueError above the largest measured size."""
    sizes = sorted(times)
    if batch in times:
        return times[batch], False
    if batch > sizes[-1]:
        raise ValueError(f"batch {batch} is above the largest size measured ({sizes[-1]})")
    i = bisect.bisect_left(sizes, batch)
    if i == 0:
        return times[sizes[0]], True
    lo, hi = sizes[i - 1], sizes[i]
    t = times[lo] + (times[hi] - times[lo]) * (batch - lo) / (hi - lo)
    return t, True


@dataclass(frozen=True, kw_only=True)
class LadderCost:
    """What a ladder costs for a request distribution. Per step: `expected_us`, the replay
    time of the size it pads to; `exact_us`, of a graph of each exact size; `lost_us`,
    their difference (the time lost to padding), each None without replay times (the
    CPU); `padding_share`, the share of replayed rows that are padding. `uncovered`: the
    share of steps above the ladder's largest size (not in the figures: an engine runs
    those eagerly). `interpolated`: some figure rests on a size not measured. `graphs`:
    how many sizes it captures; `memory`: their own pools' bytes summed (interpolated like
    the times where a size was not measured; None without memory figures), what the
    ladder holds at most (a shared pool less)."""

    name: str
    sizes: tuple[int, ...]
    graphs: int
    memory: int | None
    expected_us: float | None
    exact_us: float | None
    lost_us: float | None
    padding_share: float
    uncovered: float
    interpolated: bool


def ladder_cost(
    name: str,
    ladder: Sequence[int],
    requests: Distribution,
    times: Mapping[int, float] | None,
    memory: Mapping[int, int] | None = None,
) -> LadderCost:
    """`ladder`'s cost for `requests`; `times` None (no replay measured): its padding
    alone, the time figures None."""
    sizes = tuple(sorted(set(ladder)))
    expected = exact = rows = padded = uncovered = covered = 0.0
    interpolated = False
    held = None
    if memory:
        parts = [replay_time(memory, s) for s in sizes]  # the same linear rule, for bytes
        held = round(sum(m for m, _ in parts))
        interpolated |= any(i for _, i in parts)
    for b, w in requests.items():
        i = bisect.bisect_left(sizes, b)
        if i == len(sizes):
            uncovered += w
            continue
        if times is not None:
            t_pad, i_pad = replay_time(times, sizes[i])
            t_exact, i_exact = replay_time(times, b)
            interpolated |= i_pad or i_exact
            expected += w * t_pad
            exact += w * t_exact
        covered += w
        rows += w * sizes[i]
        padded += w * (sizes[i] - b)
    if not covered:
        raise ValueError(f"ladder {list(sizes)} covers no request (all are above {sizes[-1]})")
    return LadderCost(
        name=name,
        sizes=sizes,
        graphs=len(sizes),
        memory=held,
        expected_us=None if times is None else expected / covered,
        exact_us=None if times is None else exact / covered,
        lost_us=None if times is None else (expected - exact) / covered,
        padding_share=padded / rows,
        uncovered=uncovered,
        interpolated=interpolated,
    )


def vllm_ladder(largest_request: int) -> tuple[int, ...]:
    """vLLM's default capture sizes, [1, 2, 4] then every multiple of 8 (its runner's
    `[1, 2, 4] + [8 * i ...]`, vllm-project/vllm #7894), up to the first size that covers
    `largest_request`."""
    out = [1, 2, 4]
    while out[-1] < largest_request:
        out.append(8 * (len(out) - 2))
    return tuple(out[: bisect.bisect_left(out, largest_request) + 1])


def choose(
    requests: Distribution,
    times: Mapping[int, float],
    *,
    most: int | None = None,
    memory: Mapping[int, int] | None = None,
    budget: int | None = None,
) -> tuple[int, ...]:
    """The ladder of measured sizes with the least expected replay time per step that
    covers every request: at most `most` sizes, and with `budget`, the sizes' `memory`
    (bytes) summing to no more. ValueError where none fits, saying why."""
    sizes = sorted(times)
    largest = max(requests)
    if largest > sizes[-1]:
        raise ValueError(
            f"requests reach batch {largest}, above the largest size measured ({sizes[-1]}): "
            "sweep a size that covers them"
        )
    top = bisect.bisect_left(sizes, largest)  # the smallest size covering every request
    cand = sizes[: top + 1]
    if budget is not None and memory is None:
        raise ValueError("a memory budget needs each size's memory")
    mem = [0 if budget is None else int(memory[s]) for s in cand]
    # weight of requests in (cand[a - 1], cand[b]], a = 0 meaning from 1
    cum = [0.0]
    for s in cand:
        cum.append(sum(w for r, w in requests.items() if r <= s))

    def segment(a: int, b: int) -> float:
        return (cum[b + 1] - cum[a]) * times[cand[b]]

    # states[b]: Pareto-best (cost, memory, count, ladder) of ladders whose largest is cand[b]
    states: list[list[tuple[float, int, int, tuple[int, ...]]]] = []
    for b in range(len(cand)):
        here = []
        if budget is None or mem[b] <= budget:
            here.append((segment(0, b), mem[b], 1, (cand[b],)))
        for a in range(b):
            for cost, m, n, ladder in states[a]:
                m2, n2 = m + mem[b], n + 1
                if (budget is not None and m2 > budget) or (most is not None and n2 > most):
                    continue
                here.append((cost + segment(a + 1, b), m2, n2, (*ladder, cand[b])))
        states.append(_pareto(here, counts=most is not None))
    best = [s for s in states[top] if most is None or s[2] <= most]
    if not best:
        why = f"{cand[-1]} alone needs {mem[-1]} bytes" if budget is not None else ""
        raise ValueError(
            f"no ladder covers batch {largest} within the limits given"
            + (f" (a budget of {budget} bytes; {why})" if why else "")
        )
    return min(best)[3]


def fewest_padded(
    requests: Distribution, sizes: Sequence[int], *, most: int | None = None
) -> tuple[int, ...]:
    """The ladder of `sizes` (at most `most` of them) that pads the fewest rows per step:
    `choose` with each size's rows standing in for its time (the rows a step replays,
    less the requests' own, are its padded rows). Needs no timing."""
    return choose(requests, {s: float(s) for s in sizes}, most=most)


def _pareto(states: list, *, counts: bool) -> list:
    """Drop every state another beats or equals in cost, memory and (when sizes are
    limited) count: the rest are the ones a longer ladder may still want."""
    states.sort()
    kept: list = []
    for s in states:
        if not any(k[1] <= s[1] and (not counts or k[2] <= s[2]) for k in kept):
            kept.append(s)
    return kept
