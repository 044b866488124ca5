"""How `profile` replays graphs under CUPTI and times them: `ProfileSettings`, the one
source of its defaults (its timing defaults are ReplaySettings'). Plain data, no torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.settings import check_whole_numbers


@dataclass(frozen=True)
class ProfileSettings:
    """How `profile` replays graphs under CUPTI, and how it times them for the measured
    round time and savings (trials and builds as in ReplaySettings, whose defaults these
    are). Each field's metadata carries its help text; the CLI's flags are made from them.

    One profiled window is a torch.profiler session around `replays + 1` back-to-back
    replays: the first is a lead-in (its end is when the next replay's first node became
    ready), the others are one sample of every node each."""

    trials: int = field(
        default=ReplaySettings.trials,
        metadata={"help": "timed trials per round, for measured times and savings", "min": 2},
    )
    builds: int = field(
        default=ReplaySettings.builds,
        metadata={
            "help": "times each round is built afresh (timed and profiled in each build; "
            "the built-in round only)",
            "min": 1,
        },
    )
    windows: int = field(
        default=3,
        metadata={"help": "profiled windows per build (torch.profiler sessions)", "min": 1},
    )
    replays: int = field(
        default=10,
        metadata={"help": "replays profiled per window, each a sample of every node", "min": 2},
    )
    warmup: int = field(default=ReplaySettings.warmup, metadata={"min": 0})
    calibration_rounds: int = field(
        default=8,
        metadata={
            "help": "rounds over the calibration chains that measure CUPTI's own cost per "
            "node (0: not measured; a timed graph's net figures take its own timing's)",
            "min": 0,
        },
    )
    host_launches: int = field(
        default=5,
        metadata={
            "help": "single launches of each graph timed on the CPU from an idle device per "
            "trial, for its host launch time (0: not measured)",
            "min": 0,
        },
    )
    # Replays of each graph drawn in trace.json (capture/profile/trace.py): the first of
    # its first window. Three show a replay with a neighbour on each side and keep the
    # file small enough to scroll through.
    trace_replays: int = field(default=3, metadata={"min": 1})

    def __post_init__(self) -> None:
        check_whole_numbers(self)

    def timing(self) -> ReplaySettings:
        """The ReplaySettings that time rounds alongside the profile."""
        return ReplaySettings(trials=self.trials, builds=self.builds, warmup=self.warmup)

    @property
    def replays_per_reset(self) -> int:
        """The most replays in a row a profiled step takes from its reset state (a step
        with `step.reset` is reset before each run of replays): the longest of the first
        replay (1), the warm-up replays (`warmup`), a timed trial (`round_replays`), a
        trial of host launches (`host_launches`) and a profiled window (`replays` + its
        lead-in). Its buffers must hold that many."""
        longest = max(self.timing().round_replays, self.host_launches, self.replays + 1)
        return max(1, self.warmup, longest)
