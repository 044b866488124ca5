"""What the provenance tests compile and match: a small net (a block inside it) whose
compile leaves Inductor's provenance, and graph nodes made by hand (a serial chain, each
with its scope path)."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc2 = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(torch.relu(self.fc2(x)) + x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.block = Block()

    def forward(self, x):
        return self.block(torch.sigmoid(self.fc1(x)))


def node(i, kernel, scope_path=(), type_="kernel"):
    path = list(scope_path)
    return {
        "index": i,
        "type": type_,
        "kernel": kernel,
        "grid": None,
        "block": None,
        "scope": path[-1] if path else "unscoped",
        "step": path[-1] if path else "unscoped",
        "stage": None,
        "scope_path": path,
        "deps": [i - 1] if i else [],
        "parent": None,
    }
