"""Node agents' tokens: finding the node of a token, and writing tokens to the agent's
``--token-file`` (JSON ``{node: token}``)."""

from __future__ import annotations

import json
from pathlib import Path

from cluster import plain_rows
from cluster.models import Node, hash_token
from common.files import write_atomic


def node_for_token(raw: str) -> Node | None:
    """The node whose agent token is ``raw`` (only its SHA-256 is stored), or ``None``."""
    # one plain statement (cluster.plain_rows): every agent request authenticates, and the ORM's
    # compilation of this read cost more than the database took to answer it
    node = plain_rows.get_by(Node, {"agent_token_hash": hash_token(raw)})
    return node if node is not None and node.check_agent_token(raw) else None


def write_token_file(path: str | Path, tokens: dict[str, str]) -> None:
    """Write node tokens as the agent's ``--token-file`` (JSON ``{node: token}``), readable by the
    owner only, atomically (:func:`common.files.write_atomic`). Raises ``OSError`` when the folder
    cannot be written or ``path`` cannot be replaced (e.g. it is a folder); no temporary file
    holding the tokens is left behind."""
    write_atomic(path, json.dumps(tokens, indent=1), private=True)
