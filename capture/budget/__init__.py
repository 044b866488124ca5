"""Node budgets, for the `node_budget` pytest fixture: an export's nodes counted against
limits in total and per scope, and the budget file that records today's counts.

- limits.py: check_budget, counts, BudgetError, NodeBudgetExceeded; the names, and a
  pattern's two kinds of budget (per match, and `sum(...)`)
- file.py: the budget file, read, rendered and recorded

May import: capture.export, capture.attribution, capture.scopes (scope labels).
Here, nothing: the pytest plugin reads the flag below at every pytest start-up.
"""

UPDATE_FLAG = "--update-node-budgets"  # the plugin's flag (graph_harness/pytest_plugin.py)
