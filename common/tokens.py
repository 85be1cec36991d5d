"""Bearer tokens: made at random, kept only as their SHA-256.

A token is 32 random bytes (``secrets.token_urlsafe``, 43 characters), so an unsalted fast hash is
enough: nobody can search a 256-bit space, and a stolen digest cannot be sent as the token. Node
agents' tokens and tenants' API tokens use the same two functions.
"""

from __future__ import annotations

import hashlib
import secrets

#: Random bytes in a new token.
TOKEN_BYTES = 32


def new_token() -> str:
    """A fresh random token (URL-safe text, 43 characters)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(raw: str) -> str:
    """SHA-256 hex digest of a token (64 characters); only the digest is stored. Text that is not
    valid Unicode (a lone surrogate) hashes as its escaped form, so it simply matches nothing."""
    return hashlib.sha256(raw.encode("utf-8", "backslashreplace")).hexdigest()
