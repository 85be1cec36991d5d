"""The predictor's error figures (scheduling/profiles/predictor_fit.py, lucid.py): MAPE and the
other columns of one error row by hand, and Lucid's pairs read and pooled as documented."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduling.profiles.lucid import LucidError, lucid_slowdowns, read_lucid
from scheduling.profiles.predictor_fit import error_row


def test_error_row_by_hand() -> None:
    # truth ξ 2.0 and 1.0, guesses 1.5 and 1.2: absolute errors 0.5 and 0.2 (MAE 0.35), relative
    # 0.25 and 0.2 (MAPE 0.225, median 0.225); 1.5 < 2.0/1.1 is optimistic, 1.2 > 1.0/1.1 is not;
    # the equal-length pairwise rule shares with both (T_con/A = 0.5 + 0.75·1 = 1.25 and
    # 0.5 + (2/3)·1.2 = 1.3, both < 1.5): the same decision
    row = error_row("m", {("a", "b"): 2.0, ("b", "a"): 1.0}, {("a", "b"): 1.5, ("b", "a"): 1.2})
    assert (row.n, row.mae, row.mape, row.median_rel) == (
        2,
        pytest.approx(0.35),
        pytest.approx(0.225),
        pytest.approx(0.225),
    )
    assert (row.p90_rel, row.over_share, row.decision_agreement) == (pytest.approx(0.25), 0.5, 1.0)


HEADER = ",model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2\n"


def test_lucid_pairs_are_read_and_repeated_pairs_pooled_geometrically(tmp_path: Path) -> None:
    path = tmp_path / "lucid.csv"
    path.write_text(
        HEADER
        + "0,ResNet18,CIFAR-10,1,32,0,0.5,PointNet,ShapeNet,1,16,0,0.8\n"  # ξ 2.0 and 1.25
        + "1,ResNet18,CIFAR-10,1,32,0,0.8,PointNet,ShapeNet,1,16,0,0.5\n"  # ξ 1.25 and 2.0
        + "2,ResNet18,CIFAR-10,1,32,1,0.1,PointNet,ShapeNet,1,16,0,0.1\n"  # AMP: skipped
        + "3,ResNet18,CIFAR-10,1,32,0,0.0,PointNet,ShapeNet,1,16,0,0.5\n",  # no speed: skipped
        encoding="utf-8",
    )
    pairs, skipped = read_lucid(path)
    assert skipped == 2 and len(pairs) == 2
    assert (pairs[0].a, pairs[0].b, pairs[0].xi_a, pairs[0].xi_b) == (
        ("ResNet18", "CIFAR-10", 32),
        ("PointNet", "ShapeNet", 16),
        2.0,
        1.25,
    )
    # both directions seen twice, 2.0 and 1.25: geometric mean sqrt(2.5)
    xi = lucid_slowdowns(pairs)
    a, b = "ResNet18/CIFAR-10 (batch size 32)", "PointNet/ShapeNet (batch size 16)"
    assert xi == {(a, b): pytest.approx(math.sqrt(2.5)), (b, a): pytest.approx(math.sqrt(2.5))}


def test_a_file_without_lucids_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(LucidError, match="columns"):
        read_lucid(path)
    with pytest.raises(LucidError, match="not found"):
        read_lucid(tmp_path / "missing.csv")
