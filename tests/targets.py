"""--target factories for the CLI tests: each returns the callable to count."""

import torch

from capture import scope


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


def not_callable():
    return 3


def interrupting():
    def step():
        raise KeyboardInterrupt

    return step
