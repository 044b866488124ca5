"""`--target`: import the user's module, call its factory, and say where a failure came from.

`--target` IMPORTS AND RUNS the user's code: the module's top level, then FUNCTION(), then
the callable it returns. `MODULE:FUNCTION` or `path/to/file.py:FUNCTION`, the user's
folders searched last and answering the user's code's imports only
(reports/cli/user_imports.py). `step.reset`, `step.feed` and `step.module` ride on the
step. Every call into the user's code goes through `_guard_exit` (sys.exit, closed
descriptors, stdout sent to stderr). In full: docs/your-model.md, "How `--target` loads
and runs your code"."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from graph_harness.capture.descriptors import take_lost
from graph_harness.capture.errors import HarnessError, UsageError
from graph_harness.capture.paths import InputPathError, check_input
from graph_harness.capture.text import a_type, printable
from graph_harness.reports.cli import user_imports
from graph_harness.reports.cli.origin import root_of
from graph_harness.reports.cli.user_stdout import stdout_to_stderr

if TYPE_CHECKING:
    from typing import Any

    import torch


class TargetUsageError(UsageError, ValueError):
    """The --target spec is malformed or does not name an importable factory (exit 2)."""


class TargetError(HarnessError, RuntimeError):
    """The target's own code misbehaved (called sys.exit, issued no work): exit 1."""


@dataclass(frozen=True)
class Target:
    spec: str
    module: ModuleType
    root: Path | None  # the folder the user's code lives in, to find their frames
    step: object  # the zero-argument callable the factory returned
    step_module: object | None = None  # `step.module`: the model, for --module-scopes
    reset: object | None = None  # `step.reset`, guarded as the step is; None if it has none

    @property
    def name(self) -> str:
        """The workload's name in exports, tables, documents and report.md: the spec as
        the user typed it (`examples/llama_decode.py:make_step`), as text
        (capture/text.py), the one name every output and message gives a --target."""
        return printable(self.spec)

    def model(self) -> torch.nn.Module:
        """The step's model for --module-scopes; TargetUsageError saying how otherwise."""
        import torch

        m = self.step_module
        if not isinstance(m, torch.nn.Module):
            got = "has none" if m is None else f"is {a_type(m)}"
            raise TargetUsageError(
                f"--module-scopes needs the model: the step {self.spec!r} returned must carry "
                f"it as `step.module = model` (a torch.nn.Module; its `.module` {got}); see "
                "examples/llama_decode.py"
            )
        return m


def output_names(specs: list[str]) -> list[str]:
    """Each --target's name in a report or profile (its files, tables, frames): its
    FUNCTION (`make_step`), `-a` and `-b` added when two share one; as text
    (capture/text.py), since a FUNCTION from argv can hold a lone surrogate."""
    names = [printable(spec.rpartition(":")[2]) for spec in specs]
    if len(names) == 2 and names[0] == names[1]:
        names = [f"{names[0]}-a", f"{names[1]}-b"]
    return names


def is_file_spec(module: str) -> bool:
    """Whether a spec's MODULE is a path to a file (`path/to/file.py`), not a dotted name."""
    return module.endswith(".py") or os.sep in module or (os.altsep or os.sep) in module


def _import_file(path_text: str) -> ModuleType:
    path = Path(path_text)
    try:
        check_input(path, "--target file")
        with open(path, "rb"):  # readable: importlib would blame its own frozen code
            pass
    except InputPathError as e:
        raise TargetUsageError(str(e)) from None
    except OSError as e:
        raise TargetUsageError(
            f"--target file {path_text} cannot be read: {(e.strerror or str(e)).lower()}"
        ) from None
    user_imports.add_folder(path.resolve().parent)  # for its own sibling imports
    # A private module name: the file's stem may be a standard-library name (profile.py).
    name = f"_graph_harness_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetUsageError(f"--target {path_text} cannot be loaded as a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling look their module up by name
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def spec_problem(spec: str) -> str | None:
    """What is wrong with a --target spec's form, in one line, or None: decided before
    anything is imported (the parser calls it: a typo costs no torch start-up)."""
    module_name, sep, func = spec.rpartition(":")
    if not sep or not module_name or not func:
        return f"--target must be MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}"
    if not is_file_spec(module_name) and not all(p.isidentifier() for p in module_name.split(".")):
        return (
            f"--target {spec!r}: MODULE must be a dotted module name (mypkg.steps) or a path "
            f"to a .py file (path/to/file.py), got {module_name!r}"
        )
    return None


def missing_file(spec: str) -> str | None:
    """For `path/to/file.py:FUNCTION` whose file is not there (nor a link by that name):
    "no such file: PATH", with the nearest name in its folder where one is near
    (`examples/lama_decode.py` -> `examples/llama_decode.py`); else None. Decided
    before anything is imported: a typo costs no torch start-up."""
    import difflib

    module_name = spec.rpartition(":")[0]
    if not module_name or not is_file_spec(module_name) or os.path.lexists(module_name):
        return None
    folder, name = os.path.split(module_name)
    try:
        names = [e.name for e in os.scandir(folder or ".") if e.name.endswith(".py")]
    except OSError:  # no such folder either: nothing to suggest from
        names = []
    near = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {printable(os.path.join(folder, near[0]))}?" if near else ""
    return f"no such file: {printable(module_name)}{hint}"


def target_arg(text: str) -> str:
    """The argparse type of --target: its form checked (spec_problem), and its file there
    (missing_file), the text kept."""
    import argparse

    problem = spec_problem(text) or missing_file(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem.removeprefix("--target "))
    return text


def load_target(spec: str) -> Target:
    """Import the module named by `spec` and call its factory (this runs the user's code)."""
    return build_target(load_factory(spec))


@dataclass(frozen=True)
class Factory:
    """A --target's factory, its module imported: `build_target` calls it."""

    spec: str
    module: ModuleType
    function: Callable[..., object]

    @property
    def name(self) -> str:
        """The workload's name, as Target.name gives it."""
        return Target(self.spec, self.module, None, None).name

    def check_takes(self, keyword: str, why: str) -> None:
        """TargetUsageError unless the factory takes `keyword` (`why`: who calls it so)."""
        try:
            params = inspect.signature(self.function).parameters
        except (TypeError, ValueError):  # a builtin or C callable: let the call decide
            return
        if keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        func = self.spec.rpartition(":")[2]
        raise TargetUsageError(
            f"--target {self.spec!r}: {why} calls {func}({keyword}=...), and {func} takes no "
            f"{keyword!r}: give it one (def {func}({keyword}: int = 1): ...)"
        )


def load_factory(spec: str) -> Factory:
    """Import the module named by `spec` (its top level runs) and find its factory."""
    problem = spec_problem(spec)
    if problem is not None:
        raise TargetUsageError(problem)
    module_name, _, func = spec.rpartition(":")
    if is_file_spec(module_name):
        mod = _guard_exit(_import_file, spec, "while importing")(module_name)
    else:
        # last: as `python -m` would find modules beside you (for your imports only)
        user_imports.add_folder(Path(os.getcwd()), top=module_name.partition(".")[0])
        try:
            mod = _guard_exit(importlib.import_module, spec, "while importing")(module_name)
        except ModuleNotFoundError as e:
            if e.name and (e.name == module_name or module_name.startswith(e.name + ".")):
                raise TargetUsageError(no_module(spec, e.name)) from e
            raise
    factory = getattr(mod, func, None)
    if factory is None:
        raise TargetUsageError(no_factory(spec, _functions_of(mod)))
    if not callable(factory):
        raise TargetUsageError(f"--target {spec!r}: {func!r} is {a_type(factory)}, not a function")
    return Factory(spec, mod, factory)


def build_target(factory: Factory, **kwargs: object) -> Target:
    """Call the factory (with `kwargs`: the sweep's `batch=`) and check what it returned;
    the step, its reset and its feed are guarded (module docstring)."""
    spec, mod = factory.spec, factory.module
    step = _guard_exit(factory.function, spec, "in its factory")(**kwargs)
    if not callable(step):
        raise TargetUsageError(
            f"--target {spec!r} returned {type(step).__name__}, not a callable: FUNCTION() must "
            "return the zero-argument step to count"
        )
    root = root_of(mod)
    model = getattr(step, "module", None)
    from graph_harness.capture.state.steps import StepStateError, feed_of, reset_of

    try:  # the protocol's own checks (capture/state/steps.py), in --target's words
        reset, feed = reset_of(step), feed_of(step)
    except StepStateError as e:
        raise TargetUsageError(f"--target {spec!r}: its {e}") from None
    guarded = _guard_exit(step, spec, "in its step")
    if reset is not None:
        # functools.wraps copied the raw reset onto the wrapper: the guarded one replaces it
        reset = guarded.reset = _guard_exit(reset, spec, "in its reset")
    if feed is not None:
        guarded.feed = _guard_exit(feed, spec, "in its feed")
    return Target(spec, mod, root, guarded, model, reset)


def no_module(spec: str, name: str) -> str:
    """The refusal of a MODULE:FUNCTION target whose module `name` is not found."""
    where = "searched the installed packages, then the current folder"
    return f"--target {spec!r}: no module named {name!r} ({where})"


def no_factory(spec: str, functions: list[str]) -> str:
    """The refusal of a target whose module has no FUNCTION, naming the `functions` it
    has, ten at most (the same words before the import: target_source.py)."""
    module_name, _, func = spec.rpartition(":")
    shown = ", ".join(functions[:10])
    if len(functions) > 10:
        shown += f" and {len(functions) - 10} more"
    listed = f"; its functions: {shown}" if functions else ""
    return f"--target {spec!r}: module {module_name!r} has no {func!r}{listed}"


def _functions_of(mod: ModuleType) -> list[str]:
    """The public functions a module defines itself, in the order it bound them."""
    return [
        n
        for n, v in vars(mod).items()
        if not n.startswith("_")
        and callable(v)
        and getattr(v, "__module__", None) == mod.__name__
        and not isinstance(v, type)
    ]


def root_guess(spec: str) -> Path:
    """Where the user's code lives, known before importing it: the file's folder for
    `path/file.py:FUNCTION`, else the current folder."""
    module_name = spec.rpartition(":")[0]
    if module_name and is_file_spec(module_name):
        return Path(module_name).resolve().parent
    return Path(os.getcwd()).resolve()


def _guard_exit(fn: Callable[..., Any], spec: str, where: str) -> Callable[..., Any]:
    """`fn`, the user's, called with its stdout sent to stderr, its sys.exit() made a
    TargetError, and the descriptors graph-harness holds checked after it (module
    docstring)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            with stdout_to_stderr():
                return fn(*args, **kwargs)
        except SystemExit as e:
            raise TargetError(
                f"--target {spec!r} called sys.exit({_code(e)}) {where}; a target must "
                "return (or raise), not exit"
            ) from e
        finally:
            _check_descriptors(spec, where)

    try:  # its name, docstring and attributes (`module`, `reset`), as functools.wraps does
        with stdout_to_stderr():
            functools.update_wrapper(call, fn)
    except (TypeError, AttributeError):  # an object whose attributes answer oddly
        call.__wrapped__ = fn
    return call


def _check_descriptors(spec: str, where: str) -> None:
    """TargetError when the call closed descriptors graph-harness holds (capture/
    descriptors.py): said here, where it happened, and the run stops before writing into
    a number the target's own files may have taken."""
    gone = take_lost()
    if gone:
        raise TargetError(
            f"--target {spec!r} closed descriptors graph-harness holds {where} "
            f"({', '.join(gone)}); a target must close only the descriptors it opened "
            "(os.closerange(3, ...) closes everyone's: close yours by name)"
        )


def _code(e: SystemExit) -> str:
    try:
        text = repr(e.code)
    except BaseException:  # the user's __repr__ raised
        return "..."
    return text if len(text) <= 200 else text[:197] + "..."
