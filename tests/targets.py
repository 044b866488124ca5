"""--target factories for the CLI tests: each returns the callable to count."""

import os
import time
from pathlib import Path

import torch

from graph_harness.capture import scope


def small_mlp():
    x = torch.randn(4, 16)
    w = torch.randn(16, 16)
    y = torch.empty(4, 16)

    def step():
        with scope("matmul"):
            torch.mm(x, w, out=y)
        with scope("act"):
            y.relu_()

    return step


def item_in_step():
    """A step that reads a value back to the host: its capture fails on a GPU, named."""
    x = torch.randn(8, device="cuda" if torch.cuda.is_available() else "cpu")

    def step():
        with scope("sample"):
            return x * x.sum().item()  # tests look for this line

    return step


def not_callable():
    return 3


def interrupting():
    def step():
        raise KeyboardInterrupt

    return step


def raising():
    def step():
        raise ValueError("a bad shape in the user's step")  # tests look for this line

    return step


def exiting():
    def step():
        raise SystemExit(3)

    return step


def idle():
    return lambda: None  # issues no work at all


def waiting():
    """A step that says it is running (touches $GH_TEST_READY) and then waits for
    $GH_TEST_GO to appear, so a test can act while a run is in flight."""
    ready, go = Path(os.environ["GH_TEST_READY"]), Path(os.environ["GH_TEST_GO"])
    x = torch.ones(4)

    def step():
        ready.touch()
        deadline = time.monotonic() + 120
        while not go.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{go} never appeared")
            time.sleep(0.02)
        x.add_(1)

    return step


def compiled_mlp():
    """A step through torch.compile: counted on a GPU, refused on the CPU."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    run = torch.compile(model)
    x = torch.randn(4, 16)

    @torch.no_grad()
    def step():
        return run(x)

    step.module = model
    return step


def _example():
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "examples" / "llama_decode.py"
    spec = importlib.util.spec_from_file_location("llama_decode_for_tests", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def tiny_llama_one_layer():
    """The example's tiny preset with one layer fewer: a change for `delta` and reports."""
    import dataclasses

    ex = _example()
    ex.PRESETS["tiny-1"] = dataclasses.replace(ex.PRESETS["tiny"], n_layer=1)
    return ex.make_step(preset="tiny-1")


def hf_style():
    """A step of a model nested as HF transformers' (`model.layers.N`), for --module-scopes."""
    from tests.nested_models import make_step

    return make_step("hf")
