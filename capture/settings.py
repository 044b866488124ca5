"""The settings classes' one check (StepSettings, ReplaySettings, ProfileSettings,
SweepSettings): every field whose metadata has a "min" holds a whole number, or a tuple of
whole numbers, of at least that, else SettingsError naming the field and what was
expected; SettingsError, the one error of every settings class (and of RoundParams). No
torch here: the command line's parser reads the settings."""

from __future__ import annotations

from dataclasses import fields

from graph_harness.capture.errors import UsageError

MAX_COUNT = (
    100_000  # a count's ceiling (calls, replays, trials), flag or keyword: past it is a typo
)


class SettingsError(UsageError, ValueError):
    """A setting out of its range or of the wrong type: the field, what it takes, what it
    got. A ValueError still, for callers that catch those."""


def check_whole_numbers(settings: object) -> None:
    """SettingsError for the first field with a "min" that does not hold whole numbers >= it
    (a bool is not a number here, though Python counts it an int)."""
    for f in fields(settings):
        if "min" not in f.metadata:
            continue
        v = getattr(settings, f.name)
        values = v if isinstance(v, tuple) else (v,)
        what = "whole numbers" if isinstance(v, tuple) else "a whole number"
        for x in values:
            if isinstance(x, bool) or not isinstance(x, int) or x < f.metadata["min"]:
                raise SettingsError(f"{f.name} must be {what} >= {f.metadata['min']}, got {v!r}")
