"""TESTING.md invariants checked on the database after a round (shared by service and integration tests)."""

from __future__ import annotations

from collections import defaultdict

from cluster.models import Job, Placement
from scheduling import service
from scheduling.profiles import load_default_profile


def assert_invariants() -> None:
    """Assert, on the rows as they are now:

    1. capacity: a GPU holds at most two active placements, in distinct slots 0/1, and the memory
       of its jobs at their sub-batches (the profile's ``mem_j(b)``) fits its memory;
    2. gang: a running job holds exactly ``gpus`` active placements, one sub-batch; 3. on distinct
       GPUs; 5. release: a job that is not running holds none; 9. every job is in a known status.
    """
    profile = load_default_profile()
    state = service.load_state()
    by_gpu: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    by_job: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for job_id, gpu_id, slot, sub in Placement.objects.filter(active=True).values_list(
        "job_id", "gpu_id", "slot", "sub_batch"
    ):
        by_gpu[gpu_id].append((job_id, slot, sub))
        by_job[job_id].append((gpu_id, sub))
    for gpu_id, rows in by_gpu.items():
        assert len(rows) <= 2, f"GPU {gpu_id} holds {len(rows)} jobs"
        assert len({slot for _, slot, _ in rows}) == len(rows), f"GPU {gpu_id}: two jobs in one slot"
        gpu = state.snapshot.cluster.gpus[state.gpu_ids[gpu_id]]
        used = sum(profile.memory_mb(state.jobs[job], sub) for job, _, sub in rows if job in state.jobs)
        assert used <= gpu.memory_mb, f"GPU {gpu_id}: {used:.0f} MB of jobs on {gpu.memory_mb} MB"
    statuses = dict(Job.objects.values_list("pk", "status"))
    gpus = dict(Job.objects.values_list("pk", "gpus"))
    for job_id, status in statuses.items():
        assert status in Job.Status.values, f"job {job_id}: unknown status {status!r}"
        held = by_job.get(job_id, [])
        if status == Job.Status.RUNNING:
            assert len(held) == gpus[job_id], f"job {job_id} holds {len(held)} of its {gpus[job_id]} GPUs"
            assert len({g for g, _ in held}) == len(held), f"job {job_id} holds a GPU twice"
            assert len({s for _, s in held}) == 1, f"job {job_id} runs with two sub-batches"
        else:
            assert not held, f"job {job_id} is {status} but holds {len(held)} GPUs"
