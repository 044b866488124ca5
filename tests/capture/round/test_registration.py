"""The round's chain kinds and advisor hooks join their registries by explicit calls
(issue 61: no import done only for its side effect), each where the registry is first
needed. Run in a fresh interpreter, so nothing imported earlier in the session registers
them instead."""

import subprocess
import sys
import textwrap

from tests.size_budget import REPO


def _fresh(code: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, check=True, timeout=120)


def test_importing_the_round_registers_nothing():
    _fresh(
        """
        import graph_harness.capture.round.chains, graph_harness.capture.round.advice
        from graph_harness.capture.advise import hooks
        from graph_harness.capture.replay.kinds import chain_kinds

        assert "pack-shipped" not in chain_kinds(), chain_kinds()
        assert not hooks._OWN_CHAINS and not hooks._MEASURED
        """
    )


def test_register_adds_the_round_kinds_once():
    _fresh(
        """
        from graph_harness.capture.replay.kinds import chain_kinds
        from graph_harness.capture.round import chains

        chains.register()
        chains.register()  # a second call changes nothing
        assert chain_kinds() == (
            "triton-empty", "torch-add", "memcpy", "memset",
            "pack-shipped", "pack-compiled", "pack-fused", "compaction-copies",
        ), chain_kinds()
        assert chain_kinds(pdl=True) == ("triton-empty-pdl", "pack-fused-pdl")
        """
    )


def test_step_chain_registers_the_kinds_it_names():
    _fresh(
        """
        from graph_harness.capture.round.chains import step_chain

        assert step_chain("fused", "pack") == "pack-fused"
        assert step_chain("shipped", "copy") == "compaction-copies"
        """
    )


def test_the_replay_command_lists_the_round_kinds():
    _fresh(
        """
        import argparse

        from graph_harness.reports.cli.commands import replay

        sub = argparse.ArgumentParser().add_subparsers()
        replay.add_parser(sub, argparse.ArgumentParser(add_help=False))
        (kind,) = [a for a in sub.choices["replay"]._actions if a.dest == "kind"]
        assert {"pack-shipped", "pack-fused-pdl"} <= set(kind.choices), kind.choices
        """
    )


def test_the_advisor_calls_the_rounds_registration():
    _fresh(
        """
        from graph_harness.capture.advise import hooks

        comparers = hooks.measured_comparers()
        assert [f.__name__ for f in comparers] == ["round_savings"], comparers
        assert [f.__name__ for f in hooks._OWN_CHAINS.values()] == ["round_chains"]
        """
    )
