"""Scheduling policies by their standard names, and the registry that finds them.

Every policy is an object with ``name``, ``preemptive`` and ``decide(snapshot, profile, *,
explain=True) -> RoundDecisions`` (:class:`scheduling.core.types.Policy`); pure, deterministic,
ties broken by ``(submit_time, id)``.
"""

from __future__ import annotations

from scheduling.core.policies.fifo import FifoPolicy
from scheduling.core.policies.sjf import SjfPolicy, SrtfPolicy
from scheduling.core.policies.sjf_bsbf import SjfBsbfPolicy
from scheduling.core.policies.sjf_bsbf_fair import SjfBsbfFairPolicy
from scheduling.core.policies.sjf_ffs import SjfFfsPolicy
from scheduling.core.policies.tiresias import TiresiasPolicy
from scheduling.core.types import Policy

_POLICIES: dict[str, type] = {
    cls.name: cls
    for cls in (
        FifoPolicy,
        SjfPolicy,
        SrtfPolicy,
        TiresiasPolicy,
        SjfFfsPolicy,
        SjfBsbfPolicy,
        SjfBsbfFairPolicy,
    )
}

POLICY_NAMES: tuple[str, ...] = tuple(_POLICIES)
"""The registered names: ``fifo``, ``sjf``, ``srtf``, ``tiresias``, ``sjf-ffs``, ``sjf-bsbf``,
``sjf-bsbf-fair`` (ours: quotas, aging, starvation bound; docs/FAIRNESS.md)."""


class UnknownPolicyError(ValueError):
    """A policy name that is not registered; the message lists the valid names."""


def get_policy(name: str) -> Policy:
    """A fresh policy object for ``name`` (one of :data:`POLICY_NAMES`).

    Raises :class:`UnknownPolicyError` (a ``ValueError``) for any other name.
    """
    try:
        return _POLICIES[name]()
    except (KeyError, TypeError):
        raise UnknownPolicyError(
            f"unknown policy {name!r}; valid policies: {', '.join(POLICY_NAMES)}"
        ) from None


__all__ = ["POLICY_NAMES", "UnknownPolicyError", "get_policy"]
