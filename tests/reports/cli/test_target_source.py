"""A target whose FUNCTION is surely missing, told from its module's syntax tree before
torch's import (reports/cli/target_source.py): a `file.py:FUNCTION` and a dotted
`MODULE:FUNCTION` (found as its import would find it, module_source.py), refused in the
words the import would use, and never refused where running the module could bind the
name (issue 60, item 7)."""

import importlib
import importlib.machinery
import importlib.util
import sys
import uuid

import pytest

from graph_harness.reports.cli.target import TargetUsageError, load_factory
from graph_harness.reports.cli.target_source import missing_factory

# Files whose top level surely binds no `make`: each is refused before it runs.
SURELY_MISSING = {
    "defs": "def make_step():\n    pass\n\n\ndef _private():\n    pass\nX = 3\n",
    "nothing": "X = 1\n",
    # defs in blocks that run at the top level are listed, in source order
    "blocks": "try:\n    def a():\n        pass\nfinally:\n    def b():\n"
    "        pass\nif True:\n    def c():\n        pass\ndef d():\n    def inner():\n"
    "        pass\nclass E:\n    def method(self):\n        pass\n",
    "imports": "import os.path\nfrom json import loads as load_json\n",
}

# Files that bind `make`, or could without the tree showing it: left to the import.
MAY_BIND = {
    "def": "def make():\n    pass\n",
    "assigned in a branch": "import sys\nif sys.version_info > (3,):\n    make = print\n",
    "imported": "from functools import partial as make\n",
    "import star": "from os.path import *\n",
    "module __getattr__": "def __getattr__(name):\n    return print\n",
    "globals()": "globals()['ma' + 'ke'] = print\n",
    "vars()": "vars().update(dict(zip(['mak' + 'e'], [print])))\n",
    "setattr": "import sys\nsetattr(sys.modules[__name__], 'm' + 'ake', print)\n",
    "exec": "exec('m' + 'ake = print')\n",
    "a string names it": "from sympy import var\nvar('make')\n",
    "walrus": "[(make := print) for _ in [0]]\n",
    "global in a function": "def f():\n    global make\n    make = print\nf()\n",
    "a for target": "for make in [print]:\n    pass\n",
    "a with target": "import contextlib\nwith contextlib.nullcontext(print) as make:\n    pass\n",
    "a frame's globals": "import sys\nsys._getframe().f_globals.update(m=print)\n",
    "an attribute set": "import importlib\nimportlib.import_module(__name__).make = print\n",
    "a class": "class make:\n    pass\n",
    "annotated": "from typing import Callable\nmake: Callable\n",
    "not Python": "def make(:\n",
}


@pytest.mark.parametrize("name", sorted(SURELY_MISSING))
def test_a_missing_factory_is_refused_as_the_import_would(tmp_path, name):
    path = tmp_path / "steps.py"
    path.write_text(SURELY_MISSING[name])
    spec = f"{path}:make"
    said = missing_factory(spec)
    assert said is not None
    # the same words load_factory gives once the file has run
    with pytest.raises(TargetUsageError) as e:
        load_factory(spec)
    assert said == str(e.value)


@pytest.mark.parametrize("name", sorted(MAY_BIND))
def test_a_file_that_may_bind_the_name_is_left_to_the_import(tmp_path, name):
    path = tmp_path / "steps.py"
    path.write_text(MAY_BIND[name])
    assert missing_factory(f"{path}:make") is None


def test_what_cannot_be_read_or_is_not_a_file_is_left_to_the_import(tmp_path):
    import os

    assert missing_factory("tests.targets:nonesuch") is None  # imported already: told there
    (tmp_path / "steps.txt").write_text("X = 1\n")  # importlib loads no such file as Python
    assert missing_factory(f"{tmp_path / 'steps.txt'}:make") is None
    (tmp_path / "steps.py").write_text("X = 1\n")
    assert missing_factory(f"{tmp_path / 'steps.py'}:__doc__") is None  # every module's
    assert missing_factory(f"{tmp_path / 'absent.py'}:make") is None
    (tmp_path / "folder.py").mkdir()
    assert missing_factory(f"{tmp_path / 'folder.py'}:make") is None
    os.mkfifo(tmp_path / "fifo.py")  # never opened: opening a FIFO waits for a writer
    assert missing_factory(f"{tmp_path / 'fifo.py'}:make") is None
    (tmp_path / "nul.py").write_bytes(b"x = 1\0\n")
    assert missing_factory(f"{tmp_path / 'nul.py'}:make") is None


def test_the_listing_names_the_defs_of_every_branch(tmp_path):
    # a def in a branch that will not run is still a name worth suggesting
    path = tmp_path / "steps.py"
    path.write_text("try:\n    def a():\n        pass\nexcept ImportError:\n    def b():\n"
                    "        pass\n")  # fmt: skip
    assert missing_factory(f"{path}:make").endswith("its functions: a, b")


def test_the_listing_is_cut_at_ten(tmp_path):
    path = tmp_path / "many.py"
    path.write_text("".join(f"def f{i}():\n    pass\n" for i in range(12)))
    said = missing_factory(f"{path}:make")
    assert said.endswith("its functions: f0, f1, f2, f3, f4, f5, f6, f7, f8, f9 and 2 more")


# --- a dotted MODULE -----------------------------------------------------------------------


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fresh package `NAME` on sys.path, made of the files given (`{"steps.py": text}`;
    an `__init__.py` unless given): its name is returned, and every module of it is
    forgotten after the test."""
    name = f"ghpkg_{uuid.uuid4().hex[:10]}"
    root = tmp_path / "site"

    def make(files: dict[str, str], init: str | None = "") -> str:
        (root / name).mkdir(parents=True)
        if init is not None:
            (root / name / "__init__.py").write_text(init)
        for path, text in files.items():
            (root / name / path).parent.mkdir(parents=True, exist_ok=True)
            (root / name / path).write_text(text)
        monkeypatch.syspath_prepend(str(root))
        return name

    yield make
    for m in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[m]


@pytest.mark.parametrize("name", sorted(SURELY_MISSING))
def test_a_dotted_modules_missing_factory_is_refused_as_the_import_would(package, name):
    spec = f"{package({'steps.py': SURELY_MISSING[name]})}.steps:make"
    said = missing_factory(spec)
    assert said is not None
    with pytest.raises(TargetUsageError) as e:
        load_factory(spec)
    assert said == str(e.value)


@pytest.mark.parametrize("name", sorted(MAY_BIND))
def test_a_dotted_module_that_may_bind_the_name_is_left_to_the_import(package, name):
    spec = f"{package({'steps.py': MAY_BIND[name]})}.steps:make"
    assert missing_factory(spec) is None


# A package on the way whose `__init__` could move where its submodules are found: neither
# a missing factory nor a missing module is said before the import.
PACKAGE_MAY_MOVE = {
    "extends its __path__": "from pkgutil import extend_path\n"
    "__path__ = extend_path(__path__, __name__)\n",
    "a namespace declared": "from pkg_resources import declare_namespace\n"
    "declare_namespace(__name__)\n",
    "a finder installed": "import sys\nsys.meta_path.append(object())\n",
    "a path hook installed": "import sys\nsys.path_hooks.insert(0, print)\n",
    "sys.modules written": "import sys, types\n"
    "sys.modules[__name__ + '.stepz'] = types.ModuleType('s')\n",
    "import star": "from os.path import *\n",
    "not Python": "def (:\n",
}
# One whose `__init__` could bind the name in the module: its missing factory is left to
# the import (a missing module still is not: the import fails as it is said early).
PACKAGE_MAY_BIND = {
    "the name set in it": "from . import steps\nsteps.make = print\n",
    "a string names it": "from . import steps\nsteps.__dict__.update({'make': print})\n",
}


@pytest.mark.parametrize("name", sorted(PACKAGE_MAY_MOVE))
def test_a_package_that_may_move_its_modules_is_left_to_the_import(package, name):
    pkg = package({"steps.py": "X = 1\n"}, init=PACKAGE_MAY_MOVE[name])
    assert missing_factory(f"{pkg}.steps:make") is None
    assert missing_factory(f"{pkg}.stepz:make") is None


@pytest.mark.parametrize("name", sorted(PACKAGE_MAY_BIND))
def test_a_package_that_may_bind_the_name_in_its_module_is_left_to_the_import(package, name):
    pkg = package({"steps.py": "X = 1\n"}, init=PACKAGE_MAY_BIND[name])
    assert missing_factory(f"{pkg}.steps:make") is None
    load_factory(f"{pkg}.steps:make")  # bound, by the package


# A module of the package that is not read early, imported on the way: it could bind the
# name in the target, or install a finder that has the target module.
OTHER_MODULE_MAY_BIND = {
    "a plugin sets it": (
        {"plugins.py": "from . import steps\nsteps.make = print\n"},
        "from . import plugins\n",
        "steps",
    ),
    "a plugin sets it, imported by name": (
        {"plugins.py": "import sys\nsys.modules[__package__ + '.steps'].make = print\n"},
        "from . import steps\nfrom . import plugins\n",
        "steps",
    ),
    "a finder has the module": (
        {
            "_hooks.py": "import importlib.abc, importlib.machinery, sys\n"
            "class F(importlib.abc.MetaPathFinder, importlib.abc.Loader):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.endswith('.generated'):\n"
            "            return importlib.machinery.ModuleSpec(name, self)\n"
            "    def create_module(self, spec):\n        return None\n"
            "    def exec_module(self, module):\n        module.make = print\n"
            "sys.meta_path.insert(0, F())\n"
        },
        "from . import _hooks\n",
        "generated",
    ),
}


@pytest.mark.parametrize("name", sorted(OTHER_MODULE_MAY_BIND))
def test_a_module_of_the_package_imported_on_the_way_leaves_it_to_the_import(package, name):
    files, init, module = OTHER_MODULE_MAY_BIND[name]
    pkg = package({"steps.py": "X = 1\n", **files}, init=init)
    before = list(sys.meta_path)
    try:
        assert missing_factory(f"{pkg}.{module}:make") is None
        assert load_factory(f"{pkg}.{module}:make").function is print  # it loads
    finally:
        sys.meta_path[:] = before


def test_a_module_that_hands_its_name_to_a_call_is_left_to_the_import(package, tmp_path):
    helper = "import sys\n\n\ndef export(name, names):\n    for n in names:\n"
    helper += "        setattr(sys.modules[name], n, print)\n"
    steps = "from .helper import export\n\nexport(__name__, ['ma' + 'ke'])\n"
    pkg = package({"steps.py": steps, "helper.py": helper})
    assert missing_factory(f"{pkg}.steps:make") is None
    # a file target: no import of its own package gives it away
    (tmp_path / "steps.py").write_text("import exporter\n\nexporter.export(__name__, ['m'])\n")
    assert missing_factory(f"{tmp_path / 'steps.py'}:make") is None
    assert load_factory(f"{pkg}.steps:make").function is print


def test_a_missing_module_is_refused_as_the_import_would(package):
    pkg = package({"steps.py": "def make_step():\n    pass\n"})
    for spec, missing in (
        (f"{pkg}.stepz:make_step", f"{pkg}.stepz"),  # a package's submodule
        (f"{pkg}x.steps:make_step", f"{pkg}x"),  # the top level: installed, then the folder
        (f"{pkg}.deeper.steps:make_step", f"{pkg}.deeper"),
    ):
        said = missing_factory(spec)
        assert said is not None and f"no module named {missing!r}" in said
        with pytest.raises(TargetUsageError) as e:
            load_factory(spec)
        assert said == str(e.value)


def test_packages_on_the_way_are_read_not_run(package, tmp_path):
    # a package, a package in it and the module: none of their code runs early
    marker = tmp_path / "ran"
    pkg = package(
        {
            "__init__.py": f"open({str(marker)!r}, 'w').close()\n",
            "inner/__init__.py": f"open({str(marker)!r}, 'w').close()\n",
            "inner/steps.py": f"open({str(marker)!r}, 'w').close()\n",
        }
    )
    said = missing_factory(f"{pkg}.inner.steps:make")
    assert said == f"--target '{pkg}.inner.steps:make': module '{pkg}.inner.steps' has no 'make'"
    assert not marker.exists() and not [m for m in sys.modules if m.startswith(pkg)]


def test_a_namespace_package_on_the_way_is_searched_as_the_import_would(package):
    pkg = package({"steps.py": "def make_step():\n    pass\n"}, init=None)
    said = missing_factory(f"{pkg}.steps:make")
    assert said is not None and said.endswith("has no 'make'; its functions: make_step")
    with pytest.raises(TargetUsageError) as e:
        load_factory(f"{pkg}.steps:make")
    assert said == str(e.value)


def test_a_namespace_package_in_one_is_left_to_the_import(package):
    # its path is computed from its parent's module, which is not imported yet
    pkg = package({"inner/steps.py": "X = 1\n"}, init=None)
    assert missing_factory(f"{pkg}.inner.steps:make") is None


def test_a_package_targets_submodule_of_that_name_is_left_to_the_import(package):
    # importing `pkg.make` anywhere binds `make` on the package, its __init__ unseen
    pkg = package({"make.py": "X = 1\n"})
    assert missing_factory(f"{pkg}:make") is None
    said = missing_factory(f"{pkg}:other")
    assert said == f"--target '{pkg}:other': module '{pkg}' has no 'other'"


def test_what_the_finders_cannot_tell_is_left_to_the_import(package, monkeypatch):
    pkg = package({"steps.py": "X = 1\n", "plain_module_parent.py": "X = 1\n"})
    assert missing_factory(f"{pkg}.plain_module_parent.sub:make") is None  # no package
    assert missing_factory(f"{pkg}:make") is not None
    assert missing_factory(f"{pkg}.steps:__doc__") is None  # every module's
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)  # not imported: read
    assert missing_factory("colorsys:nonesuch").startswith(
        "--target 'colorsys:nonesuch': module 'colorsys' has no 'nonesuch'; its functions: "
    )
    assert missing_factory("sys:nonesuch") is None  # built in: imported already
    monkeypatch.delitem(sys.modules, "_csv", raising=False)
    assert type(importlib.util.find_spec("_csv").loader).__name__ == "ExtensionFileLoader"
    assert missing_factory("_csv:nonesuch") is None  # compiled: no source to read
    importlib.import_module(f"{pkg}.steps")
    assert missing_factory(f"{pkg}.steps:make") is None  # imported already: its namespace
    # a parent imported already lends its own path: its submodules are still read
    assert missing_factory(f"{pkg}.other:make") == (
        f"--target '{pkg}.other:make': no module named '{pkg}.other' (searched the installed "
        "packages, then the current folder)"
    )


class _OwnLoader(importlib.machinery.SourceFileLoader):
    """An import hook's loader, which may change the source (typeguard, pytest's asserts)."""


class _Hook:
    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and name.startswith("ghpkg_"):
            spec.loader = _OwnLoader(name, spec.origin)
        return spec


class _Legacy:
    """A finder with find_module alone: Python 3.10 and 3.11 still ask it."""

    def find_module(self, name, path=None):
        return None


@pytest.mark.parametrize("finder", [_Hook, _Legacy])
def test_a_finder_of_its_own_is_left_to_the_import(package, monkeypatch, finder):
    pkg = package({"steps.py": "X = 1\n"})
    assert missing_factory(f"{pkg}.steps:make") is not None  # not vacuous
    monkeypatch.setattr(sys, "meta_path", [finder(), *sys.meta_path])
    assert missing_factory(f"{pkg}.steps:make") is None
    assert missing_factory(f"{pkg}.stepz:make") is None


def test_the_current_folder_is_searched_last_and_file_targets_folders_before_it(
    tmp_path, monkeypatch
):
    # the console script has no current folder on sys.path: load_factory adds it (and each
    # file target's folder, loaded before) for the target's top level, after the finders
    name = f"ghcwd_{uuid.uuid4().hex[:10]}"
    here, there = tmp_path / "here", tmp_path / "there"
    for folder, text in ((here, "def a():\n    pass\n"), (there, "def b():\n    pass\n")):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(text)
    (there / "first.py").write_text("def f():\n    pass\n")
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(here))])
    said = missing_factory(f"{name}:make")
    assert said is not None and said.endswith("its functions: a")
    said = missing_factory(f"{name}:make", [str(there / "first.py")])
    assert said is not None and said.endswith("its functions: b")
    try:  # as the command loads them: the file first, its folder then searched before this one
        load_factory(f"{there / 'first.py'}:f")
        with pytest.raises(TargetUsageError) as e:
            load_factory(f"{name}:make")
        assert said == str(e.value)
    finally:
        for m in (name, "_graph_harness_target_first"):
            sys.modules.pop(m, None)
