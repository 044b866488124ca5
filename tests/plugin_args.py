"""The arguments that run pytest (pytester) with graph-harness's plugin and no other of
ours: the tests of node_budget and graph_check run their projects with these."""

# Only the plugin under test: hypothesis's plugin would import hypothesis afresh in every
# run (pytester drops the modules a run imported), a second each.
PLUGIN = (
    "-p",
    "graph_harness.pytest_plugin",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
)
