"""`--module-scopes` in one process of a recorded program: the global module hooks that
name each capture's modules (capture/scopes/program.py), and Inductor's provenance
(capture/scopes/provenance.py) collected for the compiled code's nodes.

Provenance is collected from the moment Inductor is imported, not before: importing it
takes a second or more of a process's start, and a process that never imports it compiles
nothing for Inductor (capture/record/after_import.py). Inductor's config is patched before
any of the program's compiles can read it: a compile imports Inductor first."""

from __future__ import annotations

import contextlib
from typing import Any

from graph_harness.capture.record.after_import import when_imported
from graph_harness.capture.record.compiled_scopes import PROVENANCE

INDUCTOR = "torch._inductor"


class ProcessModuleScopes:
    """Started with a process's recorder and stopped with it; a note for the recording
    (where provenance cannot be read) goes into `notes`."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self._collecting: Any = None
        self._saved: Any = None
        self._leave = lambda: None
        self._stopped = False

    def start(self) -> None:
        from graph_harness.capture.scopes.modules import install_hooks

        install_hooks()
        self._leave = when_imported(INDUCTOR, self._collect)

    def _collect(self) -> None:
        """Inductor is imported: collect its provenance until stop (never raises: it
        runs inside the program's import of Inductor)."""
        if self._stopped or self._collecting is not None:
            return
        try:
            from graph_harness.capture.scopes.provenance import collecting

            collect = collecting()
            log = collect.__enter__()
        except Exception as e:
            self.notes.append(f"compiled code stays in its enclosing scope: {e}")
            return
        self._collecting = collect
        self._saved, PROVENANCE[0] = PROVENANCE[0], log  # an outer recording's, given back
        if not log.supported:
            self.notes.append(f"compiled code stays in its enclosing scope: {log.unavailable}")

    def stop(self) -> None:
        from graph_harness.capture.scopes.modules import uninstall_hooks

        self._stopped = True
        self._leave()
        if self._collecting is not None:
            with contextlib.suppress(Exception):
                self._collecting.__exit__(None, None, None)
            self._collecting = None
            PROVENANCE[0] = self._saved
        with contextlib.suppress(Exception):
            uninstall_hooks()
