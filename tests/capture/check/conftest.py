"""no_gpu_parts (standin.py's) for every test in this folder, as pytest shares a fixture."""

from tests.capture.check.standin import no_gpu_parts  # noqa: F401 - the fixture
