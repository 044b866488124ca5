"""Every bad input raises a clear error, and nothing is written to the outputs."""

import pytest
import torch

from graph_harness.kernels import (
    pack_scores_ids,
    pack_scores_ids_shipped,
    selected_local_records,
    selected_local_records_shipped,
)
from tests.conftest import DEVICES
from tests.exact import assert_bits_equal, poison_

ROWS, K = 4, 32


def inference(t: torch.Tensor) -> torch.Tensor:
    """A poisoned copy of `t` made under inference mode: an inference tensor."""
    with torch.inference_mode():
        return poison_(t.clone())


def pack_case(device, **change):
    args = dict(
        indices=torch.randint(-5, 100, (ROWS, K), device=device),
        scores=torch.randn(ROWS, K, device=device),
        rank=1,
        width=100,
        out=poison_(torch.empty(ROWS, K, 2, device=device)),
    )
    args.update({k: (v(device) if callable(v) else v) for k, v in change.items()})
    return args


PACK_BAD = [
    (
        "indices float",
        dict(indices=lambda d: torch.randn(ROWS, K, device=d)),
        TypeError,
        "indices must be torch.int64 or torch.int32, got torch.float32",
    ),
    (
        "indices 1-d",
        dict(indices=lambda d: torch.zeros(K, dtype=torch.int64, device=d)),
        ValueError,
        "indices must have 2 dims",
    ),
    (
        "scores fp16",
        dict(scores=lambda d: torch.randn(ROWS, K, device=d).half()),
        TypeError,
        "scores must be torch.float32",
    ),
    (
        "scores shape",
        dict(scores=lambda d: torch.randn(ROWS, K + 1, device=d)),
        ValueError,
        r"scores must have shape \(4, 32\)",
    ),
    (
        "out shape",
        dict(out=lambda d: poison_(torch.empty(ROWS, K, 3, device=d))),
        ValueError,
        r"out must have shape \(4, 32, 2\)",
    ),
    (
        "out dtype",
        dict(out=lambda d: torch.zeros(ROWS, K, 2, dtype=torch.int32, device=d)),
        TypeError,
        "out must be torch.float32",
    ),
    (
        "out last dims strided",
        dict(out=lambda d: poison_(torch.empty(ROWS, 2, K, device=d)).transpose(1, 2)),
        ValueError,
        "out's last two dims must be contiguous",
    ),
    (
        "out rows overlap",
        dict(
            out=lambda d: poison_(torch.empty(2 * K + 8, device=d)).as_strided(
                (ROWS, K, 2), (2, 2, 1)
            )
        ),
        ValueError,
        "rows overlap",
    ),
    (
        "scores a lazily negated view",
        dict(scores=lambda d: torch.randn(ROWS, K, dtype=torch.complex64, device=d).conj().imag),
        ValueError,
        r"scores is a view with torch's lazy negation \(or conjugation\) bit, e.g. "
        r"x.conj\(\).imag, which the kernels do not apply: pass scores.resolve_neg\(\) "
        r"\(for an output, a buffer without the bit\)",
    ),
    (
        "out a lazily negated view",
        dict(
            # float32 pairs poisoned first (never zeros), then seen as the imaginary
            # parts of a conjugated complex view: float32 [ROWS, K, 2] with the neg bit
            out=lambda d: (
                poison_(torch.empty(ROWS, K, 2, 2, device=d))
                .view(torch.complex64)
                .squeeze(-1)
                .conj()
                .imag
            )
        ),
        ValueError,
        "out is a view with torch's lazy negation",
    ),
    (
        "out requires grad",
        dict(out=lambda d: poison_(torch.empty(ROWS, K, 2, device=d)).requires_grad_()),
        ValueError,
        r"out requires grad, but the kernels write it in place outside autograd: pass a "
        r"buffer that does not require grad \(e.g. out.detach\(\)\) or call under "
        r"torch.no_grad\(\)",
    ),
    (
        "out a non-leaf requiring grad",
        dict(out=lambda d: poison_(torch.empty(ROWS, K, 2, device=d)).requires_grad_() * 1),
        ValueError,
        "out requires grad",
    ),
    (
        "out an inference tensor",
        dict(out=lambda d: inference(torch.empty(ROWS, K, 2, device=d))),
        ValueError,
        r"out is an inference tensor \(made under torch.inference_mode\(\)\), which cannot be "
        r"updated in place outside inference mode: call under torch.inference_mode\(\), or "
        r"pass a normal tensor \(e.g. out.clone\(\)\)",
    ),
    ("rank negative", dict(rank=-1), ValueError, r"rank must be in \[0, 2\*\*31\)"),
    ("rank too big", dict(rank=2**31), ValueError, r"rank must be in \[0, 2\*\*31\)"),
    ("rank float", dict(rank=1.0), TypeError, "rank must be a Python int or a 0-d integer"),
    ("rank bool", dict(rank=True), TypeError, "rank must be a Python int"),
    (
        "rank 1-d",
        dict(rank=lambda d: torch.tensor([1], device=d)),
        ValueError,
        "rank tensor must be 0-d",
    ),
    (
        "rank float tensor",
        dict(rank=lambda d: torch.tensor(1.0, device=d)),
        TypeError,
        "rank tensor must have an integer dtype",
    ),
    ("width zero", dict(width=0), ValueError, r"width must be in \[1, 2\*\*31\)"),
    ("width too big", dict(width=2**31), ValueError, r"width must be in \[1, 2\*\*31\)"),
    (
        "width tensor",
        dict(width=lambda d: torch.tensor(5, device=d)),
        TypeError,
        "width must be a Python int",
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [pack_scores_ids, pack_scores_ids_shipped])
@pytest.mark.parametrize("case,change,exc,message", PACK_BAD, ids=[c[0] for c in PACK_BAD])
def test_pack_rejects(device, fn, case, change, exc, message):
    args = pack_case(device, **change)
    before = args["out"].clone()
    with pytest.raises(exc, match=message):
        fn(**args)
    assert_bits_equal(args["out"], before, "out after a rejected call")


@pytest.mark.gpu
def test_pack_rejects_mixed_devices():
    args = pack_case("cuda", scores=lambda d: torch.randn(ROWS, K))
    before = args["out"].clone()
    with pytest.raises(ValueError, match="scores is on cpu; expected cuda"):
        pack_scores_ids(**args)
    assert_bits_equal(args["out"], before)
    args = pack_case("cuda", rank=lambda d: torch.tensor(1))
    before = args["out"].clone()
    with pytest.raises(ValueError, match="rank tensor is on cpu; expected cuda"):
        pack_scores_ids(**args)
    assert_bits_equal(args["out"], before)


def comp_case(device, **change):
    args = dict(
        ids=torch.randint(-5, 800, (ROWS, K), dtype=torch.int32, device=device),
        rank=1,
        width=100,
        slot_map=None,
        out=poison_(torch.empty(ROWS, K, dtype=torch.int32, device=device)),
        count_out=poison_(torch.empty(ROWS, dtype=torch.int32, device=device)),
    )
    args.update({k: (v(device) if callable(v) else v) for k, v in change.items()})
    return args


COMP_BAD = [
    (
        "ids int64",
        dict(ids=lambda d: torch.zeros(ROWS, K, dtype=torch.int64, device=d) + 3),
        TypeError,
        "ids must be torch.int32, got torch.int64",
    ),
    (
        "ids 3-d",
        dict(ids=lambda d: torch.ones(ROWS, K, 1, dtype=torch.int32, device=d)),
        ValueError,
        "ids must have 2 dims",
    ),
    (
        "out shape",
        dict(out=lambda d: poison_(torch.empty(ROWS, K + 1, dtype=torch.int32, device=d))),
        ValueError,
        r"out must have shape \(4, 32\)",
    ),
    (
        "out dtype",
        dict(out=lambda d: torch.ones(ROWS, K, dtype=torch.int64, device=d)),
        TypeError,
        "out must be torch.int32",
    ),
    (
        "out self-overlap",
        dict(out=lambda d: poison_(torch.empty(K, dtype=torch.int32, device=d)).expand(ROWS, K)),
        ValueError,
        "out's elements overlap each other",
    ),
    (
        "count_out shape",
        dict(count_out=lambda d: poison_(torch.empty(ROWS + 1, dtype=torch.int32, device=d))),
        ValueError,
        r"count_out must have shape \(4,\)",
    ),
    (
        "count_out dtype",
        dict(count_out=lambda d: torch.ones(ROWS, dtype=torch.int64, device=d)),
        TypeError,
        "count_out must be torch.int32",
    ),
    (
        "slot_map length",
        dict(slot_map=lambda d: torch.arange(99, dtype=torch.int32, device=d)),
        ValueError,
        r"slot_map must have shape \(100,\)",
    ),
    (
        "slot_map dtype",
        dict(slot_map=lambda d: torch.arange(100, device=d)),
        TypeError,
        "slot_map must be torch.int32",
    ),
    (
        "out an inference tensor",
        dict(out=lambda d: inference(torch.empty(ROWS, K, dtype=torch.int32, device=d))),
        ValueError,
        "out is an inference tensor",
    ),
    (
        "count_out an inference tensor",
        dict(count_out=lambda d: inference(torch.empty(ROWS, dtype=torch.int32, device=d))),
        ValueError,
        r"count_out is an inference tensor .* \(e.g. count_out.clone\(\)\)",
    ),
    (
        "K past int32",  # zero strides: 2**31 columns that take no memory
        dict(ids=lambda d: torch.ones(ROWS, 1, dtype=torch.int32, device=d).expand(ROWS, 2**31)),
        ValueError,
        r"ids has 2147483648 columns; a row's count is int32, so K must be < 2\*\*31",
    ),
    ("rank negative", dict(rank=-2), ValueError, r"rank must be in \[0, 2\*\*31\)"),
    ("width zero", dict(width=0), ValueError, r"width must be in \[1, 2\*\*31\)"),
    ("width float", dict(width=100.0), TypeError, "width must be a Python int"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [selected_local_records, selected_local_records_shipped])
@pytest.mark.parametrize("case,change,exc,message", COMP_BAD, ids=[c[0] for c in COMP_BAD])
def test_compaction_rejects(device, fn, case, change, exc, message):
    args = comp_case(device, **change)
    outs = [args["out"], args["count_out"]]
    before = [o.clone() for o in outs]
    ids = args.pop("ids")
    rank = args.pop("rank")
    width = args.pop("width")
    with pytest.raises(exc, match=message):
        fn(ids, rank, width, **args)
    for o, b in zip(outs, before):
        assert_bits_equal(o, b, "an output after a rejected call")


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_accepted_where_torch_allows_in_place(device):
    # Under no_grad a requires-grad out may be written in place, and inside inference
    # mode an inference out: both paths accept both, with the same bits.
    args = pack_case(device)
    with torch.no_grad():
        outs = [poison_(torch.empty(ROWS, K, 2, device=device)).requires_grad_() for _ in "ab"]
        pack_scores_ids_shipped(**dict(args, out=outs[0]))
        pack_scores_ids(**dict(args, out=outs[1]))
    assert_bits_equal(outs[1].detach(), outs[0].detach(), "under no_grad")
    ids = args["indices"].to(torch.int32)
    with torch.inference_mode():
        outs = [poison_(torch.empty(ROWS, K, 2, device=device)) for _ in "ab"]
        pack_scores_ids_shipped(**dict(args, out=outs[0]))
        pack_scores_ids(**dict(args, out=outs[1]))
        assert_bits_equal(outs[1], outs[0], "pack inside inference mode")
        outs = [poison_(torch.empty(ROWS, K, dtype=torch.int32, device=device)) for _ in "ab"]
        counts = [poison_(torch.empty(ROWS, dtype=torch.int32, device=device)) for _ in "ab"]
        selected_local_records_shipped(ids, 1, 100, out=outs[0], count_out=counts[0])
        selected_local_records(ids, 1, 100, out=outs[1], count_out=counts[1])
        assert_bits_equal(outs[1], outs[0], "compaction inside inference mode")
        assert_bits_equal(counts[1], counts[0], "counts inside inference mode")


def test_a_folder_given_for_an_export_names_the_exports_in_it(tmp_path):
    from tests.command_line import SMALL, run

    out = tmp_path / "c"
    assert run("count", *SMALL, "--variant", "fused", "--out", str(out)).returncode == 0
    for ref in (str(out), "c"):  # a path, and a bare name that is a folder here
        r = run("advise", ref, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "is a folder" in r.stderr and "nodes-fused.json" in r.stderr, r.stderr
