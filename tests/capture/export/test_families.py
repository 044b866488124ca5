"""Kernel families (capture/export/families.py): names as the libraries write them into
graphs, each read to its family; a user's rules in front; the delta by family summing to
the delta by type (another route to the same total); the rules file refused whole."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from graph_harness.capture.export.delta import node_delta
from graph_harness.capture.export.families import (
    OTHER,
    RULES,
    FamilyRulesError,
    families,
    family_of,
    parse_rules,
    read_rules,
)
from graph_harness.capture.export.nodes import NodeExport

REPO = Path(__file__).resolve().parents[3]

# Kernel names as graphs hold them (mangled where the library's are), by family.
BY_FAMILY = {
    "GEMM: nvjet": ["nvjet_sm90_tst_16x64_64x16_4x1_v_bz_TNN"],
    "GEMM: cuBLAS": [
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>()",
        "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn",
        "void gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false>()",
        # the CUTLASS-built kernels cuBLAS ships: the same torch.mm may run either
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn>()",
    ],
    "GEMM: CUTLASS": [
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int, int>>(Params)"
    ],
    "GEMM: other": ["void deep_gemm::sm90_fp8_gemm_1d2d_impl<128u, 1u>(float*)"],
    "sort, scan, top-k": [
        "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<int, float>()",
        "void at::native::sbtopk::gatherTopK<float, unsigned int, 2>()",  # not indexing
        "void at_cuda_detail::cub::DeviceScanKernel<int>()",
    ],
    "FlashInfer (other)": ["void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>()"],
    "attention: other": [
        "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, 16>()",
        "fmha_v2_flash_attention_bf16_64_32_S_qkv_128_sm90_kernel",
    ],
    "attention: FlashAttention": [
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>()",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4>>()",
    ],
    "attention: FlashInfer": [
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<PosEncodingMode(0), 2u, 4u>()"
    ],
    "attention: SDPA": ["fmha_cutlassF_bf16_aligned_64x64_rf_sm80"],
    "Triton (Inductor)": [
        "triton_poi_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0",
        "triton_tem_fused_mm_0",  # a template GEMM: Triton's, before any GEMM rule
    ],
    "ATen elementwise": [
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5"
        "arrayIPcLm2EEEEviT0_T1_"
    ],
    "ATen reduction": [
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps<float>>>()"
    ],
    "ATen indexing": [
        "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel>()",
        "void at::native::(anonymous namespace)::indexSelectSmallIndex<float, long, int, 2>()",
    ],
    "NCCL": ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"],
    OTHER: [
        "_Z8mykernelPf",
        "void vllm::rms_norm_kernel<__nv_bfloat16>()",  # not ATen's: no namespace, no rule
    ],
}
NAMES = [(name, family) for family, names in BY_FAMILY.items() for name in names]


@pytest.mark.parametrize(("name", "family"), NAMES, ids=[f for _, f in NAMES])
def test_each_library_name_reads_to_its_family(name, family):
    assert family_of("kernel", name) == family


def test_node_types_and_names_that_say_nothing():
    assert family_of("memcpy", None) == "memcpy" and family_of("memset", None) == "memset"
    # a node that launches no kernel is its type's family: "other" holds unknown kernels only
    assert family_of("event_record", None) == "event_record"
    assert family_of("graph", None) == "graph" and family_of("empty", None) == "empty"
    assert family_of("kernel", None) == OTHER
    assert family_of("kernel", "my_triton_kernel") == OTHER  # a user's Triton: its own name


def test_a_users_rules_go_in_front_and_a_bad_file_is_refused_whole(tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("family,pattern\nmy attention,^paged_attention_v\nGEMM: mine,mykernel\n")
    rules = read_rules(f)
    assert len(rules) == len(RULES) + 2
    assert family_of("kernel", "paged_attention_v2_kernel", rules) == "my attention"
    assert family_of("kernel", "_Z8mykernelPf", rules) == "GEMM: mine"
    assert family_of("kernel", "nvjet_sm90_x", rules) == "GEMM: nvjet"  # the rest as before
    bad = {
        "no header": ("attention,^x\n", "header `family,pattern`"),
        "empty": ("", "an empty file"),
        "three fields": ("family,pattern\na,b,c\n", "line 2: expected 2 fields"),
        "empty pattern": ("family,pattern\na,\n", "line 2: a family and a pattern"),
        "bad regex": ("family,pattern\na,(unclosed\n", "line 2: not a regular expression"),
        "control in name": ('family,pattern\n"a\x1bb",x\n', "printable text"),
        "huge repeat": ("family,pattern\na,x{99999999999999999999}\n", "not a regular"),
        "nested repeats": ("family,pattern\na,(\\w+\\s?)*x\n", "line 2: pattern '(\\\\w+"),
        "a field past csv's limit": ("family,pattern\na," + "x" * 200_000 + "\n", "not CSV"),
    }
    for case, (text, message) in bad.items():
        with pytest.raises(FamilyRulesError, match=re.escape(message)):
            parse_rules(text, "mine.csv")
        assert case
    # what editors write: a BOM, CR line ends, spaces after the comma
    ok = tmp_path / "excel.csv"
    ok.write_bytes("\ufefffamily,pattern\rmine, ^paged \r".encode())
    assert family_of("kernel", "paged_x", read_rules(ok)) == "mine"
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"family,pattern\n\xff\xfe,x\n")
    with pytest.raises(FamilyRulesError, match="not UTF-8"):
        read_rules(binary)


def node(i, type_, kernel):
    return dict(
        index=i, type=type_, kernel=kernel, grid=None, block=None, stage=None, step="unscoped",
        scope="unscoped", scope_path=[], deps=[i - 1] if i else [], parent=None,
    )  # fmt: skip


def export(kernels):
    nodes = [node(i, "memcpy" if k == "copy" else "kernel", None if k == "copy" else k)
             for i, k in enumerate(kernels)]  # fmt: skip
    return NodeExport(source="cuda-graph", workload="callable:f", variant=None, params=None,
                      nodes=nodes)  # fmt: skip


def test_delta_by_family_sums_to_the_delta_by_type():
    # engine A: cuBLAS GEMMs, FlashAttention; engine B: nvjet GEMMs, FlashInfer, one copy less
    a = export(["ampere_sgemm_128x64_nn"] * 4 + ["flash_fwd_kernel"] * 2 + ["copy"] * 2)
    b = export(["nvjet_sm90_tst_8x64"] * 3 + ["BatchDecodeWithPagedKVCacheKernel"] * 2 + ["copy"])
    d = node_delta(a, b)
    got = {r.family: (r.a, r.b, r.delta) for r in d.by_family.itertuples()}
    assert got == {
        "memcpy": (2, 1, -1),
        "attention: FlashInfer": (0, 2, 2),
        "attention: FlashAttention": (2, 0, -2),
        "GEMM: nvjet": (0, 3, 3),
        "GEMM: cuBLAS": (4, 0, -4),
    }
    assert list(got) == list(d.by_family.family)  # in the rules' order
    assert d.by_family.delta.sum() == d.by_type.delta.sum() == d.total_delta == -2
    assert d.to_dict()["by_family"][0]["family"] == "memcpy"


def test_cli_delta_by_family_with_a_users_rules(tmp_path):
    a = export(["paged_attention_v1_kernel", "ampere_sgemm_128x64_nn"])
    b = export(["BatchDecodeWithPagedKVCacheKernel", "nvjet_sm90_tst_8x64"])
    (tmp_path / "a.json").write_text(json.dumps(a.to_dict()))
    (tmp_path / "b.json").write_text(json.dumps(b.to_dict()))
    (tmp_path / "rules.csv").write_text("family,pattern\nattention: vLLM paged,^paged_attention\n")
    cmd = [sys.executable, "-m", "graph_harness", "delta", "./a.json", "./b.json", "--json"]
    r = subprocess.run([*cmd, "--families", "rules.csv"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    fam = {x["family"]: x["delta"] for x in json.loads(r.stdout)["by_family"]}
    assert fam["attention: vLLM paged"] == -1 and fam["attention: FlashInfer"] == 1
    (tmp_path / "bad.csv").write_text("family,pattern\nx,(\n")
    bad = subprocess.run([*cmd, "--families", "bad.csv"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "line 2: not a regular expression" in bad.stderr
    assert bad.stdout == ""


def test_the_documented_table_is_the_rules():
    text = (REPO / "docs" / "families.md").read_text()
    rows = [ln for ln in text.splitlines() if re.match(r"^\| \d+ \|", ln)]
    assert [ln.split("|")[2].strip() for ln in rows] == [r.family for r in RULES]


def test_a_rule_that_backtracks_without_end_is_stopped_and_named(monkeypatch):
    import graph_harness.capture.patterns as patterns

    monkeypatch.setattr(patterns, "DEADLINE_S", 0.3)
    rules = (*parse_rules("family,pattern\nmine,(a|aa)+b\n", "mine.csv"), *RULES)
    frame = pd.DataFrame({"type": ["kernel"], "kernel": ["a" * 40]})
    with pytest.raises(patterns.PatternError, match=r"rule '\(a\|aa\)\+b' ran past"):
        families(frame, rules)


def test_passes_within_a_budget_share_its_one_deadline():
    # `delta` of two recordings makes a pass per graph: each just under its own deadline,
    # 20 graphs a side took minutes (attack pass); within a command's budget they add up
    import graph_harness.capture.patterns as patterns

    rules = (*parse_rules("family,pattern\nmine,(a|aa)+b\n", "mine.csv"), *RULES)
    n, one = 20, 0.0
    while one < 0.02:  # a name that takes a measurable while to refuse, well inside 5 s
        n += 2
        frame = pd.DataFrame({"type": ["kernel"], "kernel": ["a" * n]})
        one = min(_seconds(families, frame, rules) for _ in range(3))
    for _ in range(8):
        families(frame, rules)  # alone, each pass is well within its deadline
    refused = pytest.raises(patterns.PatternError, match=r"rule '\(a\|aa\)\+b' ran past the")
    with patterns.matching_budget(3 * one), refused:
        for _ in range(30):  # ten times the budget, had each pass its own deadline
            families(frame, rules)


def _seconds(fn, *args) -> float:
    t0 = time.monotonic()
    fn(*args)
    return time.monotonic() - t0


def test_a_signal_that_lands_as_the_block_ends_is_no_bare_expiry(monkeypatch):
    # the race at the block's end, made certain: the timer's signal handled just as the
    # timer is switched off. Never an exception past the block (before: a bare _Expired,
    # a BaseException past every `except Exception`), and the handler never left installed
    import signal

    import graph_harness.capture.patterns as patterns

    real = signal.setitimer

    def late(which, seconds, *rest):
        if seconds == 0:
            signal.getsignal(signal.SIGALRM)(signal.SIGALRM, None)
        return real(which, seconds, *rest)

    monkeypatch.setattr(signal, "setitimer", late)
    with patterns.deadline(5.0) as running:
        running.what, running.pattern = "rule", "x"
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
