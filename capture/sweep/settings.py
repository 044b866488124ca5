"""How `sweep` times its sizes, reads their memory and deals its shared pool's checks' order:
`SweepSettings`, the one source of its defaults (the CLI's flags are made from its
fields). Plain data, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.settings import SettingsError, check_whole_numbers

POOL_MODES = ("own", "shared", "both")
# What `sweep --check MODE` runs, the first what `--check` alone means
CHECK_MODES = {
    "alone": "each size's graph checked by itself, in its own pool",
    "interleaved": "that, then every size replayed in turns from one shared pool, in a "
    "serving order dealt by --seed, each replay against its size's eager step "
    "(capture/check/interleaved.py)",
    "updated": "that, then one executable switched between the sizes by cudaGraphExecUpdate, "
    "in a walk through every transition dealt by --seed, each launch against the size's own "
    "executable and its eager step; launch attributes an update may not carry flagged, and "
    "the update's cost beside re-capture + instantiate (capture/check/updated.py)",
}
# the modes past "alone" check the shared pool's graphs (capture/sweep/shared.py runs each:
# SHARED_CHECKS); each is a field of SweepResult and a column of its sizes
SharedMode = Literal["interleaved", "updated"]
SHARED_MODES: tuple[SharedMode, ...] = get_args(SharedMode)


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep times each captured size and reads its memory, and the seed of its
    interleaved check's serving order. Each field's metadata carries its help text."""

    trials: int = field(
        default=ReplaySettings.trials,
        metadata={"help": "timed trials per size, interleaved across sizes (>= 2)", "min": 2},
    )
    # A decode step's replay lasts 0.1-2 ms: 10 back-to-back replays per trial keep the
    # two events' own cost far under 1% of the timed span.
    replays: int = field(
        default=10, metadata={"help": "replays per timed trial (one run from the reset)", "min": 1}
    )
    warmup: int = field(default=ReplaySettings.warmup, metadata={"min": 0})
    host_launches: int = field(
        default=5,
        metadata={
            "help": "single launches of each size's graph timed on the CPU from an idle "
            "device per trial, for its host launch time (0: not measured)",
            "min": 0,
        },
    )
    # The leak check: the pool after this many more replays against the pool after one.
    leak_replays: int = field(
        default=100,
        metadata={"help": "replays between the two readings of the leak check", "min": 1},
    )
    # `--check interleaved` (capture/check/interleaved.py): the seed of the shuffle that
    # deals the sizes' calls into one serving order; `--check updated` (capture/check/
    # updated.py): of its walk. Recorded, so a failure can be replayed
    seed: int = field(
        default=0,
        metadata={
            "help": "with --check interleaved or updated: the seed of the serving order the "
            "sizes' replays are shuffled into, or of the walk between sizes (recorded)",
            "min": 0,
        },
    )

    # The sizes whose executables are resolved below the page (capture/graph/exec_size.py):
    # the ones a prediction samples (`--predict-from`); each resolution leaves its copies'
    # pages with the driver. Not a flag of its own.
    resolve: tuple[int, ...] = field(default=(), metadata={"min": 1})

    def __post_init__(self) -> None:
        check_whole_numbers(self)


def check_sizes(sizes: object) -> tuple[int, ...]:
    """Batch sizes to capture: whole numbers >= 1, each once; sorted ascending. ValueError
    saying what was expected otherwise."""
    if isinstance(sizes, str | bytes) or not hasattr(sizes, "__iter__"):
        raise SettingsError(f"sizes must be a list of batch sizes, got {sizes!r}")
    out = list(sizes)
    if not out:
        raise SettingsError("sizes is empty: give at least one batch size (--sizes 1 2 4 8)")
    for s in out:
        if isinstance(s, bool) or not isinstance(s, int) or s < 1:
            raise SettingsError(f"a batch size must be a whole number >= 1, got {s!r}")
    twice = sorted({s for s in out if out.count(s) > 1})
    if twice:
        raise SettingsError(f"batch size {twice[0]} is given twice: give each size once")
    return tuple(sorted(out))
