"""The nodes that point into a tensor's bytes (capture/graph/pointers.py): the reading of
a kernel's argument layout and of an `extra` buffer, from memory laid out as the driver
lays it out (ctypes here; cuda-bindings on the GPU), and the matching and naming."""

from __future__ import annotations

import ctypes
import struct
from types import SimpleNamespace

import torch

from graph_harness.capture.graph import pointers as P
from graph_harness.capture.live.writers import describe_writer
from graph_harness.kernels.guard import byte_range

BASE = 0x7F00_0000_0000  # an address in the range device allocations live in


def test_words_are_aligned_addresses_and_small_integers_are_not():
    buf = struct.pack("<QQQ", BASE + 8, 7, BASE + 4096) + b"\x01\x02\x03\x04"
    assert P.words_of(buf) == {BASE + 8, BASE + 4096}
    # an argument at offset 4 in the layout: its first aligned word starts 4 bytes in
    assert P.words_of(b"\0\0\0\0" + struct.pack("<Q", BASE), offset=4) == {BASE}


class _Driver:
    """cuFuncGetParamInfo as the driver answers it: (error, offset, size) per argument,
    an error past the last."""

    def __init__(self, layout):
        self.layout = layout

    def cuFuncGetParamInfo(self, func, i):
        return (0, *self.layout[i]) if i < len(self.layout) else (1, 0, 0)


def test_kernel_arguments_read_through_kernel_params():
    # a kernel (float* out, int n, struct {int64 n; float* data[2];} it): the struct's
    # pointers are found too, the int is not taken for an address
    out = ctypes.c_uint64(BASE + 0x100)
    n = ctypes.c_int32(12345)
    it = (ctypes.c_uint64 * 3)(3, BASE + 0x200, BASE + 0x300)
    args = (ctypes.c_void_p * 3)(ctypes.addressof(out), ctypes.addressof(n), ctypes.addressof(it))
    drv = _Driver([(0, 8), (8, 4), (16, 24)])
    p = SimpleNamespace(func=1, kern=0)
    got = P._argument_words(drv, p, ctypes.addressof(args))
    assert got == {BASE + 0x100, BASE + 0x200, BASE + 0x300}
    # one graph's nodes of one function: its layout read once, then reused
    layouts: dict = {}
    assert P._argument_words(drv, p, ctypes.addressof(args), layouts) == got
    drv.layout = []  # a second read of the driver would now find no argument
    assert P._argument_words(drv, p, ctypes.addressof(args), layouts) == got
    assert layouts == {1: [(0, 8), (8, 4), (16, 24)]}


def test_kernel_arguments_read_through_extra():
    packed = ctypes.create_string_buffer(struct.pack("<QQ", 99, BASE + 0x40))
    size = ctypes.c_size_t(16)
    extra = (ctypes.c_void_p * 5)(
        P._LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(packed),
        P._LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size),
        P._LAUNCH_PARAM_END,
    )  # fmt: skip
    assert P._extra_words(ctypes.addressof(extra)) == {BASE + 0x40}


def test_the_first_certain_writer_before_an_earlier_kernel_that_points_in():
    pointers = [
        None,  # an empty node
        P.NodePointers(frozenset({BASE + 0x1000})),  # a kernel pointing elsewhere
        P.NodePointers(frozenset({BASE + 0x10})),  # a kernel pointing in (reads, maybe)
        P.NodePointers(frozenset(), ((BASE, BASE + 64),)),  # a memset of the tensor
    ]
    touches = P.touching(pointers, BASE, BASE + 64)
    assert [(t.index, t.writes) for t in touches] == [(2, False), (3, True)]
    assert P.first_writer(touches) == P.Touch(3, True)
    assert P.touching(pointers, BASE + 64, BASE + 128) == []  # the end is not in
    assert P.first_writer(P.touching(pointers[:3], BASE, BASE + 64)) == P.Touch(2, False)


def test_a_view_spans_its_own_bytes_not_its_storages():
    t = torch.arange(64, dtype=torch.float32).reshape(8, 8)
    col = t[2:5, 1]  # three elements, 8 apart
    lo, hi = byte_range(col)
    assert lo == t.data_ptr() + (2 * 8 + 1) * 4
    assert hi - lo == (2 * 8 + 1) * 4
    empty = byte_range(t[:0])
    assert describe_writer(empty, [P.NodePointers(frozenset({empty[0]}))], None) is None


def test_the_writer_named_by_its_kind_kernel_and_scope():
    nodes = [
        {"type": "kernel", "kernel": "gemm", "scope": "unscoped"},
        {"type": "kernel", "kernel": "index_copy_kernel", "scope": "model.layers.0.attn"},
        {"type": "kernel", "kernel": "gemv", "scope": "model.layers.0.attn"},
    ]
    pointers = [
        P.NodePointers(frozenset({BASE + 0x9000})),
        P.NodePointers(frozenset({BASE + 0x20})),
        P.NodePointers(frozenset({BASE})),
    ]
    text = describe_writer((BASE, BASE + 0x100), pointers, nodes)
    assert text.startswith("first pointed into by node 1: kernel index_copy_kernel in "), text
    assert "model.layers.0.attn; 1 more node points into it" in text and "do not say" in text
    assert describe_writer((BASE + 0x100, BASE + 0x200), pointers, nodes) is None
    memset = [P.NodePointers(frozenset(), ((BASE, BASE + 8),))]
    one = describe_writer((BASE, BASE + 8), memset, [{"type": "memset", "scope": "unscoped"}])
    assert one == "written first by node 0: memset"
