"""Admin management commands: create_tenant, add_node, load_cluster (clear errors, nothing half-written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from cluster.models import GPU, MAX_SHAPE_NODES, Membership, Node, Quota, Tenant
from common.shapes import parse_shape

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().strip()


def test_create_tenant_prints_a_working_token(db: None) -> None:
    token = run("create_tenant", "team-x", "--quota-gpus", "6", "--borrow-limit", "2")
    tenant = Tenant.objects.get(name="team-x")
    assert list(Quota.objects.filter(tenant=tenant).values_list("guaranteed_gpus", "borrow_limit")) == [
        (6, 2)
    ]
    member = Membership.objects.get(tenant=tenant)
    assert (member.user.username, member.role) == ("team-x-owner", "owner")
    response = APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/v1/tenant/")
    assert response.status_code == 200 and response.json()["name"] == "team-x"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["team-a", "--quota-gpus", "1"], "a tenant named 'team-a' already exists"),
        (["team-z", "--quota-gpus", "1", "--username", "alice"], "a user named 'alice' already exists"),
        (["Team Z", "--quota-gpus", "1"], "bad tenant name 'Team Z'"),
        (["team-z", "--quota-gpus", "-1"], "quota must be 0 to 1,000,000 GPUs, got -1"),
        # Beyond any database integer (2^64 ≈ 1.8e19 < 1e20): a bound, not an OverflowError.
        (
            ["team-z", "--quota-gpus", "99999999999999999999"],
            "quota must be 0 to 1,000,000 GPUs, got 99999999999999999999",
        ),
        (["team-z", "--quota-gpus", "1000001"], "quota must be 0 to 1,000,000 GPUs, got 1000001"),
        (
            ["team-z", "--quota-gpus", "1", "--borrow-limit", "99999999999999999999"],
            "borrowing limit must be 0 to 1,000,000 GPUs",
        ),
        (["team-z", "--quota-gpus", "1", "--borrow-limit", "-2"], "borrowing limit must be 0 to"),
    ],
)
def test_create_tenant_errors(alice: object, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("create_tenant", *args)
    assert not Tenant.objects.filter(name__in=["team-z", "Team Z"]).exists()
    assert not User.objects.filter(username__in=["team-z-owner", "Team Z-owner"]).exists()


def test_add_node_prints_its_agent_token(db: None) -> None:
    token = run("add_node", "gpu-box", "--gpus", "8", "--gpu-memory-mb", "49140", "--gpu-type", "v100")
    node = Node.objects.get(name="gpu-box")
    assert node.check_agent_token(token)
    assert node.gpus.count() == 8 and set(node.gpus.values_list("memory_mb", flat=True)) == {49_140}
    with pytest.raises(CommandError, match="a node named 'gpu-box' already exists"):
        run("add_node", "gpu-box")
    assert GPU.objects.count() == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add_node", "box", "--gpus", "99999999999999999999"], "a node has 1 to 64 GPUs"),
        (["add_node", "box", "--gpu-memory-mb", "99999999999999999999"], "GPU memory must be 1 to 1048576"),
        (["load_cluster", "1x2", "--gpu-memory-mb", "99999999999999999999"], "GPU memory must be 1 to"),
        (["load_cluster", "1x2", "--gpu-memory-mb", "0"], "GPU memory must be 1 to"),
    ],
)
def test_node_commands_bound_their_numbers(db: None, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not Node.objects.exists() and not GPU.objects.exists()


def test_load_cluster_names_nodes_like_the_simulator(db: None) -> None:
    run("load_cluster", "3x2", "--gpu-type", "a100", "--gpu-memory-mb", "40000")
    # Same names as scheduling.core.types.Cluster.uniform(3, 2): node-00, node-01, node-02.
    assert list(Node.objects.values_list("name", flat=True)) == ["node-00", "node-01", "node-02"]
    assert GPU.objects.filter(gpu_type="a100", memory_mb=40_000).count() == 6  # 3 x 2
    with pytest.raises(CommandError, match=r"another number of GPUs than 4: node-00 \(2\), node-01 \(2\)"):
        run("load_cluster", "2x4")
    assert Node.objects.count() == 3
    # the same count of GPUs of another type or memory: left as they are, and said so (before: silent)
    err = StringIO()
    call_command("load_cluster", "2x2", "--gpu-type", "v100", stdout=StringIO(), stderr=err)
    assert err.getvalue().strip() == (
        "node-00, node-01 already have GPUs of another type or memory than v100 with 49140 MB: left as "
        "they are (remove them first to register them again)."
    )
    assert GPU.objects.filter(gpu_type="a100", memory_mb=40_000).count() == 6


def test_load_cluster_again_adds_only_what_is_missing(db: None, tmp_path: Path) -> None:
    path = tmp_path / "node-tokens.json"
    first = run("load_cluster", "2x4", "--token-file", str(path))
    assert first.splitlines()[0] == "Registered 2 nodes x 4 GPUs = 8 v100 GPUs (node-00, node-01)."
    tokens = json.loads(path.read_text())
    again = run("load_cluster", "2x4", "--token-file", str(path))
    assert again.splitlines() == [
        "Already registered, left as they are: node-00, node-01.",
        f"Agent tokens of 2 nodes are in {path}.",
    ]
    assert json.loads(path.read_text()) == tokens  # the working tokens are kept
    grown = run("load_cluster", "3x4", "--token-file", str(path))
    assert grown.splitlines()[:2] == [
        "Registered 1 node x 4 GPUs = 4 v100 GPUs (node-02).",
        "Already registered, left as they are: node-00, node-01.",
    ]
    assert sorted(json.loads(path.read_text())) == ["node-00", "node-01", "node-02"]
    assert Node.objects.count() == 3 and GPU.objects.count() == 12


def test_load_cluster_says_which_tokens_it_cannot_show_and_issues_new_ones(db: None, tmp_path: Path) -> None:
    lost = StringIO()
    call_command("load_cluster", "2x4", stdout=StringIO(), stderr=lost)  # no token file: the tokens are lost
    # before, nothing said so
    assert lost.getvalue().strip() == (
        "The agent tokens of node-00, node-01 were not written anywhere (no --token-file) and cannot be "
        "shown again (only their hash is kept): run again with --token-file FILE --new-tokens to issue "
        "new ones."
    )
    path = tmp_path / "node-tokens.json"
    err = StringIO()
    call_command("load_cluster", "2x4", "--token-file", str(path), stdout=StringIO(), stderr=err)
    assert "The tokens of node-00, node-01 are not in" in err.getvalue() and "--new-tokens" in err.getvalue()
    assert json.loads(path.read_text()) == {}
    run("load_cluster", "2x4", "--token-file", str(path), "--new-tokens")
    tokens = json.loads(path.read_text())
    assert all(Node.objects.get(name=n).check_agent_token(t) for n, t in tokens.items()) and len(tokens) == 2
    with pytest.raises(CommandError, match="--new-tokens needs --token-file"):
        run("load_cluster", "2x4", "--new-tokens")


@pytest.mark.parametrize("shape", ["4y8", "0x8", "4x0", "4x65", "x8", "4x", "", "4x8x2", "-1x8", "10000x1"])
def test_bad_shapes(shape: str) -> None:
    """The shapes load_cluster refuses (the live cluster's bounds: at most 9,999 nodes)."""
    with pytest.raises(
        ValueError, match="NODESxGPUS|at least one node and one GPU|at most 64 GPUs|at most 9,999"
    ):
        parse_shape(shape, max_nodes=MAX_SHAPE_NODES)


def test_parse_shape() -> None:
    assert parse_shape("4x8", max_nodes=MAX_SHAPE_NODES) == (4, 8)
    assert parse_shape(" 16X4 ", max_nodes=MAX_SHAPE_NODES) == (16, 4)


def test_cli_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    """Run as an admin would: the error is a message and a non-zero exit, not a traceback."""
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "manage.py", "load_cluster", "lots"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    expected = "cluster shape must look like NODESxGPUS, e.g. 4x8; got 'lots'"
    assert result.stderr.strip() == f"CommandError: {expected}"


def test_load_cluster_writes_working_tokens_to_a_private_file(db: None, tmp_path: Path) -> None:
    path = tmp_path / "tokens" / "node-tokens.json"
    run("load_cluster", "2x4", "--token-file", str(path))
    tokens = json.loads(path.read_text())
    assert sorted(tokens) == ["node-00", "node-01"]
    for name, token in tokens.items():
        assert Node.objects.get(name=name).check_agent_token(token)
    assert path.stat().st_mode & 0o777 == 0o600  # owner only: it holds credentials


def test_load_cluster_token_file_failure_leaves_no_tokens_behind(
    db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder at PATH: the rename fails. A full disk: the write fails. Either way a clear error,
    no temporary file holding node tokens, and no node registered (one transaction)."""
    folder = tmp_path / "tokens"
    folder.mkdir()
    with pytest.raises(CommandError, match=f"cannot write --token-file {folder}: Is a directory"):
        run("load_cluster", "1x2", "--token-file", str(folder))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens"] and not Node.objects.exists()

    def disk_full(fd: int, *args: object, **kwargs: object) -> None:
        os.close(fd)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("common.files.os.fdopen", disk_full)
    path = tmp_path / "node-tokens.json"
    with pytest.raises(CommandError, match="No space left on device"):
        run("load_cluster", "1x2", "--token-file", str(path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens"] and not Node.objects.exists()
