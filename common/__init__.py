"""Small pure helpers every part of Sharewise shares (core, simulator, service, agent).

No Django, no import of any other Sharewise package: the node agent, the pure core and the
service all import from here, so one fact lives in one place (cluster shapes and node names in
:mod:`common.shapes`, atomic file writes in :mod:`common.files`).
"""
