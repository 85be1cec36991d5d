"""What the dashboard shows, read from the database and scoped to the viewer: one module per
JSON endpoint.

Each ``*_payload`` function returns the JSON body of one dashboard endpoint::

    {"scope": "cluster" | "tenant team-a", "generated_at": ISO time (UTC),
     "empty": None | "why there is nothing to show",
     "summary": "one line of text",
     "figures": {name: Plotly figure spec (scheduling.figures)},
     "tables": {name: {"columns": [str, …], "rows": [[cell, …], …], "note": str}}}

Every figure has a table with the same numbers (the text alternative). A tenant's member sees
the tenant's own jobs by name; another tenant's job appears only as "another tenant's job" (on
the cluster map and a shared GPU's timeline) or not at all. A cluster admin (``is_staff``) sees
every job. Times are seconds unless a name says otherwise; GPU counts are GPUs.

Modules: :mod:`~frontend.payloads.common` (the viewer, the body and its tables, job labels),
:mod:`~frontend.payloads.rounds` (recorded rounds, parsed once), one module per endpoint
(:mod:`~frontend.payloads.cluster_map`, :mod:`~frontend.payloads.timeline`,
:mod:`~frontend.payloads.decisions`, :mod:`~frontend.payloads.fairness`,
:mod:`~frontend.payloads.quota_windows`, :mod:`~frontend.payloads.queue`),
:mod:`~frontend.payloads.bins` (per-tenant series over time bins) and
:mod:`~frontend.payloads.service` (what the dashboard reads from the scheduling service).
Every function here only reads the database.
"""
