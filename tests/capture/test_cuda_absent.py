"""Whether a machine surely has no CUDA device, told without torch or the driver started
(capture/environment.py `cuda_surely_absent`): `replay` and `profile` are refused before
torch's import only where it says so, and it says so only where torch would agree."""

import sys

import pytest

from graph_harness.capture import environment
from graph_harness.capture.environment import cuda_surely_absent


@pytest.fixture
def no_driver(monkeypatch):
    monkeypatch.setattr(environment, "_driver", lambda: None)
    monkeypatch.setattr(sys, "platform", "linux")


@pytest.mark.parametrize("visible", ["", "-1", "-1,0", " -1 ,1"])
def test_devices_hidden_by_cuda_visible_devices(tmp_path, monkeypatch, visible):
    monkeypatch.setattr(sys, "platform", "linux")
    (tmp_path / "nvidia0").touch()  # a GPU there, hidden from this process
    assert cuda_surely_absent({"CUDA_VISIBLE_DEVICES": visible}, str(tmp_path))


@pytest.mark.parametrize("visible", [None, "0", "1,-1", "GPU-3f2a", "MIG-1", " "])
@pytest.mark.parametrize("device", ["nvidia0", "nvidiactl", "dxg", "kfd"])
def test_a_device_file_leaves_it_to_torch(tmp_path, no_driver, visible, device):
    # whatever these name, torch (through the driver) decides: never a false refusal
    (tmp_path / device).touch()
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert not cuda_surely_absent(env, str(tmp_path))


def test_no_device_file_and_no_driver_is_surely_no_gpu(tmp_path, no_driver):
    (tmp_path / "null").touch()
    assert cuda_surely_absent({}, str(tmp_path))
    assert cuda_surely_absent({"CUDA_VISIBLE_DEVICES": "0"}, str(tmp_path))


def test_a_driver_that_loads_leaves_it_to_torch(tmp_path, monkeypatch):
    # device files can be made on the driver's first use (nvidia-modprobe): not absent
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(environment, "_driver", lambda: object())
    assert not cuda_surely_absent({}, str(tmp_path))


def test_other_systems_are_left_to_torch(tmp_path, no_driver, monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")  # nvcuda.dll, no /dev: torch decides
    assert not cuda_surely_absent({"CUDA_VISIBLE_DEVICES": ""}, str(tmp_path))
