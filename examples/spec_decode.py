"""Speculative decoding in miniature, served the way engines serve it, as a program for
`graph-harness record --check` (plain PyTorch: nothing here imports graph-harness but the
adapters, which name its EagerForm):

    graph-harness record --check --eager examples/spec_decode.py:eager_form \\
        --key examples/spec_decode.py:record_key -- examples/spec_decode.py --variant right

A small draft model proposes `k` tokens, a target model verifies them in one call of
1 + k tokens, the longest agreeing prefix is accepted with the target's next token, and the
rejected positions are rolled back. As engines do it (vLLM's and SGLang's spec decoding):
- every model call is a CUDA graph replay, captured once into one memory pool: the draft's
  one-token step, its two-token catch-up (after a step that accepted every draft, the draft
  has not seen its last draft token nor the target's bonus token), and the verify call;
- positions live on the device: the verify graph advances `pos` by 1 + k itself and
  subtracts the previous step's rejected count (`rollback`) at its start;
- each graph's static inputs are written before its replay; greedy decoding, so that the
  generated tokens are a function of the prompt alone, graphs or not.

`--variant`, each a bug seen in engines' graphs:
- `right`: every graph computes what its code computes.
- `host-rollback`: the rollback is read from a Python attribute inside the verify graph,
  which the capture froze at 0 (TensorRT-LLM #17110's host write positions): the graph
  writes the target's KV at the wrong positions from the first step after a rejection.
- `shared-key`: the draft's one-token step and its catch-up are cached under one key
  (llama.cpp #28549): each change of shape re-captures the graph under that key.
- `never-replayed`: a three-token catch-up graph captured that no step dispatches
  (vLLM #47460).

Without CUDA it runs eagerly and captures nothing. It prints the tokens it generated and
its acceptance: the same with and without the recorder.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import torch
from torch import nn

VARIANTS = ("right", "host-rollback", "shared-key", "never-replayed")


class TinyLM(nn.Module):
    """One attention layer over a static KV cache, single sequence: `forward(tokens [n],
    positions [n])` writes the n keys and values at `positions` and returns the logits
    [n, vocab], each position attending to every cached position up to its own."""

    def __init__(self, vocab: int, dim: int, max_len: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos_emb = nn.Embedding(max_len, dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.o = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("k_cache", torch.zeros(max_len, dim))  # [max_len, dim]
        self.register_buffer("v_cache", torch.zeros(max_len, dim))
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens) + self.pos_emb(positions)  # [n, dim]
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        self.k_cache.index_copy_(0, positions, k)
        self.v_cache.index_copy_(0, positions, v)
        att = (q @ self.k_cache.T) * self.scale  # [n, max_len]
        cols = torch.arange(self.k_cache.shape[0], device=tokens.device)
        att = att.masked_fill(cols[None, :] > positions[:, None], float("-inf"))
        h = h + self.o(att.softmax(-1) @ self.v_cache)
        return self.head(h)


def models(vocab: int, dim: int, max_len: int, device: str) -> tuple[TinyLM, TinyLM]:
    """The target, and a draft that is the target with its weights perturbed: it agrees
    with the target often, not always (so steps accept 0 to k drafts)."""
    torch.manual_seed(0)
    target = TinyLM(vocab, dim, max_len).to(device).eval()
    draft = TinyLM(vocab, dim, max_len).to(device).eval()
    with torch.no_grad():
        for p, q in zip(draft.parameters(), target.parameters()):
            p.copy_(q + 0.02 * torch.randn_like(q))
    return target, draft


@dataclass
class Capturing:
    """What is being captured (the engine's forward context): read by the adapters."""

    engine: Engine
    kind: str  # "draft" or "verify"
    n: int  # tokens the call takes
    key: str
    slot: Slot


_capturing: list[Capturing] = []


class Slot:
    """One captured graph and the static outputs its capture returned."""

    def __init__(self, n: int) -> None:
        self.n, self.graph, self.out = n, None, None


class Engine:
    def __init__(self, variant: str, k: int, vocab: int, dim: int, max_len: int, device: str):
        self.variant, self.k, self.device = variant, k, device
        self.target, self.draft = models(vocab, dim, max_len, device)
        self.graphs_on = device == "cuda"
        z = lambda *s: torch.zeros(*s, dtype=torch.long, device=device)
        # static inputs, written before each replay
        self.verify_tokens = z(k + 1)  # [1 + k]: the last token, then the k drafts
        self.pos = z(())  # the verify's next position, advanced by the verify itself
        self.rollback_t = z(())  # the previous step's rejected drafts (right: on the device)
        self.rollback = 0  # host-rollback: the same number, read on the host
        self.draft_tokens = {n: z(n) for n in (1, 2, 3)}  # [n]
        self.draft_pos = {n: z(n) for n in (1, 2, 3)}  # [n]
        self.pool = None
        self.slots: dict[str, Slot] = {}
        self.captures: dict[str, int] = {}  # key -> captures under it
        self.replays: dict[str, int] = {}

    # --- the captured code --------------------------------------------------------------

    def verify_step(self) -> torch.Tensor:
        """The target over 1 + k tokens: its next token at each position [1 + k]."""
        back = self.rollback if self.variant == "host-rollback" else self.rollback_t
        base = self.pos - back
        positions = base + torch.arange(self.k + 1, device=self.device)
        out = self.target(self.verify_tokens, positions).argmax(-1)
        self.pos.copy_(base + self.k + 1)  # as if every draft is accepted
        return out

    def draft_step(self, n: int) -> torch.Tensor:
        """The draft over n tokens: its next token after the last [1]."""
        return self.draft(self.draft_tokens[n], self.draft_pos[n])[-1:].argmax(-1)

    # --- graphs -------------------------------------------------------------------------

    def key(self, kind: str, n: int) -> str:
        if kind == "draft" and self.variant == "shared-key":
            return "draft"  # both shapes under one key: the bug
        return f"{kind} n={n}"

    def run(self, kind: str, n: int) -> torch.Tensor:
        fn = self.verify_step if kind == "verify" else lambda: self.draft_step(n)
        if not self.graphs_on:
            with torch.no_grad():
                return fn()
        key = self.key(kind, n)
        slot = self.slots.get(key)
        if slot is None or slot.n != n:
            slot = self.capture(kind, n, key, fn)
        slot.graph.replay()
        self.replays[key] = self.replays.get(key, 0) + 1
        return slot.out

    def capture(self, kind: str, n: int, key: str, fn: object) -> Slot:
        slot = Slot(n)
        slot.graph = torch.cuda.CUDAGraph()
        _capturing.append(Capturing(self, kind, n, key, slot))
        try:  # a capture records the work, running none of it: the state stays as it was
            with torch.no_grad(), torch.cuda.graph(slot.graph, pool=self.pool):
                slot.out = fn()
        finally:
            _capturing.pop()
        self.pool = slot.graph.pool()
        self.slots[key] = slot
        self.captures[key] = self.captures.get(key, 0) + 1
        return slot

    def warm_up(self) -> None:
        """Each call once eagerly (lazy initialization stays out of the captures), then
        the graphs captured, largest first (the state put back after each)."""
        saved = {k: v.clone() for k, v in self.state().items()}
        with torch.no_grad():
            self.verify_step()
            for n in (1, 2):
                self.draft_step(n)
        for k, v in self.state().items():
            v.copy_(saved[k])
        if not self.graphs_on:
            return
        torch.cuda.synchronize()
        self.run_capture("verify", self.k + 1)
        if self.variant == "never-replayed":
            self.run_capture("draft", 3)
        for n in (2, 1):
            self.run_capture("draft", n)

    def run_capture(self, kind: str, n: int) -> None:
        fn = self.verify_step if kind == "verify" else lambda: self.draft_step(n)
        self.capture(kind, n, self.key(kind, n), fn)

    def state(self) -> dict[str, torch.Tensor]:
        """Every tensor the captured code reads or writes besides the weights."""
        out = {
            "target.k_cache": self.target.k_cache,
            "target.v_cache": self.target.v_cache,
            "draft.k_cache": self.draft.k_cache,
            "draft.v_cache": self.draft.v_cache,
            "pos": self.pos,
            "rollback": self.rollback_t,
            "verify_tokens": self.verify_tokens,
        }
        for n in (1, 2, 3):
            out[f"draft_tokens[{n}]"] = self.draft_tokens[n]
            out[f"draft_pos[{n}]"] = self.draft_pos[n]
        return out

    # --- serving ------------------------------------------------------------------------

    def draft_call(self, tokens: list[int], start: int) -> int:
        n = len(tokens)
        self.draft_tokens[n].copy_(torch.tensor(tokens, device=self.device))
        self.draft_pos[n].copy_(torch.arange(start, start + n, device=self.device))
        return int(self.run("draft", n).item())

    def generate(self, prompt: list[int], new_tokens: int) -> tuple[list[int], list[int]]:
        """Greedy tokens after `prompt`, and the drafts accepted at each step."""
        with torch.no_grad():  # the prompt, eagerly, into both caches
            pos = torch.arange(len(prompt), device=self.device)
            ids = torch.tensor(prompt, device=self.device)
            self.target(ids, pos)
            self.draft(ids, pos)
        out = list(prompt)
        self.pos.fill_(len(prompt) - 1)  # the verify rewrites the last prompt position
        pending = [prompt[-1]]  # tokens the draft has not seen yet, from position `at`
        at = len(prompt) - 1
        accepted = []
        while len(out) - len(prompt) < new_tokens:
            drafts = []
            for _ in range(self.k):
                nxt = self.draft_call(pending, at)
                at += len(pending)
                drafts.append(nxt)
                pending = [nxt]
            self.verify_tokens.copy_(torch.tensor([out[-1], *drafts], device=self.device))
            self.rollback_t.fill_(self.rollback)
            target = self.run("verify", self.k + 1).tolist()
            a = 0
            while a < self.k and drafts[a] == target[a]:
                a += 1
            out += [*drafts[:a], target[a]]
            accepted.append(a)
            self.rollback = self.k - a  # the next verify starts that much earlier
            # the draft's cache holds the accepted drafts it was fed; it has not seen the
            # target's token, nor, when every draft was accepted, its own last draft
            pending = [drafts[-1], target[a]] if a == self.k else [target[a]]
            at = len(out) - len(pending)
        return out[len(prompt) :][:new_tokens], accepted


# --- graph-harness's adapters -----------------------------------------------------------


def record_key(ctx) -> str | None:
    """The engine's key for the graph being captured (`record --key`)."""
    return _capturing[-1].key if _capturing else None


def eager_form(ctx):
    """The eager form of the graph being captured (`record --eager`): the engine's own
    call, on its static buffers, comparing its outputs and every tensor it reads or
    writes."""
    from graph_harness.capture import EagerForm

    if not _capturing:
        return None
    c = _capturing[-1]
    engine = c.engine
    fn = engine.verify_step if c.kind == "verify" else (lambda n=c.n: engine.draft_step(n))
    return EagerForm(fn=fn, state=engine.state(), outputs=lambda: c.slot.out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=VARIANTS, default="right")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--tokens", type=int, default=40)
    p.add_argument("--stats", help="write the engine's own account here (JSON)")
    args = p.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    engine = Engine(args.variant, args.k, vocab=48, dim=64, max_len=256, device=device)
    engine.warm_up()
    tokens, accepted = engine.generate([1, 5, 9, 2], args.tokens)
    print(f"spec decode ({args.variant}, k={args.k}): tokens {tokens}")
    print(f"accepted per step {accepted}")
    if args.stats:
        with open(args.stats, "w") as f:
            stats = {"captures": engine.captures, "replays": engine.replays, "accepted": accepted}
            json.dump(stats, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
