"""A Start's reason text, formatted only when it is read (pure Python).

A round of SJF-BSBF at 10,000 pending jobs starts about 900 jobs, and the text of each start
(GPU names, ``ξ``, ``T_con``, ``T_seq``) cost about a sixth of the round while the simulator
never reads it. The formatters here are made once per round (they hold only the cluster's GPUs,
which never change) and given to each :class:`~scheduling.core.types.Start` as its
:data:`~scheduling.core.types.Reason`; the Start calls one with itself the first time its
``reason`` is read. So a start allocates nothing for its reason, and the text is that of the
Start's own fields whenever it is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.shapes import gpu_list
from scheduling.core.types import GPU, Start


def gpus_text(gpus: Sequence[GPU], gpu_ids: Sequence[int]) -> str:
    """``"GPUs node-00:0,1"`` (``"GPU node-00:3"`` for one): ``gpu_ids`` (indices into ``gpus``,
    the cluster's GPUs) named as everywhere else (:func:`common.shapes.gpu_list`)."""
    where = gpu_list((gpus[g].node, gpus[g].index) for g in gpu_ids)
    return f"GPU{'s' if len(gpu_ids) > 1 else ''} {where}"


class ExclusiveReason:
    """``"exclusive on idle GPUs node-00:0,1"``: the reason of a start alone on idle GPUs, its
    ``gpu_ids`` named by the cluster's ``gpus``."""

    __slots__ = ("gpus",)

    def __init__(self, gpus: Sequence[GPU]) -> None:
        self.gpus = gpus

    def __call__(self, start: Start) -> str:
        return f"exclusive on idle {gpus_text(self.gpus, start.gpu_ids)}"


class BestBenefitReason:
    """The reason of an SJF-BSBF shared start: its sub-batch and accumulation steps, then per
    partner (:class:`~scheduling.core.types.Share`) the partner's GPUs it takes, both ``ξ`` and
    ``T_con < T_seq`` (s)."""

    __slots__ = ("gpus",)

    def __init__(self, gpus: Sequence[GPU]) -> None:
        self.gpus = gpus

    def __call__(self, start: Start) -> str:
        detail = "; ".join(
            f"job {s.partner_id} on {gpus_text(self.gpus, s.gpu_ids)}: "
            f"ξ {s.xi_self:.2f}/{s.xi_partner:.2f}, T_con {s.t_con_s:.0f} s < T_seq {s.t_seq_s:.0f} s"
            for s in start.shares
        )
        return (
            f"best sharing benefit first, sub-batch {start.sub_batch} "
            f"({start.accum_steps} accumulation steps): {detail}"
        )
