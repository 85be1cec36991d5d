"""Whether the cluster can run a job without a command (docs/API.md, "Runnable jobs").

Each node's agent declares its executor in its heartbeats (docs/AGENT.md §3): ``emulated`` (jobs
advance from their profile; a command is ignored) or ``subprocess`` (the job's command runs as a
process; a job without one fails the moment it is placed). The service keeps the latest
declaration on the node (:attr:`cluster.models.Node.executor`) and refuses, at submission, a job
without a command when at least one node has declared and none of them emulates: nothing could run
it. Until some agent has sent a heartbeat (nodes registered, no agent started yet) nothing is
known and the job is accepted; a cluster mixing both kinds accepts it too (an emulating node can
run it).

A job accepted while nothing was known is not failed when the agents then declare they run
processes: while some node that takes jobs has declared ``subprocess`` and none ``emulated``, a
round leaves the pending jobs without a command out of its snapshot (:func:`held_without_command`),
and they wait with :data:`HELD_WITHOUT_COMMAND` as their reason until a node that emulates takes
jobs, or their owner cancels them (a node whose agent has not declared yet does not release
them). Before, the round placed such a job on one
of those nodes, whose agent failed it at once ("the placement has no command").
"""

from __future__ import annotations

from collections.abc import Iterable

from cluster.models import Node

#: Executors an agent may declare.
EXECUTORS = (Node.Executor.EMULATED.value, Node.Executor.SUBPROCESS.value)

#: Why a pending job without a command waits while every node taking jobs runs processes.
HELD_WITHOUT_COMMAND = (
    "no command: every node taking jobs runs each job's command as a process (none emulates), so "
    "it waits for a node whose agent emulates jobs; cancel it and submit it again with a command"
)


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


def held_without_command(executors: Iterable[str]) -> bool:
    """Whether a round holds back the pending jobs without a command, given ``executors``: what
    each node that takes jobs now declared (``""``: not yet). True when one of them runs
    processes and none emulates (see the module docstring). A node that has not declared yet
    does not release them: the round places by GPU, not by node, so such a job would as likely
    land on the node that runs processes, whose agent fails it at once."""
    declared = set(executors)
    return Node.Executor.SUBPROCESS.value in declared and Node.Executor.EMULATED.value not in declared
