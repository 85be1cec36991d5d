"""GPUs of a node: discovered with NVML (``nvidia-ml-py``) when present, else declared.

NVML is the NVIDIA Management Library; ``nvidia-ml-py`` is NVIDIA's own Python binding (module
``pynvml``). Its import is guarded: the agent runs (emulated, or on declared GPUs) where neither
the binding nor the driver is installed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as the agent reports it in heartbeats.

    ``index``: the GPU's index on its node (NVML order, 0 … n−1); ``uuid``: NVML's UUID, or
    ``"declared-<node>-<index>"`` for a declared GPU; ``memory_mb``: total memory in MB as
    nvidia-smi counts them (MiB, 2^20 bytes: 49,140 for the paper's 48 GB GPUs);
    ``healthy``: NVML answered for this device (declared GPUs are healthy).
    """

    index: int
    uuid: str
    memory_mb: int
    healthy: bool = True

    def to_payload(self) -> dict[str, Any]:
        """The heartbeat's JSON object for this GPU (see docs/AGENT.md)."""
        return {"index": self.index, "uuid": self.uuid, "memory_mb": self.memory_mb, "healthy": self.healthy}


def declared_gpus(node: str, count: int, memory_mb: int) -> tuple[GpuInfo, ...]:
    """``count`` identical healthy GPUs of ``memory_mb`` MB, indices 0 … count−1.

    Raises ``ValueError`` when ``count`` < 1 or ``memory_mb`` < 1.
    """
    if count < 1:
        raise ValueError(f"a node needs at least one GPU, got {count}")
    if memory_mb < 1:
        raise ValueError(f"GPU memory must be a positive number of MB, got {memory_mb}")
    return tuple(GpuInfo(i, f"declared-{node}-{i}", memory_mb) for i in range(count))


def nvml_gpus(nvml: Any | None = None) -> tuple[GpuInfo, ...] | None:
    """The GPUs NVML sees, or ``None`` when NVML is unavailable (no binding, no driver, no GPU).

    ``nvml`` is the ``pynvml`` module (injectable for tests). A device whose handle or memory
    cannot be read is reported unhealthy with 0 MB rather than hidden, so the server sees it
    fail instead of vanish.
    """
    if nvml is None:
        try:
            import pynvml  # optional dependency, guarded on purpose
        except ImportError:
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses; any failure means "no NVML"
        log.info("NVML unavailable (%s); using declared GPUs", exc)
        return None
    try:
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = nvml.nvmlDeviceGetUUID(handle)
                memory_mb = int(nvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024))
                uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
                found.append(GpuInfo(index, uuid, memory_mb))
            except Exception as exc:  # one broken device must not hide the others
                log.warning("GPU %d does not answer NVML (%s); reporting it unhealthy", index, exc)
                found.append(GpuInfo(index, f"unknown-{index}", 0, healthy=False))
        return tuple(found) or None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting NVML down is best effort
            pass


def discover_gpus(
    node: str, declared: int | None, memory_mb: int, nvml: Any | None = None
) -> tuple[GpuInfo, ...]:
    """The node's GPUs: NVML's when it answers and nothing is declared, else ``declared`` ones.

    An explicit ``declared`` count wins over NVML (emulated nodes on a machine with real GPUs).
    Raises ``ValueError`` when NVML finds nothing and no count is declared, or for bad counts.
    """
    if declared is None:
        found = nvml_gpus(nvml)
        if found is not None:
            return found
        raise ValueError("no GPU found with NVML; declare them with --gpus N --gpu-memory-mb M")
    return declared_gpus(node, declared, memory_mb)
