"""Kernel names in tables: demangled, shortened, and never two rows alike."""

from graph_harness.reports.kernel_names import demangle, readable, short_names

FILL = (
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE"
    "St5arrayIPcLm1EEEEviT0_T1_"
)
# Two direct-copy kernels that differ only in a lambda's number deep inside (two dtypes):
# cut at a fixed width, as the old tables did, they read the same.
COPY = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()"
    "() const::{{lambda()#{n}}}::operator()() const::{{lambda(int)#1}}>(at::TensorIteratorBase&,"
    " int)::{{lambda(int)#1}}>(int, at::native::FillFunctor<float>)"
)


def test_demangles_with_torchs_demangler():
    assert demangle(FILL) == (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
    )
    assert demangle("_pack_flat_kernel") == "_pack_flat_kernel"  # Triton names are plain


def test_readable_drops_what_every_kernel_shares():
    assert (
        readable(FILL) == "vectorized_elementwise_kernel<4, FillFunctor<float>, array<char*, 1ul>>"
    )
    assert readable(COPY.format(n=10)) == (
        "elementwise_kernel<128, 2, gpu_kernel_impl_nocast<"
        "direct_copy_kernel_cuda::λ3::λ10::λ1>::λ1>"
    )


def test_short_names_are_unique_and_bounded():
    names = [COPY.format(n=n) for n in (7, 10)] + [FILL, "triton_poi_fused_add_0", None]
    short = short_names(names, width=40)
    assert set(short) == {n for n in names if n}
    assert len(set(short.values())) == len(short), short
    assert all(len(v) <= 40 for v in short.values()), short
    assert names[0][:60] == names[1][:60]  # the old cut made them read the same
