"""The examples of README.md and of every guide in docs/, run on the CPU.

The pages are README.md and each docs/*.md (the folders under docs/ hold records, not
guides). Every fenced ```python and ```sh block of a page is run here unless the line
just before its opening fence is a marker, an HTML comment (invisible on GitHub):

- `<!-- readme-test: gpu -->`: needs a CUDA GPU (a compiled --target, replay, profile);
  not run here.
- `<!-- readme-test: setup -->`: the set-up commands of a fresh machine (a venv, pip
  installs); not run here: .ci/run runs the test command on a clean clone, and this test
  checks that .ci/run holds it verbatim. Each set-up block sits under a heading that says
  which machine it is for, and installs the torch that machine needs.
- `<!-- readme-test: template -->`: a sketch around names you supply (`make_step`, `...`);
  compiled, not run.

Any other marker, or a block in another language without a marker, fails: a new block is
either run here or says why it is not. How a block runs:

- python: a block that defines `test_` functions is a test file, run by pytest in a child
  process (the node_budget plugin loaded as installed); any other block is executed.
- sh: one `graph-harness` command per line (`#` comments, `\\` continuations), run in
  order through the command line's `main` in a scratch folder holding links to
  examples/ and docs/data/; each must exit 0. The sh blocks of one page share one
  scratch folder, in the page's order, so a later block may read what an earlier one
  wrote; under pytest-xdist each worker has its own folder, so commands that must see
  each other's output stay in one block (`count --out model` then `advise model/...`
  in docs/advise.md). Outputs with `--out` stay in the scratch folder.

Test ids name the page and the line of the block's opening fence
(`docs/advise.md-line3-sh-run`). The README's links are the guides' index: every guide is
linked from it, and every relative link of a page names a file that exists. The variant
list of docs/builtin-round.md is VARIANT_HELP's lines (one source; this test compares).
"""

import ast
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
VARIANT_LIST = "docs/builtin-round.md"
KINDS = ("gpu", "setup", "template")
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- readme-test: (\S+) -->$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def pages() -> list[Path]:
    """README.md, then the guides in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def blocks(page: Path) -> list[dict]:
    """Every fenced block of `page` with a language: its page, language, marker (or
    None), first line number and text."""
    lines = page.read_text().splitlines()
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
                    page=name(page),
                    lang=m.group(1),
                    marker=marker.group(1) if marker else None,
                    line=i + 1,
                    text="\n".join(lines[i + 1 : end]) + "\n",
                )
            )
        i = end + 1
    return out


def _id(b) -> str:
    return f"{b['page']}-line{b['line']}-{b['lang']}-{b['marker'] or 'run'}"


def _where(b) -> str:
    return f"{b['page']} line {b['line']}"


PAGES = pages()
BLOCKS = [b for p in PAGES for b in blocks(p)]
RUN = [b for b in BLOCKS if b["marker"] is None]


def test_every_block_is_run_or_says_why_not():
    assert len(RUN) >= 5 and any(b["marker"] == "gpu" for b in BLOCKS)
    assert {b["page"] for b in RUN} >= {"README.md", "docs/your-model.md", "docs/advise.md"}
    for b in BLOCKS:
        assert b["lang"] in ("python", "sh"), f"{_where(b)}: a ```{b['lang']} block is not run"
        assert b["marker"] in (None, *KINDS), f"{_where(b)}: unknown marker {b['marker']!r}"


def test_templates_compile():
    for b in BLOCKS:
        if b["marker"] == "template":
            assert b["lang"] == "python", _where(b)
            compile(b["text"], f"{b['page']}:{b['line']}", "exec")


def _last_line(b) -> str:
    return b["text"].strip().splitlines()[-1]


def test_ci_runs_the_readme_test_command_verbatim():
    setup = [b for b in BLOCKS if b["marker"] == "setup"]
    assert {b["page"] for b in setup} == {"README.md"}  # set-up is the front page's
    tests = [b for b in setup if "python -m pytest" in _last_line(b)]
    assert len(tests) == 1, [_where(b) for b in tests]  # the test command, once
    test_command = _last_line(tests[0])
    assert test_command in (REPO / ".ci" / "run").read_text().splitlines()
    main_jobs = [b for b in setup if b is not tests[0]]  # the main job, on each machine
    assert main_jobs
    for b in main_jobs:
        assert _last_line(b).endswith("&& graph-harness count"), _where(b)


def test_each_setup_block_says_which_machine_before_it():
    """A newcomer reads down to the first block and runs it: the heading above each
    set-up block names its machine, and the block installs that machine's torch (PyPI's
    default wheel on Linux is the multi-GB CUDA build)."""
    lines = README.read_text().splitlines()
    machines = set()
    for b in (b for b in BLOCKS if b["marker"] == "setup"):
        heading = next(x for x in reversed(lines[: b["line"] - 1]) if x.startswith("#"))
        gpu, cpu = "GPU machine" in heading, "CPU-only machine" in heading
        assert gpu != cpu, f"{_where(b)}: {heading!r} names no machine, or both"
        indexes = re.findall(r"pip install torch(?: --index-url (\S+))?", b["text"])
        assert indexes, f"{_where(b)}: installs no torch"
        want = "https://download.pytorch.org/whl/cpu" if cpu else ""  # "": PyPI's
        got = [i or "PyPI" for i in indexes]
        assert all(i == want for i in indexes), f"{_where(b)}: {heading!r}, torch from {got}"
        machines.add("GPU" if gpu else "CPU")
    assert machines == {"GPU", "CPU"}  # a block for each


def test_the_readme_links_every_guide_and_every_link_resolves():
    readme = README.read_text()
    linked = {(REPO / t).resolve() for t in LINK.findall(readme)}
    for page in pages()[1:]:
        assert page.resolve() in linked, f"README.md does not link {name(page)}"
    for page in pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"\w+:", target) or target.startswith("#"):
                continue  # a web address, or a heading of the page itself
            path = target.split("#")[0]
            assert (page.parent / path).exists(), f"{name(page)}: {target} is not a file"


def test_the_variant_list_is_variant_help():
    from graph_harness.capture.round.params import VARIANT_HELP

    listing = {}
    for page in pages():
        listed = re.findall(r"^- `([\w-]+)`: (.+)$", page.read_text(), re.M)
        if listed := [x for x in listed if x[0] in VARIANT_HELP]:
            listing[name(page)] = listed
    assert list(listing) == [VARIANT_LIST]  # one list, where the round is described
    assert listing[VARIANT_LIST] == list(VARIANT_HELP.items())


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
        exec(compile(block["text"], f"{block['page']}:{block['line']}", "exec"), {})
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
    """One folder per page for its sh blocks, in the page's order: a later block may read
    what an earlier one wrote. examples/ and docs/data/ are linked in, as in the
    repository's root."""
    folders = {}

    def folder(page: str) -> Path:
        if page not in folders:
            where = tmp_path_factory.mktemp(page.replace("/", "-").removesuffix(".md"))
            (where / "examples").symlink_to(REPO / "examples")
            (where / "docs").mkdir()  # the records a guide's example reads (graph dumps)
            (where / "docs" / "data").symlink_to(REPO / "docs" / "data")
            folders[page] = where
        return folders[page]

    return folder


@pytest.mark.parametrize("block", SH, ids=_id)
def test_sh_block(block, scratch, monkeypatch, capsys):
    from graph_harness.reports.cli import program

    monkeypatch.chdir(scratch(block["page"]))
    argvs = commands(block["text"])
    assert argvs, _where(block)
    for argv in argvs:
        assert argv[0] == "graph-harness", f"{_where(block)}: {argv}"
        code = program.main(argv[1:])
        captured = capsys.readouterr()
        assert code == 0, f"{shlex.join(argv)} exited {code}: {captured.err[-2000:]}"
        assert captured.out.strip(), shlex.join(argv)  # every command prints its results


def test_the_readme_budget_holds_for_the_example_it_names(monkeypatch):
    # The bug (issue 44, 13): total=264 in the README's template, where the example it
    # names counts 354 on the CPU. Its budgets must hold here (and, as measured, on a GPU).
    (template,) = [b for b in BLOCKS if b["page"] == "README.md" and b["marker"] == "template"]
    assert "from llama_decode import make_step" in template["text"]
    call = re.search(
        r"total=(\d+), per_scope=\{\"layers\.\*\.attention\": (\d+)\}", template["text"]
    )
    assert call, _where(template)
    total, attention = int(call.group(1)), int(call.group(2))
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    from llama_decode import make_step

    from graph_harness import capture

    step = make_step()
    export = capture.capture_and_count(step, module=step.module, depth=3)
    assert export.total <= total, (export.total, total)
    layers = {
        k: v
        for k, v in export.counts("scope").items()
        if re.fullmatch(r"layers\.\d+\.attention", str(k))
    }
    assert layers and max(layers.values()) <= attention, (layers, attention)
