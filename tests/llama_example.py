"""examples/llama_decode.py loaded as a module (it is a script, not a package), for the
tests that build its steps."""

import importlib.util
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "llama_decode.py"


def load_example(name: str = "llama"):
    """examples/NAME_decode.py (llama, hf) as a module."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_decode_example", EXAMPLES / f"{name}_decode.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod
