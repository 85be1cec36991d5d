"""The shipped performance profile: ``default.json`` (derived by ``import_gavel``) and its loaders.

``load_default_profile()`` is what the simulator and the service use; ``load_profile(path)`` reads
another table written by ``python -m scheduling.profiles.import_gavel --out PATH``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from scheduling.core.profiles import ProfileError, TableProfile

DEFAULT_PROFILE_PATH = Path(__file__).resolve().parent / "default.json"


def load_profile(path: str | Path) -> TableProfile:
    """A :class:`TableProfile` from a JSON table at ``path``.

    Raises :class:`ProfileError` (a ``ValueError``) when the file is missing, unreadable, not JSON
    or not a ``sharewise-profile/1`` table.
    """
    path = Path(path)
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"profile file not found: {path}") from None
    except OSError as exc:
        raise ProfileError(f"cannot read profile {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path} is not valid JSON: {exc}") from None
    return TableProfile(table)


@lru_cache(maxsize=1)
def load_default_profile() -> TableProfile:
    """The shipped V100 profile (``scheduling/profiles/default.json``), loaded once and cached.

    The instance is shared: its memo tables fill up across callers, which is the point.
    """
    return load_profile(DEFAULT_PROFILE_PATH)


__all__ = ["DEFAULT_PROFILE_PATH", "ProfileError", "TableProfile", "load_default_profile", "load_profile"]
