"""Sharewise node agent: runs the placements that scheduling rounds send to one GPU node.

The agent never imports Django. It consumes its node's Celery queue ``node.<NAME>`` (task
``sharewise.apply_placement``), applies each placement idempotently (stale generations are
ignored), runs the job with an executor (emulated from the profile, or a real subprocess with
``CUDA_VISIBLE_DEVICES``), and reports ``started`` / ``progress`` / ``finished`` / ``failed`` /
``stopped`` events and heartbeats to the REST API with its node token. The contract with the
server is written down in ``docs/AGENT.md``.

Run it with ``python -m agent --node NAME --api URL --token=T [--emulate] [--speedup X]``.
"""

__version__ = "0.1.0"
