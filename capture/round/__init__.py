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
- profile.py: profile_rounds, the round's variants profiled in every build
- advice.py: the round's own chains and measured savings, registered with the advisor

The round sits at the top of capture: generic measurement (replay, profile, advise) knows
nothing of it, and the round registers what it adds to each (its chain kinds, what the
advisor prices its calls with and compares its predictions against). Nothing registers on
import: the advisor calls advice.py's `register` on first use (capture/advise/hooks.py
BUILTIN), and chains.py's `register` is called where the round's kinds are first needed.

May import: capture.count, capture.export, capture.graph, capture.scopes, capture.replay
(its timing, chains and document), capture.profile (its rounds profiled), capture.advise
(what it registers), kernels, pools.
"""
