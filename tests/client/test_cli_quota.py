"""The ``sharewise`` command's view of GPU types, priorities and the tenant's quota standing
against a live service: ``submit --gpu-type/--priority``, both in ``list`` and ``show``,
``submit-many`` of a YAML list, and ``usage`` (over quota, borrowed, GPU-hours over windows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from cluster.models import Job, Node, Quota, Tenant
from tests.client.conftest import Result, Service
from tests.frontend.conftest import gpu, place

Run = Callable[..., Result]

FLAGS = "--name typed --model resnet50 --batch-size 64 --iterations 10 --gpus 1"


def test_submit_takes_gpu_types_and_priority_and_list_and_show_print_them(run: Run) -> None:
    Node.register("node-09", 1, 81_920, "a100")  # a second GPU type beside the V100s
    made = run("submit", *FLAGS.split(), "--gpu-type", "a100", "--gpu-type", "v100", "--priority", "7", "-q")
    assert made.code == 0, made.err
    job = Job.objects.get(pk=int(made.out))
    assert (job.gpu_types, job.priority) == (["a100", "v100"], 7)
    plain = int(run("submit", *FLAGS.replace("typed", "plain").split(), "-q").out)
    assert (Job.objects.get(pk=plain).gpu_types, Job.objects.get(pk=plain).priority) == ([], 0)
    lines = run("list").out.splitlines()
    assert lines[0].split()[:6] == ["ID", "NAME", "STATUS", "PRI", "GPUS", "TYPES"]
    rows = {line.split()[0]: line.split()[:6] for line in lines[1:]}
    assert rows[str(job.pk)] == [str(job.pk), "typed", "pending", "7", "1", "a100,v100"]
    assert rows[str(plain)] == [str(plain), "plain", "pending", "0", "1", "any"]
    shown = [line.split() for line in run("show", str(job.pk)).out.splitlines()]
    assert ["priority", "7"] in shown and ["gpu", "types", "a100,v100"] in shown
    assert json.loads(run("show", str(job.pk), "-o", "json").out)["gpu_types"] == ["a100", "v100"]


def test_a_gpu_type_the_cluster_lacks_is_refused_naming_its_types(run: Run) -> None:
    refused = run("submit", *FLAGS.split(), "--gpu-type", "h100")
    assert refused.code == 4 and "h100" in refused.err and "v100" in refused.err
    assert "Traceback" not in refused.err and not Job.objects.exists()


def test_submit_many_submits_a_yaml_list_once(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "".join(
            f"- {{name: sweep-{i}, model: resnet50, batch_size: 64, iterations: 10, gpus: 1}}\n"
            for i in range(3)
        )
    )
    first = run("submit-many", str(path), "--set", "priority=3", "--idempotency-prefix", "sweep-1", "-q")
    assert first.code == 0, first.err
    ids = [int(x) for x in first.out.split()]
    jobs = list(Job.objects.order_by("pk").values_list("pk", "name", "priority"))
    assert jobs == [(ids[i], f"sweep-{i}", 3) for i in range(3)]
    again = run(
        "submit-many", str(path), "--set", "priority=3", "--idempotency-prefix", "sweep-1", "-o", "json"
    )
    assert [j["id"] for j in json.loads(again.out)] == ids and Job.objects.count() == 3  # none twice
    one = tmp_path / "one.yaml"
    one.write_text("name: x\n")
    bad = run("submit-many", str(one))
    assert (bad.code, bad.err.strip()) == (
        2,
        f"sharewise: error: jobs file {one} must hold a list of jobs (- name: ...), got dict",
    )
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text("- {name: a}\n- just words\n")
    assert run("submit-many", str(mixed)).err.strip() == (
        f"sharewise: error: jobs file {mixed}: job 1 is a str, not a mapping of fields"
    )


def test_usage_prints_the_quota_standing_and_gpu_hours_over_windows(run: Run) -> None:
    alice = Tenant.objects.get(name="team-a")
    job = Job.objects.create(tenant=alice, name="big", model="resnet50", batch_size=64, iterations=10, gpus=2)
    since = timezone.now() - timedelta(minutes=45)
    Job.objects.filter(pk=job.pk).update(submitted_at=since)
    for index in (0, 1):
        place(job, gpu("node-00", index), since=since)
    # an admin lowers team-a's quota to 1 guaranteed GPU, no borrowing, below the 2 it holds
    Quota.objects.filter(tenant=alice).update(guaranteed_gpus=1, borrow_limit=0)
    result = run("usage")
    assert result.code == 0, result.err
    lines = [line.split() for line in result.out.splitlines() if line.strip()]
    assert " ".join(lines[0]) == "tenant team-a: OVER QUOTA (no new job of yours starts beyond the cap)"
    # holds 2 of cap 1 + 0: 0 borrowed (it may borrow none), 2 − 1 = 1 over
    assert lines[1] == ["QUOTA", "IN", "USE", "GUARANTEED", "BORROW", "LIMIT", "BORROWED", "OVER", "QUOTA"]
    assert lines[2] == ["total", "2", "1", "0", "0", "1"]
    assert lines[3] == ["type", "any", "2", "1", "0", "0", "1"]
    # 2 GPUs × 45 min = 1.50 GPU-hours in each window; quota 1 GPU × 2 h = 2.00 (75 %) and
    # × 24 h = 24.00 (1.5/24 = 6 %); running for 45 min, under half of either window, team-a is
    # not a demanding tenant there, so neither window has a Jain's index (docs/FAIRNESS.md §4)
    assert lines[4][:2] == ["WINDOW", "GPU-HOURS"]
    assert lines[5] == ["2h", "1.50", "2.00", "75%", "-"]
    assert lines[6] == ["24h", "1.50", "24.00", "6%", "-"]
    as_json = json.loads(run("usage", "--windows", "1h", "-o", "json").out)
    assert as_json["quota"]["over_quota"] is True and as_json["quota"]["total"]["gpus_over_quota"] == 1
    assert [(w["window_s"], round(w["gpu_hours"], 2)) for w in as_json["gpu_hours"]] == [(3600, 1.5)]
    # over the last hour it ran for 45 min, over half of it: the one demanding tenant, Jain's index 1
    assert [(f["window_s"], f["jain_index"]) for f in as_json["fairness"]] == [(3600, 1.0)]
    one_hour = [line.split() for line in run("usage", "--windows", "1h").out.splitlines() if line.strip()]
    assert one_hour[5] == ["1h", "1.50", "1.00", "150%", "1.000"]
    bad = run("usage", "--windows", "2x")
    assert (
        bad.code == 4
        and bad.err.startswith("sharewise: error: invalid input: windows")
        and "Traceback" not in bad.err
    )


def test_usage_of_a_tenant_within_quota(run: Run, service: Service) -> None:
    result = run("usage", token=service.charlie)
    lines = [line.split() for line in result.out.splitlines() if line.strip()]
    assert " ".join(lines[0]) == "tenant team-c: within quota"
    assert lines[2] == ["total", "0", "8", "unlimited", "0", "0"]
    assert lines[5][:4] == ["2h", "0.00", "16.00", "0%"]
