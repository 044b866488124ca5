"""The built-in decode round: its parameters and variants, the round itself, counting it,
and running it on several processes.

- params.py: RoundParams, VARIANTS, STEPS (plain data, read by the command line's parser)
- decode.py: DecodeRound, `stages` distributed top-k stages
- count.py: count_round, CountedRound
- distributed.py: the round with a real all-gather, one process per rank

May import: capture.count, capture.export, capture.graph, capture.scopes, kernels, pools.
"""
