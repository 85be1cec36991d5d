"""Derive Sharewise's compact performance profile from Gavel's measured throughputs.

Usage::

    python -m scheduling.profiles.import_gavel [--src PATH] [--out PATH] [--report] [--folds K]
                                               [--validate-lucid [PATH]] [--no-write]

``--src`` defaults to ``profiles/gavel-throughputs.json`` in the shared data folder
(:func:`scheduling.datapaths.shared_data_dir`); it is Gavel's ``scheduler/simulation_throughputs.json``
(stanford-futuredata/gavel, MIT). ``--out`` defaults to ``scheduling/profiles/default.json``. The
output holds derived numbers only (rounded): isolated V100 steps/s per (job type, GPUs), per family
the batch → samples/s curve, per measured single-GPU pair the slowdown ``ξ = isolated ÷ co-located
steps/s``, the coefficients of the slowdown predictor, the memory model and the model-name mapping.

``--report`` prints the leave-pairs-out error of the predictor (k-fold over unordered measured pairs:
both directions of a pair are held out together) next to the predictor without its family-pair
terms and two constants: the training median and the conservative default. ``--validate-lucid``
compares the table and predictor with the co-location measurements of Lucid
(``profiles/lucid-colocate.csv``, S-Lab License 1.0, non-commercial: validation only, nothing from it
is written). Errors in the input → a message on stderr and exit status 2, and nothing is written
(the output file is replaced atomically, after every check passed).

This module reads Gavel's file and builds the table; the predictor's fit and its error tables are
:mod:`scheduling.profiles.predictor_fit`, the Lucid comparison :mod:`scheduling.profiles.lucid`.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.files import write_atomic
from scheduling.core.profiles import ProfileError, TableProfile, split_gavel_job_type
from scheduling.datapaths import shared_data_dir
from scheduling.profiles.lucid import LucidError, validate_lucid
from scheduling.profiles.predictor_fit import (
    CONSERVATIVE_SLOWDOWN,
    RIDGE,
    ErrorRow,
    fit_predictor,
    leave_pairs_out,
    report,
)

GPU_TYPE = "v100"
FORMAT = "sharewise-profile/1"
DEFAULT_OUT = Path(__file__).resolve().parent / "default.json"

MODEL_FAMILIES: dict[str, str] = {
    # Tiresias / Muri / SJF-BSBF traces
    "resnet18": "ResNet-18",
    "shufflenet_v2_x1_0": "ResNet-18",
    "vgg16": "ResNet-50",
    "vgg19": "ResNet-50",
    "bert": "Transformer",
    "gpt2": "Transformer",
    "dqn": "A3C",
    "a2c": "A3C",
    # Chronus
    "alexnet": "ResNet-18",
    "mobilenet_v2": "ResNet-18",
    "inception_v3": "ResNet-50",
    "resnet101": "ResNet-50",
    # the Gavel families by their plain names and a few common synonyms
    "resnet50": "ResNet-50",
    "transformer": "Transformer",
    "lm": "LM",
    "lstm": "LM",
    "recommendation": "Recommendation",
    "ncf": "Recommendation",
    "neumf": "Recommendation",
    "a3c": "A3C",
    "ppo": "A3C",
    "td3": "A3C",
    "cyclegan": "CycleGAN",
    "dcgan": "CycleGAN",
}
"""Trace model name → measured Gavel family (**ours**, reasons in scheduling/profiles/README.md):
architecture name first (resnet18 → ResNet-18), else the family of the same kind and weight —
heavy ImageNet CNNs → ResNet-50 (ImageNet), light CNNs → ResNet-18 (CIFAR-10), attention models →
Transformer, recurrent LMs → LM, reinforcement learning → A3C, GANs → CycleGAN."""

SJFBSBF_SOURCE = "SJF-BSBF authors (Luo et al., IWQoS 2024), GPU memory profiled at the trace batch"
OURS = "estimate (ours)"

MEMORY_MODELS: dict[str, dict[str, Any]] = {
    # memory_mb at the Tiresias/Muri trace batch: the SJF-BSBF authors' figures (data README);
    # activation fractions are ours.
    "resnet18": {"batch": 128, "memory_mb": 6432, "activation_fraction": 0.6, "source": SJFBSBF_SOURCE},
    "shufflenet_v2_x1_0": {
        "batch": 128,
        "memory_mb": 5252,
        "activation_fraction": 0.7,
        "source": SJFBSBF_SOURCE,
    },
    "vgg16": {"batch": 16, "memory_mb": 4224, "activation_fraction": 0.45, "source": SJFBSBF_SOURCE},
    "vgg19": {"batch": 16, "memory_mb": 4304, "activation_fraction": 0.45, "source": SJFBSBF_SOURCE},
    "dqn": {"batch": 128, "memory_mb": 2230, "activation_fraction": 0.1, "source": SJFBSBF_SOURCE},
    "a2c": {"batch": 64, "memory_mb": 2094, "activation_fraction": 0.1, "source": SJFBSBF_SOURCE},
    "bert": {"batch": 4, "memory_mb": 8058, "activation_fraction": 0.5, "source": SJFBSBF_SOURCE},
    "gpt2": {"batch": 4, "memory_mb": 10532, "activation_fraction": 0.4, "source": SJFBSBF_SOURCE},
    # Chronus models (its trace gives no memory): ours, fp32 PyTorch on one V100
    "alexnet": {"batch": 128, "memory_mb": 3000, "activation_fraction": 0.5, "source": OURS},
    "mobilenet_v2": {"batch": 64, "memory_mb": 5500, "activation_fraction": 0.75, "source": OURS},
    "inception_v3": {"batch": 64, "memory_mb": 9000, "activation_fraction": 0.7, "source": OURS},
    "resnet101": {"batch": 32, "memory_mb": 7500, "activation_fraction": 0.6, "source": OURS},
}
"""Per-model memory defaults: MB per GPU at a reference batch and the share of it that is
per-sample activations (``mem(b) = (1−f)·M + f·M·b/B_ref``, MODEL.md §1)."""

MEMORY_FAMILIES: dict[str, dict[str, Any]] = {
    "ResNet-18": {"batch": 128, "memory_mb": 2800, "activation_fraction": 0.5, "source": OURS},
    "ResNet-50": {"batch": 64, "memory_mb": 10000, "activation_fraction": 0.75, "source": OURS},
    "Transformer": {"batch": 64, "memory_mb": 6000, "activation_fraction": 0.6, "source": OURS},
    "LM": {"batch": 20, "memory_mb": 2500, "activation_fraction": 0.4, "source": OURS},
    "Recommendation": {"batch": 2048, "memory_mb": 2500, "activation_fraction": 0.3, "source": OURS},
    "A3C": {"batch": 1, "memory_mb": 2100, "activation_fraction": 0.1, "source": OURS},
    "CycleGAN": {"batch": 1, "memory_mb": 4500, "activation_fraction": 0.5, "source": OURS},
}
"""Family memory defaults, used for a model with no entry of its own (e.g. Gavel TSV job types)."""

MEMORY_FALLBACK: dict[str, Any] = {"memory_mb": 8000, "activation_fraction": 0.5, "source": OURS}
"""Unknown model without trace memory: 8,000 MB at its own batch (above every default but GPT-2's)."""

SOURCE: dict[str, str] = {
    "throughputs": "stanford-futuredata/gavel, scheduler/simulation_throughputs.json (MIT licence); "
    "V100, consolidated; derived numbers only",
    "memory": SJFBSBF_SOURCE + " for resnet18, shufflenet_v2_x1_0, vgg16, vgg19, dqn, a2c, bert, gpt2; "
    "other memory figures, activation fractions, the model mapping and the predictor are ours",
    "generated_by": "python -m scheduling.profiles.import_gavel",
}


class GavelImportError(Exception):
    """The source file is missing or malformed (message for the command line)."""


# ------------------------------------------------------------------------------------------ parse
@dataclass(frozen=True)
class GavelData:
    """V100 content of Gavel's throughput file.

    ``isolated[(job_type, gpus)]``: steps/s; ``pairs[(a, b)]``: ``(a's, b's)`` co-located steps/s
    on one GPU, only pairs with both values positive (0.0 means not measured).
    """

    isolated: dict[tuple[str, int], float]
    pairs: dict[tuple[str, str], tuple[float, float]]


def _parse_key(raw: str) -> tuple[str, int]:
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = None
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and value[1] >= 1
    ):
        raise GavelImportError(f"bad job key {raw!r}: expected \"('<job type>', <num_gpus>)\"")
    return value[0], value[1]


def _is_rate(value: object) -> bool:
    """A finite, non-negative number of steps/s (``0.0`` = not measured)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf


def read_gavel(path: Path) -> GavelData:
    """Parse Gavel's throughput JSON (V100 section). Raises :class:`GavelImportError` with a message."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GavelImportError(f"source file not found: {path}") from None
    except UnicodeDecodeError:
        raise GavelImportError(
            f"{path} is not UTF-8 text: is it Gavel's simulation_throughputs.json?"
        ) from None
    except OSError as exc:
        raise GavelImportError(f"cannot read {path}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GavelImportError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get(GPU_TYPE), dict) or not raw[GPU_TYPE]:
        raise GavelImportError(
            f"{path} has no '{GPU_TYPE}' section: is it Gavel's simulation_throughputs.json?"
        )
    isolated: dict[tuple[str, int], float] = {}
    pairs: dict[tuple[str, str], tuple[float, float]] = {}
    for key, entry in raw[GPU_TYPE].items():
        job = _parse_key(key)
        if not isinstance(entry, dict) or not _is_rate(entry.get("null")):
            raise GavelImportError(f"{GPU_TYPE} {key}: no isolated throughput ('null' entry, steps/s ≥ 0)")
        if entry["null"] > 0:
            isolated[job] = float(entry["null"])
        for other_key, value in entry.items():
            if other_key == "null":
                continue
            other = _parse_key(other_key)
            if not (isinstance(value, list) and len(value) == 2 and all(_is_rate(v) for v in value)):
                raise GavelImportError(f"{GPU_TYPE} {key} with {other_key}: expected [steps/s, steps/s]")
            if job[1] == 1 and other[1] == 1 and value[0] > 0 and value[1] > 0:
                pairs[(job[0], other[0])] = (float(value[0]), float(value[1]))
    if not pairs:
        raise GavelImportError(f"{path}: no measured single-GPU pair on {GPU_TYPE}")
    for a, b in pairs:
        if (a, 1) not in isolated or (b, 1) not in isolated:
            raise GavelImportError(f"{path}: pair ({a!r}, {b!r}) lacks an isolated throughput")
    return GavelData(isolated, pairs)


def measured_slowdowns(data: GavelData) -> dict[tuple[str, str], float]:
    """``ξ_{a|b} = isolated(a) ÷ co-located(a with b)`` for every measured ordered pair."""
    return {(a, b): data.isolated[(a, 1)] / co[0] for (a, b), co in data.pairs.items()}


# ------------------------------------------------------------------------------------ build table
def _r(x: float) -> float:
    return float(f"{x:.5g}")


def build_table(data: GavelData, errors: Sequence[ErrorRow], folds: int) -> dict[str, Any]:
    """The shipped table (format ``sharewise-profile/1``) from parsed Gavel data and the
    predictor's leave-pairs-out ``errors`` over ``folds`` folds (from :func:`leave_pairs_out`)."""
    xi = measured_slowdowns(data)
    model = fit_predictor(xi)
    families: dict[str, dict[str, list[float]]] = {}
    for job_type, gpus in sorted(data.isolated):
        if gpus != 1:
            continue
        family, batch = split_gavel_job_type(job_type)
        curve = families.setdefault(family, {"batches": [], "samples_per_s": []})
        if batch is not None:
            curve["batches"].append(batch)
            curve["samples_per_s"].append(data.isolated[(job_type, 1)] * batch)
    for curve in families.values():
        order = sorted(range(len(curve["batches"])), key=curve["batches"].__getitem__)
        curve["batches"] = [curve["batches"][i] for i in order]
        curve["samples_per_s"] = [_r(curve["samples_per_s"][i]) for i in order]
    isolated: dict[str, dict[str, float]] = {}
    for (job_type, gpus), v in sorted(data.isolated.items()):
        isolated.setdefault(job_type, {})[str(gpus)] = _r(v)
    slowdowns: dict[str, dict[str, float]] = {}
    for (a, b), v in sorted(xi.items()):
        slowdowns.setdefault(a, {})[b] = _r(v)
    return {
        "format": FORMAT,
        "gpu_type": GPU_TYPE,
        "source": SOURCE,
        "isolated_steps_per_s": isolated,
        "families": families,
        "slowdowns": slowdowns,
        "predictor": {
            "kind": "ln xi_a|b = mu + sensitivity[a] + intensity[b] + interaction[family a][family b], "
            "ridge least squares (ours)",
            "ridge": RIDGE,
            "mu": _r(model.mu),
            "sensitivity": {k: _r(v) for k, v in sorted(model.sensitivity.items())},
            "intensity": {k: _r(v) for k, v in sorted(model.intensity.items())},
            "interaction": {
                fa: {fb: _r(v) for fb, v in sorted(row.items())}
                for fa, row in sorted(model.interaction.items())
            },
            "leave_pairs_out": {
                "folds": folds,
                "xi_values": errors[0].n,
                **{r.method: {"mae": _r(r.mae), "median_rel": _r(r.median_rel)} for r in errors},
            },
        },
        "conservative_slowdown": CONSERVATIVE_SLOWDOWN,
        "model_families": dict(sorted(MODEL_FAMILIES.items())),
        "memory": {"models": MEMORY_MODELS, "families": MEMORY_FAMILIES, "fallback": MEMORY_FALLBACK},
    }


def write_table(table: dict[str, Any], out: Path) -> None:
    """Write ``table`` to ``out`` as JSON (indent 1, UTF-8, ending in a newline), atomically
    (:func:`common.files.write_atomic`). Raises ``OSError`` when ``out`` cannot be written."""
    write_atomic(out, json.dumps(table, indent=1, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------- CLI
def default_source() -> Path:
    """``profiles/gavel-throughputs.json`` in the shared data folder."""
    return shared_data_dir() / "profiles" / "gavel-throughputs.json"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 2 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduling.profiles.import_gavel", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--src",
        type=Path,
        default=None,
        help="Gavel simulation_throughputs.json (default: <shared data>/profiles/gavel-throughputs.json)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="table to write (default: %(default)s)")
    parser.add_argument(
        "--report", action="store_true", help="print the leave-pairs-out error of the predictor"
    )
    parser.add_argument("--folds", type=int, default=10, help="folds for --report (default 10)")
    parser.add_argument(
        "--validate-lucid",
        nargs="?",
        type=Path,
        const=True,
        default=None,
        metavar="PATH",
        help="check the table against Lucid's lucid-colocate.csv (validation only)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write --out (report only)")
    args = parser.parse_args(argv)
    if args.folds < 2:
        parser.error("--folds must be at least 2")
    src = args.src or default_source()
    try:
        data = read_gavel(src)
        xi = measured_slowdowns(data)
        errors = leave_pairs_out(xi, args.folds)
        table = build_table(data, errors, args.folds)
        outputs = [report(xi, errors, args.folds)] if args.report else []
        if args.validate_lucid is not None:
            lucid = (
                shared_data_dir() / "profiles" / "lucid-colocate.csv"
                if args.validate_lucid is True
                else args.validate_lucid
            )
            outputs.append(validate_lucid(lucid, TableProfile(table)))
    except (GavelImportError, LucidError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        try:
            write_table(table, args.out)
        except OSError as exc:
            print(f"error: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(
            f"wrote {args.out} ({args.out.stat().st_size:,} bytes) from {src}: "
            f"{len(table['isolated_steps_per_s'])} job types, {len(xi)} measured ξ"
        )
    for text in outputs:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
