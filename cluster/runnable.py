"""Whether the cluster can run a job without a command (docs/API.md, "Runnable jobs").

Each node's agent declares its executor in its heartbeats (docs/AGENT.md §3): ``emulated`` (jobs
advance from their profile; a command is ignored) or ``subprocess`` (the job's command runs as a
process; a job without one fails the moment it is placed). The service keeps the latest
declaration on the node (:attr:`cluster.models.Node.executor`) and refuses, at submission, a job
without a command when at least one node has declared and none of them emulates: nothing could run
it. Until some agent has sent a heartbeat (nodes registered, no agent started yet) nothing is
known and the job is accepted; a cluster mixing both kinds accepts it too (an emulating node can
run it).
"""

from __future__ import annotations

from cluster.models import Node

#: Executors an agent may declare.
EXECUTORS = (Node.Executor.EMULATED.value, Node.Executor.SUBPROCESS.value)


def record_executor(node: Node, executor: str | None) -> None:
    """Remember the executor ``node``'s agent declared (nothing when it declared none)."""
    if executor and node.executor != executor:
        Node.objects.filter(pk=node.pk).update(executor=executor)
        node.executor = executor
        from cluster.cluster_facts import forget  # late: cluster_facts imports this module

        forget()  # whether a job needs a command may have changed


def missing_command_refusal() -> str | None:
    """Why a job without a command cannot be accepted now, or ``None`` when it can (see the module
    docstring)."""
    declared = set(Node.objects.exclude(executor="").values_list("executor", flat=True).distinct())
    if not declared or Node.Executor.EMULATED in declared:
        return None
    return (
        "required on this cluster: its node agents run each job's command as a process (none "
        "emulates jobs), so a job without one could never run; give the command that trains, "
        "e.g. 'python train.py'"
    )
