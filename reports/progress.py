"""Progress of a command's phases on stderr, fed by capture's `progress` callbacks (each
called with a phase's name as it starts; capture/profile/run.py `Progress`).

On a terminal, a rich spinner line with the phase and the time it has taken, gone when the
command ends; anything else (a log, CI, a pipe) gets plain lines, one as each phase starts
and one as it finishes, with no carriage returns or cursor codes. Only stderr is written:
stdout is the same with and without a terminal. rich.progress is imported only where it
renders (a terminal).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import TracebackType

    from rich.console import Console


class Phases:
    """`phases(name)` starts a phase and finishes the one before; leaving the `with`
    finishes the last. `console`: the command's stderr console (reports/cli/console.py)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self._current: str | None = None
        self._started = 0.0
        self._bar = None
        self._task = None

    def __enter__(self) -> Phases:
        if self.live:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),  # phases name user things
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __call__(self, name: str) -> None:
        from graph_harness.capture.text import printable

        self._finish()
        # a phase names user things (a --target file's name): a control character in one
        # is shown as its escape, here too (the spinner's column makes its own Text, past
        # the console's render_str)
        name = printable(name)
        self._current, self._started = name, time.monotonic()
        if self._bar is not None:
            if self._task is None:
                self._task = self._bar.add_task(name, total=None)
            self._bar.update(self._task, description=name)
        else:
            self._line(f"{name} ...")

    def _finish(self) -> None:
        if self._current is not None and self._bar is None:
            self._line(f"{self._current}: done in {time.monotonic() - self._started:.1f} s")
        self._current = None

    def _line(self, text: str) -> None:
        self.console.print(text, style="dim", soft_wrap=True, markup=False)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self._finish()  # a phase cut short by an error is not "done"
        self._current = None
        if self._bar is not None:
            self._bar.__exit__(kind, value, tb)
