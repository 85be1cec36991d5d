"""GPU discovery: NVML when it answers, declared GPUs otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent.gpus import GpuInfo, declared_gpus, discover_gpus, nvml_gpus


class FakeNvml:
    """The part of ``pynvml`` the agent uses; GPU ``broken`` fails like a fallen-off-the-bus device."""

    def __init__(self, totals_bytes: list[int], broken: int | None = None, init_error: bool = False) -> None:
        self.totals = totals_bytes
        self.broken = broken
        self.init_error = init_error
        self.shut_down = False

    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if self.init_error:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.totals)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        if index == self.broken:
            raise RuntimeError("GPU is lost")
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:  # noqa: N802
        return f"GPU-{handle:04d}".encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(total=self.totals[handle])


def test_nvml_gpus_in_mb_and_a_broken_one_is_unhealthy_not_hidden() -> None:
    # A V100-32GB reports 34,089,730,048 bytes = 32,510.5 MiB → 32,510 MB (whole MiB, rounded down).
    nvml = FakeNvml([34_089_730_048, 34_089_730_048], broken=1)
    assert nvml_gpus(nvml) == (GpuInfo(0, "GPU-0000", 32_510), GpuInfo(1, "unknown-1", 0, healthy=False))
    assert nvml.shut_down


def test_no_nvml_means_declared_gpus_or_a_clear_error() -> None:
    nvml = FakeNvml([], init_error=True)
    assert nvml_gpus(nvml) is None
    assert discover_gpus("n", 2, 16_000, nvml) == declared_gpus("n", 2, 16_000)
    with pytest.raises(ValueError, match="declare them with --gpus N"):
        discover_gpus("n", None, 16_000, nvml)


def test_declared_count_wins_over_nvml() -> None:
    gpus = discover_gpus("n", 1, 40_000, FakeNvml([34_089_730_048] * 8))
    assert gpus == (GpuInfo(0, "declared-n-0", 40_000),)


def test_declared_gpus_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one GPU"):
        declared_gpus("n", 0, 16_000)
    with pytest.raises(ValueError, match="positive number of MB"):
        declared_gpus("n", 1, 0)
