"""What the dashboard reads from the scheduling service: the policy in use, the cluster-wide
scheduler settings, the per-tenant quota sums, each tenant's standing against its quota now
(``quota_use``), its GPU-hours over windows (``usage_windows``, ``DEFAULT_WINDOWS_S``) and the
charge of each placement (``charged_segments``, the normalised split; ``window_charge``, the same
with what can no longer change cached).

All of them only read (settings and rows already written); the dashboard imports them from here
and nowhere else, so it depends on the service in one place.
"""

from scheduling.service import (
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
