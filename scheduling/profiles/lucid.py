"""Validation of the shipped profile against Lucid's co-location measurements (validation only).

Lucid's ``profiles/lucid-colocate.csv`` (S-Lab License 1.0, non-commercial) measures pairs of
jobs sharing one GPU; nothing from it is written into the profile. :func:`validate_lucid` compares
the profile's ``ξ`` (measured Gavel pair or predictor) with them.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from scheduling.core.profiles import TableProfile
from scheduling.profiles.predictor_fit import error_row, format_rows


class LucidError(Exception):
    """The Lucid file is missing or malformed (message for the command line)."""


LUCID_FAMILIES: dict[tuple[str, str], str] = {
    ("ResNet18", "CIFAR-10"): "ResNet-18",
    ("MobileNetV2", "CIFAR-10"): "ResNet-18",
    ("EfficientNet", "CIFAR-10"): "ResNet-18",
    ("VGG", "CIFAR-10"): "ResNet-18",
    ("MobileNetV3", "ImageNet"): "ResNet-18",
    ("ResNet50", "ImageNet"): "ResNet-50",
    ("Transformer", "Multi30k"): "Transformer",
    ("BERT", "SQuAD"): "Transformer",
    ("LSTM", "Wikitext2"): "LM",
    ("NeuMF", "MovieLens"): "Recommendation",
    ("PPO", "LunarLander"): "A3C",
    ("TD3", "BipedalWalker"): "A3C",
    ("DCGAN", "LSUN"): "CycleGAN",
}
"""Lucid (model, dataset) → Gavel family for validation only: light CNNs, whatever the dataset,
→ ResNet-18, as in :data:`MODEL_FAMILIES`; PointNet has no counterpart and is skipped."""


def validate_lucid(path: Path, profile: TableProfile) -> str:
    """Compare ``profile``'s ξ (measured Gavel pair or predictor) with Lucid's measured pairs.

    Lucid's ``speed1``/``speed2`` are co-located speeds normalised by the solo speed, so
    ``ξ = 1/speed``. Only fp32 (``amp == 0``) single-GPU rows of mapped models are used. Raises
    :class:`LucidError` on a missing or malformed file.
    """
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise LucidError(f"Lucid file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LucidError(f"cannot read Lucid file {path}: {exc}") from None
    need = {
        "model1",
        "dataset1",
        "batchsize1",
        "amp1",
        "speed1",
        "model2",
        "dataset2",
        "batchsize2",
        "amp2",
        "speed2",
    }
    if not rows or not need <= set(rows[0]):
        raise LucidError(f"{path}: expected Lucid's lucid-colocate.csv columns {sorted(need)}")
    truth: dict[tuple[str, str], float] = {}
    ours: dict[tuple[str, str], float] = {}
    skipped = 0
    for i, row in enumerate(rows):
        try:
            fa = LUCID_FAMILIES.get((row["model1"], row["dataset1"]))
            fb = LUCID_FAMILIES.get((row["model2"], row["dataset2"]))
            if fa is None or fb is None or row["amp1"] != "0" or row["amp2"] != "0":
                skipped += 1
                continue
            ta = profile.job_type_for(fa, int(row["batchsize1"]))
            tb = profile.job_type_for(fb, int(row["batchsize2"]))
            sa, sb = float(row["speed1"]), float(row["speed2"])
        except (KeyError, ValueError) as exc:
            raise LucidError(f"{path} row {i + 2}: {exc}") from None
        if sa <= 0 or sb <= 0:
            skipped += 1
            continue
        xa, xb = profile.type_slowdown(ta, tb)
        a, b = f"{i}:a", f"{i}:b"
        truth[(a, b)], truth[(b, a)] = 1 / sa, 1 / sb
        ours[(a, b)], ours[(b, a)] = xa, xb
    if not truth:
        raise LucidError(f"{path}: no usable row")
    median = statistics.median(truth.values())
    rows_out = [
        error_row("Gavel table + predictor", truth, ours),
        error_row(
            f"conservative default ({profile.conservative_slowdown:g})",
            truth,
            dict.fromkeys(truth, profile.conservative_slowdown),
        ),
        error_row("Lucid's own median (oracle)", truth, dict.fromkeys(truth, median)),
    ]
    return format_rows(
        f"Lucid validation: {len(truth) // 2} fp32 pairs ({skipped} rows skipped), "
        f"median measured ξ {median:.3f}",
        rows_out,
    )
