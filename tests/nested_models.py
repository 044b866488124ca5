"""Two small decoders laid out as the models users bring: HF transformers' nesting
(`model.layers.N` inside a submodule, the layers under a ModuleList that never runs) and
gpt-fast's (`layers.N` at the top). Plain PyTorch, random weights, float32."""

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape  # x: [B, T, D]
        q, k, v = (
            p(x).view(b, t, self.heads, -1).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )  # [B, H, T, D/H]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, 2 * dim, bias=False)
        self.up_proj = nn.Linear(dim, 2 * dim, bias=False)
        self.down_proj = nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.input_layernorm, self.self_attn = RMSNorm(dim), Attention(dim, heads)
        self.post_attention_layernorm, self.mlp = RMSNorm(dim), MLP(dim)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class HFModel(nn.Module):  # as LlamaModel: the layers one level down
    def __init__(self, vocab: int, dim: int, heads: int, n_layer: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(n_layer))
        self.norm = RMSNorm(dim)

    def forward(self, idx):
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class HFForCausalLM(nn.Module):  # as LlamaForCausalLM: model.layers.N
    def __init__(self, vocab=64, dim=32, heads=4, n_layer=3) -> None:
        super().__init__()
        self.model = HFModel(vocab, dim, heads, n_layer)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        return self.lm_head(self.model(idx))


class GptFast(nn.Module):  # as gpt-fast's Transformer: layers.N at the top
    def __init__(self, vocab=64, dim=32, heads=4, n_layer=3) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(DecoderLayer(dim, heads) for _ in range(n_layer))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def make_step(layout: str = "hf", n_layer: int = 3, device: str = "cpu", compiled=False):
    """A decode-like step of one of the layouts, the model on `step.module`."""
    torch.manual_seed(0)
    model = (HFForCausalLM if layout == "hf" else GptFast)(n_layer=n_layer).to(device).eval()
    run = torch.compile(model, fullgraph=True) if compiled else model
    idx = torch.randint(0, 64, (1, 4), device=device)  # [B=1, T=4] tokens

    @torch.no_grad()
    def step():
        return run(idx)

    step.module = model
    return step
