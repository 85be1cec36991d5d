"""The live demo: a trace replayed through the REST API on an emulated cluster, time-compressed,
then compared with the simulator on the same input (``manage.py demo``, ``scripts/demo.sh``).

Everything runs in one process on the embedded defaults (SQLite, no broker):

- the web service (Django's threaded WSGI server, static files included), so the dashboard is
  live at ``http://HOST:PORT/dashboard/`` while the demo runs (:mod:`demo.live`);
- the replay: each trace job is POSTed to ``/api/v1/jobs/`` with its tenant's API token when the
  compressed clock reaches its submit time (``iteration_time_s`` from the trace; :mod:`demo.live`),
  the jobs due together sent as one bulk submission per tenant, a 429 of the tenant's throttle
  retried after its ``Retry-After`` (:mod:`demo.submit`);
- one :func:`scheduling.service.tick` (heartbeat check, then a round) every
  ``round_interval_s / speedup`` wall seconds, aligned with the simulator's rounds at multiples
  of ``round_interval_s`` of trace time (:mod:`demo.live`);
- the emulated agent fleet (``agent.core.Agent`` with ``EmulatedExecutor``), fed by the
  in-process dispatcher, reporting events and heartbeats over the REST API on loopback
  (:mod:`demo.fleet`).

The workload (:mod:`demo.workload`) is a trace or a synthetic one; the database set-up
(:mod:`demo.database`) registers the cluster, the tenants and an admin. Time: trace time ``T``
(s) ↔ wall time ``t0 + (T − T_base) / speedup``; ``T_base`` is the last round boundary at or
before the first submission. The live run's metrics are read back from the database in trace
seconds and printed beside the simulator's result for the same jobs, cluster, policy, quotas and
round interval; the fidelity is the ratio of the average JCTs (live ÷ sim; :mod:`demo.report`).
:func:`demo.run.run_demo` puts it together.

Units: seconds (s), MB, GPUs, iterations.
"""
