"""--target factories for the CLI tests: each returns the callable to count."""

import itertools
import os
import sys
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


def batched_mlp(batch: int = 1):
    """A step of `batch` rows for `sweep`: a small MLP on the default device, carried as
    `step.module`. Its operations do not depend on the batch; its work does."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)
    ).to(dev)
    x = torch.randn(batch, 16, device=dev)  # [B, 16] the step's static input

    @torch.no_grad()
    def step():
        return model(x)

    step.module = model
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


# --- steps with state (docs/steps-and-check.md) ------------------------------------------

# A profiled step takes at most this many replays in a row from its reset (the default
# ProfileSettings): the stateful toy's cache holds exactly that many rows, so one replay
# more between two resets would write past its end.
SLOTS = 11
WIDTH = 16
# `counting` steps each append a counter here: next(CALLS[-1]) is how often it ran. An
# itertools counter holds its count where the state walk does not look (no __dict__):
# the step still repeats, as far as graph-harness can see.
CALLS: list = []


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def stateful(slots=SLOTS, reset="in place", device=None):
    """A decode step in miniature: a position counter advanced in place, a cache row
    written at that position, a read over the whole cache. `reset`: "in place" (the
    protocol), None (no reset), "none of it" (a reset that resets nothing)."""
    dev = device or _device()
    g = torch.Generator().manual_seed(21)  # two builds are equal: a fresh build to compare
    start = torch.randn(slots, WIDTH, generator=g).to(dev)  # the cache's contents at the start
    x = torch.randn(WIDTH, generator=g).to(dev)
    pos = torch.zeros((), dtype=torch.long, device=dev)  # the position: [] int64
    cache = start.clone()  # [slots, WIDTH]: a row per position
    out = torch.empty(WIDTH, device=dev)

    def step():
        with scope("write"):
            cache.index_copy_(0, pos.view(1), (x * (pos + 1)).view(1, WIDTH))
        with scope("read"):
            torch.sum(cache, dim=0, out=out)
        pos.add_(1)
        return out

    if reset == "in place":

        def back_to_start():
            pos.zero_()
            cache.copy_(start)

        step.reset = back_to_start
    elif reset == "none of it":
        step.reset = lambda: None
    step.state = {"pos": pos, "cache": cache}  # for tests to look at
    return step


def stateful_cache():
    return stateful()


def stateful_cache_no_reset():
    return stateful(reset=None)


def overflowing():
    """The toy with a reset that resets nothing and a short cache: it is not refused (it
    has a reset), and its replays run past the cache's end."""
    return stateful(slots=8, reset="none of it")


def window_overrun(window: int = 6, steps: int = 12):
    """A sliding window whose slot is chosen on the host from a Python counter: eagerly
    the position modulo the window once the window is full, so the eager calls run to
    `step.max_steps`; a graph keeps the unwrapped index its capture saw, so the replay of
    call `window` writes past the cache's end: a device-side assertion (index_copy_)."""
    dev = _device()
    cache = torch.zeros(window, WIDTH, device=dev)
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    row = torch.linspace(1, 2, WIDTH, device=dev)
    out = torch.empty(WIDTH, device=dev)
    state = {"t": 0}

    def step():
        idx = pos % window if state["t"] >= window else pos
        cache.index_copy_(0, idx, (row * (pos + 1)).view(1, WIDTH))
        torch.sum(cache, dim=0, out=out)
        pos.add_(1)
        state["t"] += 1
        return out

    def reset():
        cache.zero_()
        pos.zero_()
        state["t"] = 0

    step.reset, step.max_steps = reset, steps
    return step


def bad_reset():
    step = stateful()
    step.reset = 3
    return step


def counting():
    """A step that records how often it runs (next(CALLS[-1]))."""
    calls = itertools.count()
    CALLS.append(calls)
    x = torch.ones(4, device=_device())

    def step():
        next(calls)
        x.mul_(1.0)

    return step


def frozen_counter():
    """A Python int indexes a tensor: the graph keeps the row its capture saw."""
    dev = _device()
    g = torch.Generator().manual_seed(5)
    table = torch.randn(64, WIDTH, generator=g).to(dev)
    out = torch.empty(WIDTH, device=dev)
    state = {"t": 0}

    def step():
        with scope("lookup"):
            out.copy_(table[state["t"]])
        state["t"] += 1
        return out

    step.reset = lambda: state.update(t=0)
    step.table = table
    return step


def host_scale():
    """A host value the device work reads that doubles at every call: it moves by no
    constant step, so check cannot try it ahead (on the CPU: not verified)."""
    dev = _device()
    x = torch.arange(WIDTH, dtype=torch.float32, device=dev)
    out = torch.empty(WIDTH, device=dev)
    state = {"scale": 1}

    def step():
        out.copy_(x * state["scale"])
        state["scale"] *= 2
        return out

    step.reset = lambda: state.update(scale=1)
    return step


def host_counter():
    """A host-side counter and nothing else that changes: it does not repeat."""
    x = torch.ones(4, device=_device())
    state = {"calls": 0}

    def step():
        state["calls"] += 1
        x.mul_(1.0)

    return step


def exiting_reset():
    step = stateful()
    step.reset = lambda: sys.exit(4)
    return step


def random_draws():
    """Random numbers from the default generator, scaled by a static input."""
    dev = _device()
    x = torch.randn(256, generator=torch.Generator().manual_seed(3)).to(dev)
    noise = torch.empty(256, device=dev)
    out = torch.empty(256, device=dev)

    def step():
        with scope("sample"):
            noise.uniform_()
            torch.mul(noise, x, out=out)
        return out

    return step


def pinned_copy():
    """A copy from a pinned host buffer (CUDA only): its graph reads the buffer at every
    replay. `step.host` is the buffer."""
    host = torch.randn(256, generator=torch.Generator().manual_seed(4)).pin_memory()
    buf = torch.empty(256, device="cuda")
    out = torch.empty(256, device="cuda")

    def step():
        with scope("load"):
            buf.copy_(host, non_blocking=True)
        with scope("scale"):
            torch.mul(buf, 2, out=out)
        return out

    step.host = host
    return step


def host_position(rewind=False):
    """The false pass of issue 30, in miniature: the position lives on the device but is
    written from a Python int at every call (`cpos.fill_(p)`, then `p += 1`), as an HF
    step feeding `cache_position` from a counter does. Its reset rewinds the cache only
    (`rewind=True`: the int too). A graph bakes the int its capture saw into the fill."""
    dev = _device()
    g = torch.Generator().manual_seed(30)
    x = torch.randn(WIDTH, generator=g).to(dev)
    cache = torch.zeros(64, WIDTH, device=dev)
    cpos = torch.zeros(1, dtype=torch.long, device=dev)
    out = torch.empty(WIDTH, device=dev)
    state = {"p": 0}

    def step():
        cpos.fill_(state["p"] % 64)  # a ring: however often it runs, it stays in the cache
        cache.index_copy_(0, cpos, (x * (cpos + 1)).view(1, WIDTH))
        torch.sum(cache, dim=0, out=out)
        state["p"] += 1
        return out

    def reset():
        cache.zero_()
        if rewind:
            state["p"] = 0

    step.reset = reset
    step.state, step.cache, step.cpos, step.x, step.out = state, cache, cpos, x, out
    return step


def host_position_rewound():
    return host_position(rewind=True)


def fed_stateful(rebind=False):
    """A decode step with its token fed: `step.feed(i)` writes call i's token into the
    static buffer `tok` (in place; `rebind=True`: into a new tensor, which a graph never
    sees), the position advances in place on the device, the reset zeroes the cache."""
    dev = _device()
    g = torch.Generator().manual_seed(31)
    table = torch.randn(64, WIDTH, generator=g).to(dev)  # an embedding
    tokens = torch.randint(0, 64, (SLOTS,), generator=g).to(dev)  # the sequence fed
    bufs = {"tok": torch.zeros(1, dtype=torch.long, device=dev)}
    kept = []  # every token tensor ever fed stays alive: a graph reading one reads no freed memory
    pos = torch.zeros(1, dtype=torch.long, device=dev)
    cache = torch.zeros(SLOTS, WIDTH, device=dev)
    out = torch.empty(WIDTH, device=dev)

    def step():
        with scope("embed"):
            e = table.index_select(0, bufs["tok"])
        with scope("write"):
            cache.index_copy_(0, pos, e)
        with scope("read"):
            torch.sum(cache, dim=0, out=out)
        pos.add_(1)
        return out

    def feed(i):
        if rebind:
            kept.append(bufs["tok"])
            bufs["tok"] = tokens[i : i + 1].clone()
        else:
            bufs["tok"].copy_(tokens[i : i + 1])

    def reset():
        pos.zero_()
        cache.zero_()

    step.feed, step.reset = feed, reset
    step.bufs, step.table, step.tokens, step.cache, step.pos, step.out = (
        bufs,
        table,
        tokens,
        cache,
        pos,
        out,
    )
    return step


def rebinding_feed():
    return fed_stateful(rebind=True)


def growing():
    """A cache that grows at every call (as transformers' DynamicCache does): no reset can
    make it replayable."""
    dev = _device()
    cache = {"k": torch.zeros(1, 0, WIDTH, device=dev)}
    x = torch.ones(1, 1, WIDTH, device=dev)

    def step():
        cache["k"] = torch.cat([cache["k"], x], dim=1)
        return cache["k"].sum()

    return step


def small_cache_no_reset():
    """The toy with two cache rows and no reset: its third warm-up writes past the end."""
    return stateful(slots=2, reset=None)
