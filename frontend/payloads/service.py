"""What the dashboard reads from the scheduling service: the policy in use, the cluster-wide
scheduler settings and the per-tenant quota sums.

All three only read (settings and ``Quota`` rows already fetched); the dashboard imports them
from here and nowhere else, so it depends on the service in one place.
"""

from scheduling.service import policy_named, scheduler_config, summed_quotas

__all__ = ["policy_named", "scheduler_config", "summed_quotas"]
