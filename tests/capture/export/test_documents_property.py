"""Documents the validator has not seen before, fed to the commands that read them.

Exports and cost (replay) documents, mutated field by field into odd, hostile or merely
unusual values, go through `delta` and `advise` in this process (reports.cli.main with
its streams captured): each run exits 0 with output, or 2 with one line naming what is
wrong; never 1, never a traceback, and nothing is written anywhere.
"""

import copy
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.capture.export.valid_documents import export_doc, export_doc_v2, replay_doc
from tests.in_process import _run

# Values a careless user, a bug elsewhere or an attacker might leave in a field.
ODD = [
    None,
    True,
    0,
    -1,
    1,
    2**31,
    2**63 - 1,
    -(2**63),
    2**64,
    10**400,
    0.5,
    -0.0,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    "",
    "*",
    "[/]",
    "[bold]x[/bold]",
    ":smile:",
    "\udc80",
    "a\nb",
    "x" * 3000,
    "unscoped",
    "layers.*",
    "shipped",
    [],
    [None],
    [1, 2, 3],
    {},
    {"a": 1},
]


def _paths(doc, prefix=()):
    """Every field's path in a document, for picking one to change."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw, base):
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        how = draw(st.sampled_from(["set", "set", "set", "delete", "copy"]))
        if how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "copy" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(ODD)))
    return doc


def _listing(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _check(argv, folder):
    before = _listing(folder)
    code, out, err = _run(argv, folder)
    assert "Traceback" not in err and "Traceback" not in out, err
    assert _listing(folder) == before, "nothing is written"
    errors = [line for line in err.splitlines() if "error:" in line]
    if code == 0:
        assert out.strip(), err
        assert not errors, err
    else:
        assert code == 2, (argv, code, err)
        lines = err.splitlines()  # the banner may come first; the error is one line, last
        assert len(errors) == 1 and lines[-1] == errors[0], err
        assert errors[0].startswith(f"graph-harness {argv[0]}: error: "), err
        assert out == "", out
    return code, out


SMALL = ["--stages", "2", "--rows", "2", "--k", "32", "--world", "2", "--shard", "64"]


def _counted() -> dict:
    """Real exports, counted here once: the round's (two variants) and a model's by
    module, as `count --out` writes them."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for argv in (
            ["count", *SMALL, "--variant", "shipped", "--out", "round"],
            [
                "count",
                "--target",
                "tests.targets:tiny_llama_one_layer",
                "--module-scopes",
                "--out",
                "model",
            ],
        ):
            code, _, err = _run(argv, folder)
            assert code == 0, err
        return {
            p.parent.name + "/" + p.name: json.loads(p.read_text())
            for p in sorted(folder.glob("*/nodes-*.json"))
        }


DOCS = {"v1": export_doc(), "v2": export_doc_v2(), **_counted()}


@settings(
    max_examples=1500 if os.environ.get("GH_PROPERTY_MANY") else 100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    which=st.sampled_from(sorted(DOCS)),
    data=st.data(),
    as_json=st.booleans(),
)
def test_mutated_exports_through_delta_and_advise(which, data, as_json):
    doc = data.draw(mutated(DOCS[which]))
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "a.json").write_text(json.dumps(DOCS[which]))
        (folder / "b.json").write_text(json.dumps(doc))
        flags = ["--json"] * as_json
        _check(["delta", "./a.json", "./b.json", *flags], folder)
        _check(["delta", "./b.json", "./b.json", *flags], folder)
        _check(["advise", "./b.json", *flags], folder)


def _costs_for_the_round() -> tuple[dict, dict]:
    """A replay document whose round is the counted one, and that export as a CUDA graph's:
    advise then sets each prediction beside the document's measured saving."""
    export = copy.deepcopy(DOCS["round/nodes-shipped.json"])
    export["source"], export["env"]["device"] = "cuda-graph", "a GPU"
    costs = replay_doc()
    costs["params"] = dict(export["params"])
    return export, costs


ROUND_EXPORT, ROUND_COSTS = _costs_for_the_round()


@settings(
    max_examples=800 if os.environ.get("GH_PROPERTY_MANY") else 80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), as_json=st.booleans(), round_=st.booleans())
def test_mutated_cost_documents_through_advise(data, as_json, round_):
    export, base = (ROUND_EXPORT, ROUND_COSTS) if round_ else (export_doc_v2(), replay_doc())
    doc = data.draw(mutated(base))
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "nodes.json").write_text(json.dumps(export))
        (folder / "costs.json").write_text(json.dumps(doc))
        flags = ["--json"] * as_json
        _check(["advise", "./nodes.json", "--costs", "costs.json", "--top", "3", *flags], folder)


def test_the_unmutated_documents_work_and_reach_the_comparisons():
    # The property is not vacuous: every base runs, and the round's costs are compared.
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        for name, doc in DOCS.items():
            (folder / "n.json").write_text(json.dumps(doc))
            assert _check(["advise", "./n.json"], folder)[0] == 0, name
            assert _check(["delta", "./n.json", "./n.json"], folder)[0] == 0, name
        (folder / "n.json").write_text(json.dumps(ROUND_EXPORT))
        (folder / "c.json").write_text(json.dumps(ROUND_COSTS))
        code, out = _check(["advise", "./n.json", "--costs", "c.json", "--json"], folder)
        assert code == 0 and json.loads(out)["comparisons"], out
