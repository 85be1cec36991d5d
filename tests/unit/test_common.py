"""``common/``: the one cluster-shape parser, node naming and atomic write every part uses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from common.files import write_atomic
from common.shapes import ShapeError, ShapeTooLargeError, check_shape, node_names, parse_shape
from scheduling.core.types import Cluster


@pytest.mark.parametrize(("text", "shape"), [("4x8", (4, 8)), (" 16X4 ", (16, 4)), ("2×3", (2, 3))])
def test_parse_shape(text: str, shape: tuple[int, int]) -> None:
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["abc", "4x", "x8", "4x8x2", "-1x8", ""])
def test_a_malformed_shape_is_not_too_large(text: str) -> None:
    with pytest.raises(ShapeError, match="NODESxGPUS") as info:
        parse_shape(text)
    assert not isinstance(info.value, ShapeTooLargeError)


def test_bounds() -> None:
    with pytest.raises(ShapeError, match="at least one node") as info:
        check_shape(0, 8)
    assert not isinstance(info.value, ShapeTooLargeError)
    check_shape(1, 64)
    with pytest.raises(ShapeTooLargeError, match="at most 64 GPUs per node, got 65"):
        check_shape(1, 65)
    # 1,562 x 64 = 99,968 GPUs pass; 1,563 x 64 = 100,032 exceed 100,000
    check_shape(1562, 64)
    with pytest.raises(ShapeTooLargeError, match="at most 100,000 GPUs in total, got 100,032"):
        parse_shape("1563x64")
    with pytest.raises(ShapeTooLargeError, match="at most 9,999 nodes, got 10,000"):
        parse_shape("10000x1", max_nodes=9999)


def test_node_names_widen_past_two_digits() -> None:
    assert node_names(3) == ["node-00", "node-01", "node-02"]
    assert node_names(101)[-1] == "node-100" and node_names(101)[0] == "node-000"
    assert node_names(2, prefix="gpu", start=99) == ["gpu-099", "gpu-100"]


def test_a_simulated_cluster_has_the_live_node_names() -> None:
    cluster = Cluster.uniform(101, 2)
    assert [g.node for g in cluster.gpus[::2]] == node_names(101)
    assert [(g.id, g.index) for g in cluster.gpus[:4]] == [(0, 0), (1, 1), (2, 0), (3, 1)]


def test_write_atomic_replaces_the_file_with_the_usual_mode(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "out.json"
    write_atomic(target, "one\n")
    write_atomic(target, "two\n")
    assert target.read_text(encoding="utf-8") == "two\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    write_atomic(target, "secret", private=True)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["out.json"]  # no temporary file left


def test_write_atomic_leaves_nothing_behind_on_failure(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError):
        write_atomic(tmp_path / "folder", "x")  # a folder cannot be replaced by a file
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]
