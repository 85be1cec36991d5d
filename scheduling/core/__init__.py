"""Pure-Python scheduling core (never imports Django). ``scheduling.core.types`` is the contract.

- ``types``: snapshots, jobs, decisions; ``profiles``, ``profile_cache``: the performance model
  and its per-round memo; ``sharing``: the pairwise rule of SJF-BSBF;
- one round: ``round_state`` (who holds which GPU, gang selection), ``placement`` (fit checks,
  exclusive starts), ``rounds`` (the skeletons the policies share), ``backfill`` (a
  reservation's shadow time); ``policies``: the registered policies;
- tenants: ``quota`` (the quota gate), ``reclaim`` (lent GPUs back by preemption), ``priority``
  (priority within a tenant), ``charge`` (the normalised split), ``usage`` (GPU-hours over
  windows), ``fairness``;
- ``skip``: when a simulator may skip a policy's rounds; ``metrics``: JCT, utilisation, Jain.
"""
