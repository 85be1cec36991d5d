"""Fault injection against a multi-process deployment on loopback (TESTING.md "Faults"): the short
campaign runs in CI (``test_fault_campaign.py``), the long one from ``python -m tests.faults.run``
(docs/HARDENING.md)."""
