"""What the service learned survives a restart: one process records the agents' measurements, a new
process reads them back (its caches empty) and schedules with them. Both run against a database
file of their own (``DATABASE_URL``), whatever database the rest of the suite uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEARN = """
import django, json
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.core import types as core
fleet = {n: Node.register(n, 4, 16_000, "v100") for n in ("node-00", "node-01")}
tenant = Tenant.create_with_owner("team-a", quota_gpus=8)[0]
a = Job.objects.create(tenant=tenant, name="a", model="resnet18", batch_size=128, iterations=1000, gpus=1,
                       iteration_time_s=0.5)
b = Job.objects.create(tenant=tenant, name="b", model="vgg19", batch_size=16, iterations=1000, gpus=1,
                       iteration_time_s=0.5)
service.set_dispatcher(lambda messages: None)
class Fixed:
    name, preemptive = "fixed", False
    def __init__(self, job, sub):
        self.start = core.Start(job.pk, (0,), sub, job.batch_size // sub)
    def decide(self, snapshot, profile, *, explain=True):
        return core.RoundDecisions("fixed", snapshot.now, (self.start,), (), ())
service.run_round(policy=Fixed(a, 128))
service.record_event(fleet["node-00"][0], a.pk, service.AgentEvent(1, "progress", 10, 0.8))  # alone
service.run_round(policy=Fixed(b, 16))
service.record_event(fleet["node-00"][0], b.pk, service.AgentEvent(1, "progress", 10, 0.75))  # beside a
print(json.dumps({"a": a.pk, "b": b.pk}))
"""

READ = """
import django, json, sys
django.setup()
from scheduling import service
from scheduling.core import types as core
ids = json.loads(sys.argv[1])
state = service.load_state()
a, b = state.jobs[ids["a"]], state.jobs[ids["b"]]
profile = service.learned_profile()
estimate = profile.slowdown_estimate(b, 16, a, 128)[0]
print(json.dumps({"iter_a": a.iter_time_s, "xi_b": [estimate.source, estimate.count]}))
"""


def python(code: str, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_observations_survive_a_restart(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'learned.sqlite3'}",
        "REDIS_URL": "",
        "CACHE_URL": "locmemcache://",
    }
    ids = python(LEARN, env)
    seen = json.loads(python(READ, env, ids))
    # a: its measured 0.8 s (alone) beats the declared 0.5 s; b's slowdown beside a: one sample
    assert seen == {"iter_a": 0.8, "xi_b": ["learned", 1]}
