"""A tiny serving engine, built the way vLLM and SGLang capture a decode step, as a program
for `graph-harness record` (nothing here imports graph-harness but the eager adapter,
which names its EagerForm; the engine is plain PyTorch).

    graph-harness record --key examples/tiny_engine.py:record_key -- \\
        examples/tiny_engine.py --sizes 1 2 4 8 --steps 32 --piecewise
    graph-harness record --check --eager examples/tiny_engine.py:eager_form \\
        --key examples/tiny_engine.py:record_key -- examples/tiny_engine.py --piecewise

What it does, as engines do:
- one static input buffer per engine, sized for the largest batch (`--sizes`);
- every size captured into one shared memory pool, largest first, on one capture stream
  (vLLM's order: later, smaller captures reuse the larger ones' blocks);
- `--piecewise`: each size's step split into pieces at attention, one graph per piece,
  with attention run eagerly between them (vLLM's piecewise CUDA graphs); otherwise one
  graph per size;
- a forward context naming what is being run (`batch_size`, `piece`), as vLLM's
  `set_forward_context` carries its `BatchDescriptor`: `record_key` reads it;
- serving: each step's batch (seeded, drawn from 1 to `--serve-max`) padded up to the
  smallest captured size that holds it, its graphs replayed; a size no batch pads to (8
  with the defaults) is captured and never replayed.

`--stats FILE` writes the engine's own account (replays per size and piece, graphs
captured: what a recording of it must agree with; its capture loop's seconds). Without
CUDA it runs eagerly and captures nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ForwardContext:
    batch_size: int
    piece: int | None = None  # which piece of a piecewise step (None: the whole step)
    pieces: int = 1


_context: list[ForwardContext] = []  # the engine's forward context, innermost last


def current_context() -> ForwardContext | None:
    return _context[-1] if _context else None


def record_key(ctx) -> str | None:
    """graph-harness's key adapter for this engine: the batch size and piece being
    captured, from the engine's forward context (a vLLM adapter would read
    `vllm.forward_context.get_forward_context().batch_descriptor` the same way)."""
    fc = current_context()
    if fc is None:
        return None
    piece = "" if fc.piece is None else f" piece={fc.piece}/{fc.pieces}"
    return f"bs={fc.batch_size}{piece}"


def eager_form(ctx):
    """graph-harness's eager-form adapter for this engine (`record --check --eager`): the
    call the engine captures, on its static buffers: the whole step on `ids[:b]`, or one
    piece on `ids` and what it carries from the piece before (the previous piece's static
    output and the eager attention's buffer); the graph's outputs as the engine keeps them."""
    from graph_harness.capture import EagerForm

    fc, engine = current_context(), ctx.find("self")
    if fc is None or not isinstance(engine, Engine):
        return None
    b, i = fc.batch_size, fc.piece
    if i is None:
        return EagerForm(
            fn=lambda: engine.model(engine.ids[:b]),
            state={"ids": engine.ids},
            outputs=lambda: engine.outputs[b][0],
        )
    carry = ctx.find("carry")
    state = {"ids": engine.ids}
    if carry is not None:
        state.update({"carry.x": carry[0], "carry.attention": carry[1]})
    return EagerForm(
        fn=lambda: engine.piece(i, b, carry),
        state=state,
        outputs=lambda: engine.outputs[b][i],
    )


class Block(nn.Module):
    """One decoder layer, its attention split out: `pre` (norm, qkv), `attend`, `post`."""

    def __init__(self, dim: int, heads: int, max_batch: int, seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm2 = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)
        # a static KV cache: [max_batch, heads, seq, head_dim]
        hd = dim // heads
        self.register_buffer("k", torch.randn(max_batch, heads, seq, hd) * 0.1, persistent=False)
        self.register_buffer("v", torch.randn(max_batch, heads, seq, hd) * 0.1, persistent=False)

    def pre(self, x):  # x: [B, dim] -> q, k, v: [B, heads, 1, hd]
        b, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, 3, self.heads, 1, dim // self.heads).unbind(1)
        return q, k, v

    def attend(self, q, k, v):  # eager between pieces, as an engine's attention backend
        b = q.shape[0]
        keys = torch.cat([self.k[:b], k], dim=2)
        values = torch.cat([self.v[:b], v], dim=2)
        return F.scaled_dot_product_attention(q, keys, values).flatten(1)  # [B, dim]

    def post(self, x, a):
        h = x + self.proj(a)
        return h + self.down(F.gelu(self.up(self.norm2(h))))


class TinyModel(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, max_batch: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, max_batch, 16) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):  # ids: [B] -> logits [B, vocab]: the whole step
        x = self.embed(ids)
        for layer in self.layers:
            x = layer.post(x, layer.attend(*layer.pre(x)))
        return self.head(self.norm(x))


class Engine:
    """Captures `sizes` (largest first, one shared pool), then serves padded batches."""

    def __init__(self, sizes, *, piecewise: bool, layers: int = 4, dim: int = 256, seed: int = 0):
        torch.manual_seed(seed)
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.sizes = sorted(set(sizes))
        self.piecewise = piecewise
        self.max = self.sizes[-1]
        self.model = TinyModel(512, dim, layers, 4, self.max).to(self.device).eval()
        self.ids = torch.zeros(self.max, dtype=torch.long, device=self.device)  # [max]
        self.graphs: dict[int, list[torch.cuda.CUDAGraph]] = {}
        self.outputs: dict[int, list] = {}  # each graph's static outputs
        self.carries: dict[int, list] = {}  # the eager attention outputs pieces read
        self.replays = {b: 0 for b in self.sizes}

    # the step's pieces: piece 0 embeds and runs layer 0's pre; piece i runs layer i-1's
    # post and layer i's pre; the last runs the last post, the norm and the head
    def n_pieces(self) -> int:
        return len(self.model.layers) + 1

    def piece(self, i: int, b: int, carry):
        m = self.model
        if i == 0:
            x = m.embed(self.ids[:b])
            return (x, *m.layers[0].pre(x))
        x, attn = carry
        x = m.layers[i - 1].post(x, attn)
        if i == len(m.layers):
            return (m.head(m.norm(x)),)
        return (x, *m.layers[i].pre(x))

    @torch.no_grad()
    def capture(self) -> None:
        if not self.cuda:
            return
        pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream()
        for b in reversed(self.sizes):  # largest first
            self.run_eager(b)  # warm-up (lazy init stays out of the graphs)
            torch.cuda.synchronize()
            if self.piecewise:
                self._capture_pieces(b, pool, stream)
            else:
                g = torch.cuda.CUDAGraph()
                _context.append(ForwardContext(b))
                with torch.cuda.graph(g, pool=pool, stream=stream):
                    out = self.model(self.ids[:b])
                _context.pop()
                self.graphs[b], self.outputs[b] = [g], [out]

    def _capture_pieces(self, b: int, pool, stream) -> None:
        graphs, outs, carries, carry = [], [], [], None
        n = self.n_pieces()
        for i in range(n):
            g = torch.cuda.CUDAGraph()
            _context.append(ForwardContext(b, i, n))
            with torch.cuda.graph(g, pool=pool, stream=stream):
                out = self.piece(i, b, carry)
            _context.pop()
            graphs.append(g)
            outs.append(out)
            if i < n - 1:
                x, q, k, v = out
                # eager, between pieces; the next piece is captured reading this tensor,
                # which every replay refills in place
                attn = self.model.layers[i].attend(q, k, v)
                carries.append(attn)
                carry = (x, attn)
        self.graphs[b], self.outputs[b], self.carries[b] = graphs, outs, carries

    def run_eager(self, b: int):
        if not self.piecewise:
            return self.model(self.ids[:b])
        carry = None
        for i in range(self.n_pieces()):
            out = self.piece(i, b, carry)
            if i < self.n_pieces() - 1:
                x, q, k, v = out
                carry = (x, self.model.layers[i].attend(q, k, v))
        return out[0]

    def padded(self, n: int) -> int:
        """The smallest captured size that holds `n` (the engine's padded lookup)."""
        for b in self.sizes:
            if b >= n:
                return b
        raise ValueError(f"batch {n} is larger than the largest captured size {self.max}")

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[0]
        b = self.padded(n)
        self.ids[:n].copy_(tokens)
        self.ids[n:b].zero_()  # the padding rows
        self.replays[b] += 1
        if not self.cuda:
            return self.run_eager(b)[:n]
        graphs, outs = self.graphs[b], self.outputs[b]
        if not self.piecewise:
            graphs[0].replay()
            return outs[0][:n]
        for i, g in enumerate(graphs):
            g.replay()
            if i < len(graphs) - 1:  # eager attention on the piece's static outputs
                _, q, k, v = outs[i]
                self.carries[b][i].copy_(self.model.layers[i].attend(q, k, v))
        return outs[-1][0][:n]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--serve-max", type=int, default=4, help="largest batch served")
    ap.add_argument("--piecewise", action="store_true")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stats", help="write the engine's own account here (JSON)")
    args = ap.parse_args(argv)
    engine = Engine(args.sizes, piecewise=args.piecewise, layers=args.layers, dim=args.dim)
    t0 = time.perf_counter()
    engine.capture()
    capture_s = time.perf_counter() - t0  # the engine's own ladder: warm-ups and captures
    rng = random.Random(args.seed)
    checksum = 0.0
    for _ in range(args.steps):
        n = rng.randint(1, args.serve_max)
        tokens = torch.randint(0, 512, (n,), device=engine.device)
        checksum += float(engine.step(tokens).float().sum())
    graphs = sum(len(g) for g in engine.graphs.values())
    print(f"tiny engine: {args.steps} steps, {graphs} graphs, checksum {checksum:.4f}")
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(
                {
                    "replays_per_size": engine.replays if engine.cuda else {},
                    "pieces": engine.n_pieces() if args.piecewise else 1,
                    "graphs": graphs,
                    "sizes": engine.sizes,
                    "capture_s": capture_s,
                },
                f,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
