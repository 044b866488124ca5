"""The two kernels graph-harness was born from, each beside its shipped reference.

`pack_scores_ids` replaces the eight-op `pack_scores_ids_shipped`; `selected_local_records`
writes retained buffers directly where the old path allocated and copied. Both are
select/copy/integer paths, exact by construction: kernel and reference agree bit for bit.

May import: nothing else of graph-harness (the buffers they write are the caller's).
"""

from graph_harness import _folder

# this module is the package graph_harness.kernels; its modules are in its folder
__path__ = _folder(__spec__, "kernels")

from graph_harness.kernels.compaction import (
    selected_local_records,
    selected_local_records_shipped,
)
from graph_harness.kernels.guard import byte_range, check_no_alias, overlaps
from graph_harness.kernels.launch import HAS_TRITON, add_launch_listener, remove_launch_listener
from graph_harness.kernels.pack import pack_scores_ids, pack_scores_ids_shipped

__all__ = [
    "HAS_TRITON",
    "add_launch_listener",
    "byte_range",
    "check_no_alias",
    "overlaps",
    "pack_scores_ids",
    "pack_scores_ids_shipped",
    "remove_launch_listener",
    "selected_local_records",
    "selected_local_records_shipped",
]
