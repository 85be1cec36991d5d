"""Where the client finds the service and its token: flags, then the environment, then the file
``sharewise login`` wrote.

=====================  ==========================  =========================================
setting                environment                 config file key
=====================  ==========================  =========================================
API base URL           ``SHAREWISE_API``           ``api``
tenant API token       ``SHAREWISE_TOKEN``         ``token``
=====================  ==========================  =========================================

The file is JSON, ``$SHAREWISE_CONFIG`` or ``$XDG_CONFIG_HOME/sharewise/config.json``
(``~/.config/sharewise/config.json``), readable by its owner only (mode 0600): it holds a credential.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sharewise.errors import UsageError


@dataclass(frozen=True, slots=True)
class Settings:
    """The service's base URL (``http(s)://host:port``, no trailing slash) and the tenant token."""

    api: str
    token: str


def config_path() -> Path:
    """The config file's path (see the module docstring); it may not exist."""
    explicit = os.environ.get("SHAREWISE_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "sharewise" / "config.json"


def read_config(path: Path | None = None) -> dict[str, str]:
    """The config file's ``{"api", "token"}`` (empty when there is no file). Raises
    :class:`UsageError` for a file that cannot be read, is not UTF-8 or is not a JSON object of
    strings."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"config file {path} is not UTF-8 text; run 'sharewise login' again") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); run 'sharewise login' again") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise UsageError(f"{path} must hold a JSON object of strings; run 'sharewise login' again")
    return data


def write_config(api: str, token: str, path: Path | None = None) -> Path:
    """Write ``{"api", "token"}`` to the config file, mode 0600 from the first byte (a temporary
    file in the same folder, renamed over the old one). Returns the path. Raises
    :class:`UsageError` when the folder cannot be written."""
    path = path or config_path()
    body = json.dumps({"api": api, "token": token}, indent=1) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".config-", dir=path.parent)  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    return path


#: The path of the REST API under the service's base URL (the client adds it to every call).
API_PREFIX = "/api/v1"


def normalise_api(url: str) -> str:
    """``url`` without trailing slashes and without a trailing :data:`API_PREFIX` (a URL copied
    from the API's own pages, ``http://host:8000/api/v1/``: the client adds the prefix itself, and
    with it twice every call was the service's 404, read as "no such job"); raises
    :class:`UsageError` unless it is http(s) and names a host."""
    given = url.strip()
    url = given.rstrip("/")
    if url.endswith(API_PREFIX):
        url = url[: -len(API_PREFIX)].rstrip("/")
    if not given.startswith(("http://", "https://")):
        raise UsageError(f"the API URL must start with http:// or https://, got {url!r}")
    try:
        host = urlsplit(url).hostname
    except ValueError as exc:  # an unclosed [IPv6 address
        raise UsageError(f"the API URL {given!r} is not a URL ({exc})") from None
    if not host:
        raise UsageError(f"the API URL {given!r} has no host: give it like http://host:8000")
    return url


def check_token(token: str) -> str:
    """``token`` when it can be an API token (printable ASCII: it travels in an HTTP header, which
    requests writes in latin-1 and the service's tokens never leave ASCII); raises
    :class:`UsageError` otherwise, without repeating the token (a credential)."""
    if not (token.isascii() and token.isprintable()):
        raise UsageError(
            "the API token holds a character that is not printable ASCII"
            " (tokens are ASCII letters and digits): check what was pasted"
        )
    return token


def resolve(api: str | None = None, token: str | None = None) -> Settings:
    """The settings to use: each of ``api`` and ``token`` from the argument, else the environment,
    else the config file. Raises :class:`UsageError` naming what is missing."""
    stored: dict[str, str] | None = None

    def pick(given: str | None, variable: str, key: str) -> str:
        nonlocal stored
        if given:
            return given
        if os.environ.get(variable):
            return os.environ[variable]
        if stored is None:
            stored = read_config()
        return stored.get(key, "")

    url = pick(api, "SHAREWISE_API", "api")
    key = pick(token, "SHAREWISE_TOKEN", "token")
    if not url or not key:
        missing = " and ".join(w for w, v in (("the API URL", url), ("a token", key)) if not v)
        raise UsageError(
            f"missing {missing}: run 'sharewise login', or set SHAREWISE_API and SHAREWISE_TOKEN "
            "(or pass --api and --token)"
        )
    return Settings(normalise_api(url), key.strip())
