"""Sharewise client: the ``sharewise`` command and the Python API it is built on.

``Client`` talks to one Sharewise service as one tenant (``sharewise.api``); errors are
``SharewiseError`` subclasses carrying the command's exit code (``sharewise.errors``). No Django,
no part of the service: ``pip install ./client`` on a laptop is enough.
"""

__version__ = "0.1.0"

from sharewise.api import Client  # noqa: E402 - the version first: api.py sends it as User-Agent
from sharewise.errors import (  # noqa: E402
    ApiError,
    AuthError,
    JobEnded,
    NotFound,
    Rejected,
    ServiceError,
    SharewiseError,
    Throttled,
    UsageError,
)

__all__ = [
    "ApiError",
    "AuthError",
    "Client",
    "JobEnded",
    "NotFound",
    "Rejected",
    "ServiceError",
    "SharewiseError",
    "Throttled",
    "UsageError",
    "__version__",
]
