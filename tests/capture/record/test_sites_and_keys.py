"""Capture sites and keys read off the stack (capture/record/sites.py) and engines' key
adapters (capture/record/keys.py): what needs no GPU."""

from __future__ import annotations

import os
import signal
import sys
import time
import types

import pytest
import torch

from graph_harness.capture.errors import UsageError
from graph_harness.capture.record.keys import (
    CaptureContext,
    ask,
    check_spec,
    load_adapter,
    named_adapter,
)
from graph_harness.capture.record.sites import (
    arguments_key,
    describe,
    frames_of,
    inductor_key,
    is_library,
    site_of,
)


def _frames_here():
    return frames_of(sys._getframe(1))


def captured_by(bs, x, *, mode="global"):
    return _frames_here()


def test_the_site_is_the_users_frame_and_the_key_its_arguments():
    frames = captured_by(8, torch.zeros(8, 64))
    site = site_of(frames)
    assert site.user.startswith("tests/capture/record/test_sites_and_keys.py:")
    assert site.user.endswith("in captured_by"), site.user
    assert site.library is not None  # pytest's frames, further out, are library code
    assert arguments_key(frames) == "bs=8 x[8, 64] mode='global'"


def test_a_frame_without_arguments_passes_the_key_outward():
    def no_args():
        return _frames_here()

    def outer(batch):
        return no_args()

    assert arguments_key(outer(4)) == "batch=4"


def test_describe_shapes_numbers_and_sequences_only():
    assert describe(torch.zeros(2, 3)) == "[2, 3]"
    assert describe((torch.zeros(1), 5, object())) == "([1], 5)"
    assert describe(list(range(6))) == "(0, 1, 2, 3, +2)"
    assert describe(object()) is None and describe(True) is None and describe("x" * 40) is None


def test_generated_and_installed_code_is_library_code():
    assert is_library("<eval_with_key>.3")
    assert is_library("/tmp/torchinductor_root/ab/cabc.py")
    assert is_library(torch.__file__)
    assert not is_library(__file__)


def _fake_tree_frame(node, inputs):
    """A frame of a function named `_record` in a file named as Inductor's trees are."""
    src = "def _record(self, model, inputs):\n    return __import__('sys')._getframe(0)\n"
    code = compile(src, "/x/torch/_inductor/cudagraph_trees.py", "exec")
    ns: dict = {}
    exec(code, ns)
    return ns["_record"](node, None, inputs)


def test_inductor_key_names_the_function_graph_ints_and_inputs():
    wrapped = types.SimpleNamespace(id=types.SimpleNamespace(id=3), static_input_idxs=[0])
    node = types.SimpleNamespace(
        wrapped_function=wrapped, id=types.SimpleNamespace(id=7), compile_id="1/0"
    )
    frame = _fake_tree_frame(node, [torch.zeros(64, 64), 8, torch.zeros(8, 1)])
    key, info = inductor_key([frame])
    assert key == "inductor 1/0 fn 3 graph 7: ints 8, inputs [8, 1]"  # the weight left out
    assert info == {"compile_id": "1/0", "function": 3, "graph": 7, "ints": [8]}
    assert inductor_key(captured_by(1, torch.zeros(1))) is None


# --- adapters -------------------------------------------------------------------------------


def test_specs_are_checked_before_a_program_runs(tmp_path):
    for bad in ("nocolon", "mod:", ":fn", "mod:not-an-id"):
        with pytest.raises(UsageError, match="MODULE:FUNCTION"):
            check_spec(bad)
    with pytest.raises(UsageError, match="does not exist"):
        check_spec(f"{tmp_path / 'missing.py'}:key")


def test_an_adapter_from_a_file_and_from_a_module(tmp_path):
    f = tmp_path / "adapter.py"
    f.write_text("def key(ctx):\n    return f\"bs={ctx.find('bs')}\"\n")
    fn = load_adapter(f"{f}:key")
    ctx = CaptureContext(captured_by(2, torch.zeros(2)), graph=None, index=0)
    assert fn(ctx) == "bs=2"
    assert load_adapter("os.path:basename") is __import__("os").path.basename
    with pytest.raises(UsageError, match="binds no name 'nothing'"):
        load_adapter(f"{f}:nothing")
    with pytest.raises(UsageError, match="no module"):
        load_adapter("no_such_module_anywhere:key")
    assert check_spec(f"{f}:key") == f"{f.resolve()}:key"  # every process finds it


def test_an_adapter_never_breaks_the_capture():
    ctx = CaptureContext([], graph=None, index=0)

    def raises(ctx):
        raise KeyError("batch")

    adapters = [("a", raises), ("b", lambda ctx: 42), ("c", lambda ctx: None)]
    key, note = ask(adapters, ctx)
    assert key is None
    assert "a raised KeyError" in note and "b returned int" in note
    key, note = ask([*adapters, ("d", lambda ctx: "bs=\x1b[2J4")], ctx)
    assert key == "bs=\\x1b[2J4", "a key is text: a control character is kept as its escape"


def test_an_adapter_that_exits_or_interrupts_never_breaks_the_capture(tmp_path):
    # SystemExit and KeyboardInterrupt the adapter raises (or its file raises at import)
    # are the adapter's: the graph takes the next rule's key, the note says what happened
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(5)\ndef key(ctx):\n    return 'never'\n")

    def quits(ctx):
        raise SystemExit(3)

    def interrupts(ctx):
        raise KeyboardInterrupt

    adapters = [("q", quits), ("i", interrupts), named_adapter(f"{exits}:key")]
    key, note = ask(adapters, CaptureContext([], graph=None, index=0))
    assert key is None
    assert "q raised SystemExit: 3" in note and "i raised KeyboardInterrupt" in note
    assert f"{exits}:key raised SystemExit: 5" in note


class _ExitsAsText(Exception):
    def __str__(self):
        raise SystemExit(9)


class _KeyThatExits(str):
    def strip(self, *chars):
        raise SystemExit(11)


class _ClassThatExits:
    @property
    def __class__(self):
        raise SystemExit(13)


def test_what_an_adapters_value_or_error_raises_as_it_is_read_is_the_adapters():
    # an exception whose message exits, a str whose methods exit, an object whose class
    # exits: each is read by the recorder, never reaches the program (attack pass)
    def raises_exiting(ctx):
        raise _ExitsAsText

    adapters = [
        ("text", raises_exiting),
        ("str", lambda ctx: _KeyThatExits("bs=4")),
        ("class", lambda ctx: _ClassThatExits()),
    ]
    key, note = ask(adapters, CaptureContext([], graph=None, index=0))
    assert key is None, key
    assert "text raised an exception whose type and message could not be read" in note, note
    assert "str returned _KeyThatExits, not a key" in note, note
    assert "class returned _ClassThatExits, not a key" in note, note
    key, _ = ask([*adapters, ("plain", lambda ctx: "bs=4")], CaptureContext([], None, 0))
    assert key == "bs=4"


def test_what_a_signal_raises_while_an_adapter_runs_is_the_programs():
    # Ctrl-C, or a program's SIGTERM handler, landing inside the adapter: on to the program
    def signalled(signum):
        def adapter(ctx):
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler runs here
            return "never"

        return adapter

    ctx = CaptureContext([], graph=None, index=0)
    with pytest.raises(KeyboardInterrupt):
        ask([("sigint", signalled(signal.SIGINT))], ctx)

    def leave(signum, frame):
        sys.exit(7)

    before = signal.signal(signal.SIGTERM, leave)
    try:
        with pytest.raises(SystemExit):
            ask([("sigterm", signalled(signal.SIGTERM))], ctx)
        assert signal.getsignal(signal.SIGTERM) is leave, "the program's handler given back"
    finally:
        signal.signal(signal.SIGTERM, before)
