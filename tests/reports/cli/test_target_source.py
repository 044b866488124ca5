"""A `file.py:FUNCTION` target whose FUNCTION is surely missing, told from its syntax tree
before torch's import (reports/cli/target_source.py): refused in the words the import would
use, and never refused where running the file could bind the name (issue 60, item 7)."""

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

    assert missing_factory("tests.targets:nonesuch") is None  # a dotted MODULE: imported
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
