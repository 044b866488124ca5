"""Static device buffers for captured graphs.

May import: nothing else of graph-harness.
"""

from graph_harness import _folder

# this module is the package graph_harness.pools; its modules are in its folder
__path__ = _folder(__spec__, "pools")

from graph_harness.pools.pool import GraphBufferPool, PoolExhausted, PoolFrozen, PoolStats, Region

__all__ = ["GraphBufferPool", "PoolExhausted", "PoolFrozen", "PoolStats", "Region"]
