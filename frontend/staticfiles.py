"""Serve Plotly.js from the pinned ``plotly`` Python package as our own static file.

The package ships ``plotly.min.js`` (about 4.6 MB); rather than committing a copy, this finder
exposes it as ``frontend/vendor/plotly.min.js``, so ``collectstatic`` copies it into
``STATIC_ROOT`` (served by WhiteNoise) and the development server and test live server serve it
straight from the package. No page ever loads a script from a CDN. Enable it with
``STATICFILES_FINDERS`` (see ``config/settings.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_PATH = "frontend/vendor/plotly.min.js"


def plotly_js_dir() -> Path:
    """The folder of the installed ``plotly`` package's ``plotly.min.js``."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    """Finds ``frontend/vendor/plotly.min.js`` in the installed ``plotly`` package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(plotly_js_dir()))
        # collectstatic copies files under their storage prefix
        self.storage.prefix = "frontend/vendor"

    def check(self, **kwargs: Any) -> list[Any]:
        from django.core.checks import Error

        if not (plotly_js_dir() / "plotly.min.js").is_file():
            return [
                Error(
                    "plotly.min.js not found in the plotly package",
                    id="frontend.E001",
                    hint="pip install -r requirements.txt",
                )
            ]
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        if path != PLOTLY_PATH:
            return [] if find_all else None  # type: ignore[return-value]
        found = str(plotly_js_dir() / "plotly.min.js")
        return [found] if find_all else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield "plotly.min.js", self.storage
