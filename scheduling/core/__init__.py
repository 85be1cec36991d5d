"""Pure-Python scheduling core (never imports Django): types, profiles, policies, placement,
metrics. See ``scheduling.core.types`` for the contract."""
