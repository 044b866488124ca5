"""Kernel families: what library or generator a graph node's work comes from, so that two
engines that name their kernels differently (cuBLAS, nvjet, CUTLASS; FlashAttention,
FlashInfer) are compared by what their nodes do.

One table of rules, read top to bottom, the first match naming the family: a node type, or
a regular expression searched in the demangled kernel name (capture/graph/reader.py
`demangle`). Users' rules go in front (`read_rules`: a CSV of `family,pattern`);
`families_table` is the table as documented. The rules read names, not code
(docs/families.md, "What a name cannot tell").
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from graph_harness.capture.errors import UsageError
from graph_harness.capture.graph.reader import demangle
from graph_harness.capture.paths import read_input
from graph_harness.capture.patterns import MAX_NAME, PatternError, Running, checked, deadline

OTHER = "other"
MAX_RULES = 1000  # a user's file: far above any sensible table, below a denial of service
MAX_PATTERN = 500
MAX_FILE = 1 << 20  # bytes


class FamilyRulesError(UsageError, ValueError):
    """A rules file that cannot be read as `family,pattern` rows (exit 2)."""


@dataclass(frozen=True)
class FamilyRule:
    family: str
    pattern: str  # searched in the demangled kernel name; "" with node_type
    node_type: str | None = None  # matches every node of this type instead
    note: str = ""  # what it covers, for the documented table
    source: str = "built-in"  # or the user's file

    def __post_init__(self) -> None:
        object.__setattr__(self, "_re", re.compile(self.pattern) if self.pattern else None)

    def matches(self, node_type: str, name: str) -> bool:
        if self.node_type is not None:
            return node_type == self.node_type
        return node_type == "kernel" and self._re.search(name) is not None


# In order: the first rule that matches names the family. Specific before general: the
# attention and GEMM libraries before the generic "gemm" and ATen patterns, Inductor's
# Triton kernels (whose names say what they fuse: `triton_tem_fused_mm`) before both.
RULES: tuple[FamilyRule, ...] = (
    FamilyRule(
        "memcpy", "", "memcpy", "every memcpy node (a copy the driver runs as a kernel too)"
    ),
    FamilyRule("memset", "", "memset", "every memset node"),
    FamilyRule("NCCL", r"^nccl|ncclDevKernel|ncclKernel", note="collectives (NCCL)"),
    FamilyRule(
        "Triton (Inductor)",
        r"^triton_",
        note="Inductor's generated kernels: triton_poi_, triton_per_, triton_red_, triton_tem_",
    ),
    FamilyRule(
        "attention: FlashInfer",
        r"flashinfer::.*(?:Decode|Prefill|MergeState|Attention)|Batch(?:Decode|Prefill)With|"
        r"Single(?:Decode|Prefill)With|MergeStates",
        note="FlashInfer's decode, prefill and merge kernels",
    ),
    FamilyRule(
        "FlashInfer (other)",
        r"flashinfer::",
        note="FlashInfer's norms, activations and sampling",
    ),
    FamilyRule(
        "attention: FlashAttention",
        r"flash_fwd|flash_bwd|flash::|FlashAttn|flash_attn|pytorch_flash",
        note="FlashAttention 2 and 3 (vLLM's and PyTorch's builds)",
    ),
    FamilyRule(
        "attention: SDPA",
        r"fmha_cutlass|efficient_attention|mem_efficient|cudnn_generated_fort_native_sdpa|"
        r"at::native::.*(?:sdp|scaled_dot_product)",
        note="PyTorch's memory-efficient and cuDNN attention kernels",
    ),
    FamilyRule(
        "attention: other",
        r"fmha|[Aa]ttention|paged_attention|mha_",
        note="other attention kernels (TensorRT-LLM's fmha, vLLM's paged attention, ...)",
    ),
    FamilyRule("GEMM: nvjet", r"^nvjet", note="cuBLAS's nvjet kernels (Hopper and later)"),
    FamilyRule(
        "GEMM: cuBLAS",
        r"^(?:ampere|volta|turing|hopper|sm\d+)_\w*gemm|xmma_gemm|gemv2[NT]_kernel|gemvx|"
        r"gemmSN|gemmk1|splitKreduce|cublas|cutlass::Kernel2?<cutlass_\d+_|^cutlass_\d+_",
        note="cuBLAS and cuBLASLt (ampere_*gemm_*, sm90_xmma_gemm_*, gemv2T_kernel, split-K "
        "reductions, the CUTLASS-built kernels it ships): the same kernels serve both, so a "
        "name cannot tell which launched it",
    ),
    FamilyRule("GEMM: CUTLASS", r"cutlass", note="CUTLASS kernels (vLLM's, TensorRT-LLM's, ...)"),
    FamilyRule("GEMM: other", r"gemm|Gemm|gemv|Gemv", note="other GEMMs (DeepGEMM, Marlin, ...)"),
    FamilyRule(
        "sort, scan, top-k",
        r"[Ss]ort|[Tt]op[Kk]|topk|DeviceScan|[Ss]can_|cumsum",
        note="sorts, top-k and scans (ATen's and CUB's: a decode step's sampling)",
    ),
    FamilyRule(
        "ATen indexing",
        r"at::native::.*(?:index_elementwise_kernel|indexSelect|index_select|index_put|"
        r"index_copy|indexFunc|gather|scatter|embedding|take_kernel|masked_(?:fill|scatter|"
        r"select))",
        note="ATen's indexing, gather, scatter and embedding kernels",
    ),
    FamilyRule(
        "ATen elementwise",
        r"at::native::.*(?:elementwise_kernel|fill_kernel|copy_kernel|CatArrayBatchedCopy)",
        note="ATen's elementwise, fill, copy and cat kernels",
    ),
    FamilyRule(
        "ATen reduction",
        r"at::native::.*(?:reduce_kernel|[Ss]oft[Mm]ax|norm_kernel|layer_norm|rms_norm|cunn_|"
        r"argmax|argmin)",
        note="ATen's reductions, softmax and norms",
    ),
)
NOT_A_KERNEL = "the node's type"  # a node of any other type: its type names its family


def family_of(
    node_type: str,
    kernel: str | None,
    rules: tuple[FamilyRule, ...] = RULES,
    running: Running | None = None,
) -> str:
    """The family of a node (its type, its kernel's name, mangled or not): the first rule
    that matches; else, for a kernel, "other", and for a node of another type (an event, an
    empty or child-graph node, a host function) its type, so that "other" holds only
    kernels no rule names. Rules see the first MAX_NAME characters of the demangled name
    (capture/patterns.py); `running` is told each rule as it runs (families' deadline)."""
    name = (demangle(kernel) if kernel else "")[:MAX_NAME]
    for r in rules:
        if running is not None:
            running.pattern = r.pattern
        if r.matches(node_type, name):
            return r.family
    return OTHER if node_type == "kernel" else node_type


def families(frame: pd.DataFrame, rules: tuple[FamilyRule, ...] = RULES) -> pd.Series:
    """Each row's family (an export's frame: `type` and `kernel` columns), under a
    deadline that names a rule whose pattern runs without end (capture/patterns.py)."""
    memo: dict[tuple[str, str], str] = {}

    def one(t: str, k: object, running: Running) -> str:
        key = (t, k if isinstance(k, str) else "")
        if key not in memo:
            memo[key] = family_of(t, key[1], rules, running)
        return memo[key]

    with deadline() as running:
        running.what = "--families rule"
        got = [one(t, k, running) for t, k in zip(frame["type"], frame["kernel"])]
    return pd.Series(got, index=frame.index, name="family", dtype=object)


def read_rules(path: str | Path) -> tuple[FamilyRule, ...]:
    """A user's rules (a CSV with the header `family,pattern`: a Python regular expression
    searched in demangled kernel names, spaces around either field ignored), put in front
    of the built-in ones. Refused whole, saying where, if any row cannot be read: no rule
    is ever half taken."""
    from graph_harness.capture.paths import check_input

    check_input(path, "rules file")
    if Path(path).stat().st_size > MAX_FILE:
        raise FamilyRulesError(f"{path}: larger than {MAX_FILE >> 20} MiB: not a rules file")
    try:
        text = read_input(path, "rules file").decode("utf-8-sig")  # an editor's BOM too
    except UnicodeDecodeError as e:
        raise FamilyRulesError(
            f"{path}: not UTF-8 text (byte {e.start}): a CSV was expected"
        ) from None
    return (*parse_rules(text, str(path)), *RULES)


def parse_rules(text: str, where: str = "rules") -> tuple[FamilyRule, ...]:
    reader = csv.reader(io.StringIO(text, newline=""))
    out = []
    try:
        header = next(reader, None)
        if header is None or [c.strip() for c in header] != ["family", "pattern"]:
            got = ",".join(header)[:80] if header else "an empty file"
            raise FamilyRulesError(
                f"{where}: expected a CSV whose first line is the header `family,pattern`, "
                f"got {got!r}"
            )
        for row in reader:
            n = reader.line_num
            if not any(c.strip() for c in row):
                continue
            out.append(_rule(row, f"{where}: line {n}", where))
            if len(out) > MAX_RULES:
                raise FamilyRulesError(f"{where}: more than {MAX_RULES} rules")
    except csv.Error as e:
        raise FamilyRulesError(f"{where}: line {reader.line_num}: not CSV: {e}") from None
    return tuple(out)


def _rule(row: list[str], at: str, source: str) -> FamilyRule:
    if len(row) != 2:
        raise FamilyRulesError(f"{at}: expected 2 fields (family,pattern), got {len(row)}")
    family, pattern = row[0].strip(), row[1].strip()
    if not family or not pattern:
        raise FamilyRulesError(f"{at}: a family and a pattern, both non-empty")
    if not family.isprintable() or len(family) > 80:
        raise FamilyRulesError(f"{at}: a family name of printable text, at most 80 characters")
    if len(pattern) > MAX_PATTERN:
        raise FamilyRulesError(f"{at}: a pattern of at most {MAX_PATTERN} characters")
    try:
        rule = FamilyRule(family, pattern, source=source)
    except (re.error, OverflowError, RecursionError) as e:
        raise FamilyRulesError(f"{at}: not a regular expression: {e}") from None
    try:
        checked(rule._re, f"{at}: pattern")
    except PatternError as e:
        raise FamilyRulesError(str(e)) from None
    return rule


@lru_cache(maxsize=1)
def families_table() -> pd.DataFrame:
    """The built-in rules in order: family, what it matches, what it covers."""
    return pd.DataFrame(
        [
            dict(
                order=i + 1,
                family=r.family,
                matches=f"every {r.node_type} node" if r.node_type else f"/{r.pattern}/",
                covers=r.note,
            )
            for i, r in enumerate(RULES)
        ]
    )
