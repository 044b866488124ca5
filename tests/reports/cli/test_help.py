"""Help that explains: every subcommand's --help has a description and examples that parse,
every round parameter says what it means (RoundParams' field metadata, the one source),
the variants are listed one line each (VARIANT_HELP), and --per-stage does what it says."""

import argparse
import dataclasses
import shlex

import pytest

from graph_harness.capture.round.params import VARIANT_HELP, VARIANTS, RoundParams
from graph_harness.reports.cli import program

TINY = ["--stages", "2", "--rows", "2", "--k", "4", "--world", "2", "--shard", "16"]


def subparsers() -> dict[str, argparse.ArgumentParser]:
    ap = program.build_parser()
    action = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_round_parameter_says_what_it_means():
    for f in dataclasses.fields(RoundParams):
        text = f.metadata.get("help", "")
        assert len(text.split()) >= 4, f"RoundParams.{f.name} has no help metadata"


def test_the_variants_are_all_described():
    assert list(VARIANT_HELP) == list(VARIANTS)
    assert all(len(text.split()) >= 4 for text in VARIANT_HELP.values())


def test_every_subcommand_has_a_description_and_examples_that_parse(capsys):
    subs = subparsers()
    assert set(subs) == {
        "count",
        "delta",
        "replay",
        "advise",
        "profile",
        "check",
        "report",
        "sweep",
        "record",
    }
    for name, p in subs.items():
        text = p.format_help()
        assert p.description and len(p.description.split()) >= 15, name
        assert "\nexamples:\n" in text, name
        examples = p.epilog.split("examples:\n", 1)[1].split("\n\n")[0].splitlines()
        assert examples, name
        if "\non a CUDA GPU only:\n" in p.epilog:  # these parse too, and say what they need
            gpu = p.epilog.split("\non a CUDA GPU only:\n", 1)[1].split("\n\n")[0]
            examples += gpu.splitlines()
        for line in examples:
            argv = shlex.split(line)
            assert argv[:2] == ["graph-harness", name], line
            program.build_parser().parse_args(argv[1:])  # a usage error would SystemExit(2)


@pytest.mark.parametrize("name", ["count", "replay", "profile", "report", "delta", "advise"])
def test_the_round_commands_list_every_variant_with_its_line(name):
    text = " ".join(subparsers()[name].format_help().split())  # wrapping undone
    for variant, what in VARIANT_HELP.items():
        assert f"{variant} {what}" in text, (name, variant)


def test_round_parameters_help_comes_from_the_metadata():
    text = " ".join(subparsers()["count"].format_help().split())
    for f in dataclasses.fields(RoundParams):
        default = getattr(RoundParams(), f.name)
        assert f"--{f.name} {f.name.upper()} {f.metadata['help']} (default {default})" in text


def test_per_stage_prints_stage_tables_only_when_asked(capsys):
    variants = ["--variant", "shipped", "--variant", "fused"]
    assert program.main(["count", *TINY, *variants]) == 0
    plain = capsys.readouterr().out
    assert program.main(["count", *TINY, *variants, "--per-stage"]) == 0
    staged = capsys.readouterr().out
    title = "nodes per stage and step"
    assert "Nodes per round" in plain and title not in plain
    assert staged.count(title) == 2
    assert "shipped: " + title in staged and "fused: " + title in staged
