"""Sharewise scheduling: the pure policy core, the trace-driven simulator and (with Django) the
service glue that runs rounds."""
