"""What the dashboard reads from the scheduling service: the policy in use, the cluster-wide
scheduler settings, the per-tenant quota sums, each tenant's standing against its quota now
(``quota_use``), its GPU-hours over windows (``usage_windows``, ``DEFAULT_WINDOWS_S``) and the
charge of each placement (``charged_segments``, the normalised split; ``window_charge``, the same
with what can no longer change cached; its cutoff's step and margin, ``CLOSED_GRID_S`` and
``CLOSED_MARGIN_S``, which the timeline's kept rows share).

All of them only read (settings and rows already written); the dashboard imports them from here
and nowhere else, so it depends on the service in one place.
"""

from scheduling.service import (
    CLOSED_GRID_S,
    CLOSED_MARGIN_S,
    DEFAULT_WINDOWS_S,
    charged_segments,
    policy_named,
    quota_rows,
    quota_use,
    scheduler_config,
    summed_quotas,
    usage_windows,
    window_charge,
)

__all__ = [
    "CLOSED_GRID_S",
    "CLOSED_MARGIN_S",
    "DEFAULT_WINDOWS_S",
    "charged_segments",
    "policy_named",
    "quota_rows",
    "quota_use",
    "scheduler_config",
    "summed_quotas",
    "usage_windows",
    "window_charge",
]
