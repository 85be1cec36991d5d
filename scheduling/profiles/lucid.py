"""Validation of the shipped profile and its slowdown predictor against Lucid's co-location
measurements (validation only).

Lucid's ``profiles/lucid-colocate.csv`` (S-Lab License 1.0, non-commercial) measures pairs of
jobs sharing one GPU; nothing from it is written into the profile. :func:`validate_lucid` compares
the profile's ``ξ`` (measured Gavel pair or predictor, and the shipped predictor alone) with them;
:func:`lucid_leave_pairs_out` fits the predictor's *form* on Lucid's own pairs, fold by fold, and
predicts the held-out ones (how well the method guesses unseen pairs on other GPUs and models).
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from scheduling.core.profiles import TableProfile, gavel_job_type
from scheduling.profiles.predictor_fit import error_row, format_rows, leave_pairs_out, report


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

_COLUMNS = frozenset(
    {
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
)


@dataclass(frozen=True, slots=True)
class LucidPair:
    """One fp32 single-GPU row: each job's ``(model, dataset, batch)`` and ``ξ = 1 / speed``."""

    a: tuple[str, str, int]
    b: tuple[str, str, int]
    xi_a: float
    xi_b: float


def read_lucid(path: Path) -> tuple[list[LucidPair], int]:
    """The fp32 (``amp == 0``) rows of positive speeds, and how many rows were skipped. Lucid's
    ``speed1``/``speed2`` are co-located speeds normalised by the solo speed, so ``ξ = 1/speed``.
    Raises :class:`LucidError` on a missing or malformed file."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise LucidError(f"Lucid file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LucidError(f"cannot read Lucid file {path}: {exc}") from None
    if not rows or not _COLUMNS <= set(rows[0]):
        raise LucidError(f"{path}: expected Lucid's lucid-colocate.csv columns {sorted(_COLUMNS)}")
    pairs: list[LucidPair] = []
    skipped = 0
    for i, row in enumerate(rows):
        try:
            if row["amp1"] != "0" or row["amp2"] != "0":
                skipped += 1
                continue
            a = (row["model1"], row["dataset1"], int(row["batchsize1"]))
            b = (row["model2"], row["dataset2"], int(row["batchsize2"]))
            sa, sb = float(row["speed1"]), float(row["speed2"])
        except (KeyError, ValueError) as exc:
            raise LucidError(f"{path} row {i + 2}: {exc}") from None
        if not (sa > 0 and sb > 0):
            skipped += 1
            continue
        pairs.append(LucidPair(a, b, 1 / sa, 1 / sb))
    return pairs, skipped


def validate_lucid(path: Path, profile: TableProfile) -> str:
    """Compare ``profile``'s ξ with Lucid's measured pairs of mapped models (:data:`LUCID_FAMILIES`):
    the table as the scheduler answers (measured Gavel pair, else the predictor), the shipped
    predictor alone (all these pairs are unseen by it), the conservative default and Lucid's own
    median. Raises :class:`LucidError` on a missing or malformed file."""
    pairs, skipped = read_lucid(path)
    truth: dict[tuple[str, str], float] = {}
    table: dict[tuple[str, str], float] = {}
    predicted: dict[tuple[str, str], float] = {}
    for i, pair in enumerate(pairs):
        fa, fb = LUCID_FAMILIES.get(pair.a[:2]), LUCID_FAMILIES.get(pair.b[:2])
        if fa is None or fb is None:
            skipped += 1
            continue
        ta, tb = profile.job_type_for(fa, pair.a[2]), profile.job_type_for(fb, pair.b[2])
        a, b = f"{i}:a", f"{i}:b"
        truth[(a, b)], truth[(b, a)] = pair.xi_a, pair.xi_b
        table[(a, b)], table[(b, a)] = profile.type_slowdown(ta, tb)
        if ta is not None and tb is not None:
            predicted[(a, b)], predicted[(b, a)] = (
                profile.predicted_slowdown(ta, tb),
                profile.predicted_slowdown(tb, ta),
            )
        else:
            predicted[(a, b)] = predicted[(b, a)] = profile.conservative_slowdown
    if not truth:
        raise LucidError(f"{path}: no usable row")
    median = statistics.median(truth.values())
    rows_out = [
        error_row("Gavel table + predictor", truth, table),
        error_row("shipped predictor alone", truth, predicted),
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


def lucid_slowdowns(pairs: list[LucidPair]) -> dict[tuple[str, str], float]:
    """Lucid's measured ``ξ`` per ordered pair of job types ``"model/dataset (batch size N)"``
    (the predictor's family is then the model on its dataset); repeated pairs by their geometric
    mean."""
    logs: dict[tuple[str, str], list[float]] = {}
    for pair in pairs:
        ta = gavel_job_type(f"{pair.a[0]}/{pair.a[1]}", pair.a[2])
        tb = gavel_job_type(f"{pair.b[0]}/{pair.b[1]}", pair.b[2])
        logs.setdefault((ta, tb), []).append(math.log(pair.xi_a))
        logs.setdefault((tb, ta), []).append(math.log(pair.xi_b))
    return {key: math.exp(statistics.fmean(values)) for key, values in logs.items()}


def lucid_leave_pairs_out(path: Path, folds: int = 10, seed: int = 0) -> str:
    """The predictor's form fitted on Lucid's fp32 pairs (every model, PointNet too) k-fold by
    unordered pair (:func:`~scheduling.profiles.predictor_fit.leave_pairs_out`): its error on the
    pairs it was not fitted on, next to simpler guesses. Raises :class:`LucidError`."""
    xi = lucid_slowdowns(read_lucid(path)[0])
    if len(xi) < 2 * folds:
        raise LucidError(f"{path}: too few pairs ({len(xi)}) for {folds} folds")
    rows = leave_pairs_out(xi, folds, seed)
    return report(xi, rows, folds).replace("measured V100 pairs", "Lucid pairs (its GPUs)", 1)
