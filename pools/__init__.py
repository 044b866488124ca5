"""Static device buffers for captured graphs.

May import: nothing else of graph-harness.
"""

from graph_harness.pools.pool import GraphBufferPool, PoolExhausted, PoolFrozen, PoolStats, Region

__all__ = ["GraphBufferPool", "PoolExhausted", "PoolFrozen", "PoolStats", "Region"]
