"""Why a capture failed, in one line: the op in flight, its module and the class of
failure, found by watching one more capture attempt of the failed step.

- failure.py: diagnose, failure_line (what capture_graph raises with)
- classes.py: the classes of failure, decided from what was seen (plain data)
- watch.py: the watch over the next attempt: ATen ops, torch calls, module hooks

May import: capture.graph, capture.scopes.
"""
