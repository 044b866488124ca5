"""The built-in decode round: its parameters and variants, the round itself, counting it,
and running it on several processes.

- params.py: RoundParams, VARIANTS, STEPS (plain data, read by the command line's parser)
- decode.py: DecodeRound, `stages` distributed top-k stages
- count.py: count_round, CountedRound
- distributed.py: the round with a real all-gather, one process per rank
- chains.py: the round's own calls, registered as chain kinds
- timing.py: the round's variants timed, interleaved, over fresh builds
- pricing.py: each variant change's saving priced against the one measured
- replays.py: run_replays, the replay document of the round

May import: capture.count, capture.export, capture.graph, capture.scopes, capture.replay
(its timing, chains and document), kernels, pools.
"""
