"""A folder tree as data, every path with its bytes or link target: taken before and after
a command, to prove it moved nothing."""

import os
from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under root with its bytes (files) or link target: to prove nothing moved."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = "dir"
    return out
