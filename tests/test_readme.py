"""The README's examples, run on the CPU.

Every fenced ```python and ```sh block of README.md is run here unless the line just
before its opening fence is a marker, an HTML comment (invisible on GitHub):

- `<!-- readme-test: gpu -->`: needs a CUDA GPU (a compiled --target, replay, profile);
  not run here.
- `<!-- readme-test: setup -->`: the set-up commands of a fresh machine (a venv, pip
  installs); not run here: .ci/run runs the test command on a clean clone, and this test
  checks that .ci/run holds it verbatim.
- `<!-- readme-test: template -->`: a sketch around names you supply (`make_step`, `...`);
  compiled, not run.

Any other marker, or a block in another language without a marker, fails: a new block is
either run here or says why it is not. How a block runs:

- python: a block that defines `test_` functions is a test file, run by pytest in a child
  process (the node_budget plugin loaded as installed); any other block is executed.
- sh: one `graph-harness` command per line (`#` comments, `\\` continuations), run in
  order through the command line's `main` in a scratch folder holding a link to
  examples/ (so `advise model/...` reads what `count --out model` wrote); each must exit 0.
  Outputs with `--out` stay in the scratch folder.

The README's variant list is VARIANT_HELP's lines (one source; this test compares).
"""

import ast
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
KINDS = ("gpu", "setup", "template")
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- readme-test: (\S+) -->$")


def blocks() -> list[dict]:
    """Every fenced block with a language: its language, marker (or None), first line
    number and text."""
    lines = README.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = lines[i - 1] if i else ""
        marker = MARKER.match(before)
        if m.group(1):
            out.append(
                dict(
                    lang=m.group(1),
                    marker=marker.group(1) if marker else None,
                    line=i + 1,
                    text="\n".join(lines[i + 1 : end]) + "\n",
                )
            )
        i = end + 1
    return out


def _id(b) -> str:
    return f"line{b['line']}-{b['lang']}-{b['marker'] or 'run'}"


BLOCKS = blocks()
RUN = [b for b in BLOCKS if b["marker"] is None]


def test_every_block_is_run_or_says_why_not():
    assert len(RUN) >= 5 and any(b["marker"] == "gpu" for b in BLOCKS)
    for b in BLOCKS:
        where = f"README.md line {b['line']}"
        assert b["lang"] in ("python", "sh"), f"{where}: a ```{b['lang']} block is not run"
        assert b["marker"] in (None, *KINDS), f"{where}: unknown marker {b['marker']!r}"


def test_templates_compile():
    for b in BLOCKS:
        if b["marker"] == "template":
            assert b["lang"] == "python", b["line"]
            compile(b["text"], f"README.md:{b['line']}", "exec")


def test_ci_runs_the_readme_test_command_verbatim():
    setup = [b for b in BLOCKS if b["marker"] == "setup"]
    assert len(setup) == 2  # the main job, and the tests
    test_command = setup[1]["text"].strip().splitlines()[-1]
    assert "python -m pytest" in test_command
    assert test_command in (REPO / ".ci" / "run").read_text().splitlines()
    main_job = setup[0]["text"].strip().splitlines()[-1]
    assert main_job.endswith("&& graph-harness count")


def test_the_variant_list_is_variant_help():
    from graph_harness.capture.round.params import VARIANT_HELP

    listed = re.findall(r"^- `([\w-]+)`: (.+)$", README.read_text(), re.M)
    assert [x for x in listed if x[0] in VARIANT_HELP] == list(VARIANT_HELP.items())


def commands(text: str) -> list[list[str]]:
    """The argv of each command in a sh block (continuations joined, comments dropped)."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            out.append(argv)
    return out


@pytest.mark.parametrize("block", [b for b in RUN if b["lang"] == "python"], ids=_id)
def test_python_block(block, pytester):
    tree = ast.parse(block["text"])
    tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    if not tests:
        exec(compile(block["text"], f"README.md:{block['line']}", "exec"), {})
        return
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_readme_block=block["text"])
    # In a child: an in-process run drops the modules it imported (torch's and Triton's
    # among them), and importing those again in this process aborts it.
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"
    )
    result.assert_outcomes(passed=len(tests))


SH = [b for b in RUN if b["lang"] == "sh"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """One folder for every sh block, in README order: a later block may read what an
    earlier one wrote. examples/ is linked in, as in the repository's root."""
    where = tmp_path_factory.mktemp("readme")
    (where / "examples").symlink_to(REPO / "examples")
    return where


@pytest.mark.parametrize("block", SH, ids=_id)
def test_sh_block(block, scratch, monkeypatch, capsys):
    from graph_harness.reports.cli import program

    monkeypatch.chdir(scratch)
    argvs = commands(block["text"])
    assert argvs, block["line"]
    for argv in argvs:
        assert argv[0] == "graph-harness", f"README.md line {block['line']}: {argv}"
        code = program.main(argv[1:])
        captured = capsys.readouterr()
        assert code == 0, f"{shlex.join(argv)} exited {code}: {captured.err[-2000:]}"
        assert captured.out.strip(), shlex.join(argv)  # every command prints its results
