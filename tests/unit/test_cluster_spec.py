"""Heterogeneous cluster specs (common/shapes.py ``parse_cluster_spec``, scheduling/core/gpu_types.py
``cluster_of_groups``, ``python -m scheduling.sim --cluster``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.shapes import ShapeError, ShapeTooLargeError, parse_cluster_spec
from scheduling.core.gpu_types import cluster_of_groups
from scheduling.core.types import Cluster
from scheduling.sim.cli import build_cluster, main
from tests.unit.test_sim_cli import TINY


def test_the_plain_shape_keeps_its_meaning() -> None:
    assert parse_cluster_spec("4x8") == [(4, 8, None, None)]
    assert build_cluster(parse_cluster_spec("4x8"), 49_140, "v100") == Cluster.uniform(4, 8)


def test_two_groups_of_two_types() -> None:
    groups = parse_cluster_spec("2x8:a100:81920, 4x8:t4:16384")
    assert groups == [(2, 8, "a100", 81_920), (4, 8, "t4", 16_384)]
    c = build_cluster(groups, 49_140, "v100")
    assert c.size == 48
    # node names run on across the groups; ids dense in node order
    assert (c.gpus[0].node, c.gpus[0].gpu_type, c.gpus[0].memory_mb) == ("node-00", "a100", 81_920)
    assert (c.gpus[16].node, c.gpus[16].gpu_type, c.gpus[16].memory_mb) == ("node-02", "t4", 16_384)
    assert c.gpus[47].node == "node-05" and [g.id for g in c.gpus] == list(range(48))


def test_a_group_without_type_takes_the_defaults() -> None:
    c = build_cluster(parse_cluster_spec("1x2,1x1:t4:16384"), 40_000, "v100")
    assert [(g.gpu_type, g.memory_mb) for g in c.gpus] == [("v100", 40_000), ("v100", 40_000), ("t4", 16_384)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "cluster spec is empty"),
        ("2x8:a100", "must look like NODESxGPUS or NODESxGPUS:TYPE:MEMORY_MB"),
        ("2x8:a100:0", "memory must be 1 to 1048576 MB, got '0'"),
        ("2x8:a100:lots", "memory must be 1 to 1048576 MB, got 'lots'"),
        ("2x8:a b:100", "GPU type 'a b' must be"),
        ("2x8:a100:80000,", "cluster shape must look like NODESxGPUS"),
        ("0x8:a100:80000", "at least one node"),
    ],
)
def test_bad_specs_say_which_group(text: str, message: str) -> None:
    with pytest.raises(ShapeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_cluster_spec(text)


def test_groups_together_are_bounded() -> None:
    # 1,000 x 64 = 64,000 GPUs each: 128,000 > 100,000 in total
    with pytest.raises(ShapeTooLargeError, match="at most 100,000 GPUs in total, got 128,000"):
        parse_cluster_spec("1000x64:a:1,1000x64:b:1")


def test_cluster_of_groups_refuses_an_empty_group() -> None:
    with pytest.raises(ValueError, match="needs ≥ 1 node"):
        cluster_of_groups([(1, 0, "a", 1)])


def test_cli_runs_a_mixed_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text(TINY, encoding="utf-8")
    out = tmp_path / "out.json"
    code = main(
        [
            "--trace",
            str(trace),
            "--cluster",
            "1x1:a100:81920,1x2:t4:16384",
            "--policies",
            "sjf",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "cluster 1 a100 (81920 MB) + 2 t4 (16384 MB)" in text
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["cluster"]["gpu_types"] == {
        "a100": {"gpus": 1, "memory_mb": 81_920},
        "t4": {"gpus": 2, "memory_mb": 16_384},
    }
    assert report["policies"]["sjf"]["jobs"] == 3


def test_cli_names_each_memory_size_of_one_gpu_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One type in two sizes (A100 80 GB and 40 GB): the cluster line used to say "2x1 a100
    # (81920 MB)", hiding the second group's memory, though the simulated GPUs kept it.
    trace = tmp_path / "tiny.csv"
    trace.write_text(TINY, encoding="utf-8")
    spec = ["--cluster", "1x1:a100:81920,1x2:a100:40960"]
    code = main(["--trace", str(trace), *spec, "--policies", "sjf", "--no-progress"])
    text = capsys.readouterr().out
    assert code == 0 and "cluster 1 a100 (81920 MB) + 2 a100 (40960 MB);" in text


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text(TINY, encoding="utf-8")
    code = main(["--trace", str(trace), "--cluster", "2x8:a100", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "bad --cluster '2x8:a100': node group '2x8:a100' must look like" in err
