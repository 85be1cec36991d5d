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
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import os
import random
import statistics
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduling.core.profiles import ProfileError, SlowdownPredictor, TableProfile, split_gavel_job_type
from scheduling.datapaths import shared_data_dir

GPU_TYPE = "v100"
FORMAT = "sharewise-profile/1"
DEFAULT_OUT = Path(__file__).resolve().parent / "default.json"

CONSERVATIVE_SLOWDOWN = 2.0
"""ξ assumed for both jobs of a pair with a model of unknown family **(ours)**: plain time-slicing
(each job gets the GPU half the time). With it the pairwise rule of MODEL.md §2 shares only when the
waiting job is much shorter than the resident one (``A < B/2``), never for equal jobs; about 73 % of
the measured Gavel V100 pairs do better than this."""

RIDGE = 1.0
"""Ridge penalty on each of the predictor's ``s``, ``g`` and ``h`` terms, in units of one
observation **(ours)**; penalties from 0.3 to 3 change its leave-pairs-out MAE by under 0.02."""

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


# -------------------------------------------------------------------------------------- predictor
def fit_predictor(
    xi: dict[tuple[str, str], float],
    ridge: float = RIDGE,
    tol: float = 1e-7,
    max_sweeps: int = 500,
    family_pairs: bool = True,
) -> SlowdownPredictor:
    """Fit :class:`SlowdownPredictor` to measured ``ξ`` by ridge least squares on ``ln ξ``.

    Minimises ``Σ (ln ξ_{a|b} − μ − s_a − g_b − h_{F(a),F(b)})² + ridge·(Σs² + Σg² + Σh²)`` by block
    coordinate descent (each block — μ, all ``s``, all ``g``, all ``h`` — is solved exactly in turn);
    the objective is strictly convex in the penalised terms, so this converges to its unique optimum.
    Stops when no coefficient moves by more than ``tol``. ``family_pairs=False`` drops the ``h``
    terms (for comparison in the report). Raises ``ValueError`` on no data.
    """
    if not xi:
        raise ValueError("no measured pair to fit the predictor on")
    rows = [
        (a, b, (split_gavel_job_type(a)[0], split_gavel_job_type(b)[0]), math.log(v))
        for (a, b), v in xi.items()
    ]
    mu = 0.0
    s: dict[str, float] = {a: 0.0 for a, _, _, _ in rows}
    g: dict[str, float] = {b: 0.0 for _, b, _, _ in rows}
    h: dict[tuple[str, str], float] = {f: 0.0 for _, _, f, _ in rows}
    for _ in range(max_sweeps):
        mu = statistics.fmean(y - s[a] - g[b] - h[f] for a, b, f, y in rows)
        moved = 0.0
        blocks = [(s, lambda r: r[0]), (g, lambda r: r[1])] + ([(h, lambda r: r[2])] if family_pairs else [])
        for block, key_of in blocks:
            sums: dict[Any, list[float]] = {}
            for r in rows:
                a, b, f, y = r
                cell = sums.setdefault(key_of(r), [0.0, 0.0])
                cell[0] += y - mu - s[a] - g[b] - h[f] + block[key_of(r)]
                cell[1] += 1.0
            for key, (total, n) in sums.items():
                new = total / (n + ridge)
                moved = max(moved, abs(new - block[key]))
                block[key] = new
        if moved < tol:
            break
    interaction: dict[str, dict[str, float]] = {}
    for (fa, fb), v in (h if family_pairs else {}).items():
        interaction.setdefault(fa, {})[fb] = v
    return SlowdownPredictor(mu, s, g, interaction)


@dataclass(frozen=True)
class ErrorRow:
    """Error of one way of guessing ``ξ`` on held-out pairs."""

    method: str
    n: int
    mae: float
    median_rel: float
    p90_rel: float
    over_share: float
    decision_agreement: float


def _shares(xi_a: float, xi_b: float) -> bool:
    """MODEL.md §2 pairwise rule for two jobs of equal remaining time ``A = B``: share iff
    ``T_con < T_seq = 1.5·A``, with ``T_con/A = 0.5 + (1 − 1/(2ξ_first))·ξ_other`` where the job
    with the larger ξ ends last (``ξ_a ≥ ξ_b``: ``b`` ends first)."""
    if xi_a >= xi_b:
        return 0.5 + (1 - 1 / (2 * xi_a)) * xi_b < 1.5
    return 0.5 + (1 - 1 / (2 * xi_b)) * xi_a < 1.5


def error_row(
    method: str, truth: dict[tuple[str, str], float], guess: dict[tuple[str, str], float]
) -> ErrorRow:
    """Errors of ``guess`` against ``truth`` over the same ordered pairs.

    ``mae``: mean |ξ̂ − ξ|; ``median_rel``/``p90_rel``: median / 90th percentile of |ξ̂ − ξ| / ξ;
    ``over_share``: fraction of pairs guessed below the truth by more than 10 % (optimistic: leads to
    sharing that hurts); ``decision_agreement``: fraction of unordered pairs where the equal-length
    pairwise rule decides the same with the guess as with the measurement.
    """
    pairs = sorted(truth)
    rel = sorted(abs(guess[p] - truth[p]) / truth[p] for p in pairs)
    agree = total = 0
    for a, b in pairs:
        if a <= b and (b, a) in truth:
            total += 1
            agree += _shares(guess[(a, b)], guess[(b, a)]) == _shares(truth[(a, b)], truth[(b, a)])
    return ErrorRow(
        method,
        len(pairs),
        statistics.fmean(abs(guess[p] - truth[p]) for p in pairs),
        statistics.median(rel),
        rel[min(len(rel) - 1, int(0.9 * len(rel)))],
        sum(1 for p in pairs if guess[p] < truth[p] / 1.1) / len(pairs),
        agree / total if total else float("nan"),
    )


def leave_pairs_out(
    xi: dict[tuple[str, str], float], folds: int = 10, seed: int = 0, ridge: float = RIDGE
) -> list[ErrorRow]:
    """k-fold cross-validation over unordered pairs: fit on k−1 folds, predict the held-out one.

    Both directions of a pair (and a job type with itself) are held out together. Compares the
    predictor with the same predictor without its family-pair terms, the training median and the
    conservative default. Deterministic for a ``seed``.
    """
    unordered = sorted({tuple(sorted(p)) for p in xi})
    random.Random(seed).shuffle(unordered)
    without_h = "predictor without family-pair term"
    guesses: dict[str, dict[tuple[str, str], float]] = {
        "predictor": {},
        without_h: {},
        "median of training pairs": {},
    }
    for k in range(folds):
        held = {p for i, p in enumerate(unordered) if i % folds == k}
        test = [p for p in xi if tuple(sorted(p)) in held]
        train = {p: v for p, v in xi.items() if tuple(sorted(p)) not in held}
        models = {
            "predictor": fit_predictor(train, ridge),
            without_h: fit_predictor(train, ridge, family_pairs=False),
        }
        median = statistics.median(train.values())
        for p in test:
            for name, model in models.items():
                predicted = model.predict(p[0], p[1])
                guesses[name][p] = CONSERVATIVE_SLOWDOWN if predicted is None else predicted
            guesses["median of training pairs"][p] = median
    guesses[f"conservative default ({CONSERVATIVE_SLOWDOWN:g})"] = dict.fromkeys(xi, CONSERVATIVE_SLOWDOWN)
    return [error_row(name, xi, g) for name, g in guesses.items()]


def format_rows(title: str, rows: Iterable[ErrorRow]) -> str:
    """A plain-text table of :class:`ErrorRow`."""
    lines = [
        title,
        f"{'method':<34}{'ξ':>6}{'MAE ξ':>8}{'med rel':>9}{'p90 rel':>9}"
        f"{'optimistic':>11}{'same decision':>15}",
    ]
    for r in rows:
        lines.append(
            f"{r.method:<34}{r.n:>6}{r.mae:>8.3f}{r.median_rel:>9.1%}{r.p90_rel:>9.1%}"
            f"{r.over_share:>11.1%}{r.decision_agreement:>15.1%}"
        )
    return "\n".join(lines)


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


def write_json_atomic(table: dict[str, Any], out: Path) -> None:
    """Write ``table`` to ``out`` via a temporary file in the same folder and a rename."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".profile-", suffix=".json", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(table, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------- lucid validation
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
    :class:`GavelImportError` on a missing or malformed file.
    """
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise GavelImportError(f"Lucid file not found: {path}") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise GavelImportError(f"cannot read Lucid file {path}: {exc}") from None
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
        raise GavelImportError(f"{path}: expected Lucid's lucid-colocate.csv columns {sorted(need)}")
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
            raise GavelImportError(f"{path} row {i + 2}: {exc}") from None
        if sa <= 0 or sb <= 0:
            skipped += 1
            continue
        xa, xb = profile.type_slowdown(ta, tb)
        a, b = f"{i}:a", f"{i}:b"
        truth[(a, b)], truth[(b, a)] = 1 / sa, 1 / sb
        ours[(a, b)], ours[(b, a)] = xa, xb
    if not truth:
        raise GavelImportError(f"{path}: no usable row")
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


# ----------------------------------------------------------------------------------------- CLI
def report(xi: dict[tuple[str, str], float], rows: Sequence[ErrorRow], folds: int) -> str:
    """The leave-pairs-out error table (plain text) of ``rows`` from :func:`leave_pairs_out`."""
    n_unordered = len({tuple(sorted(p)) for p in xi})
    spread = sorted(xi.values())
    title = (
        f"Leave-pairs-out, {folds}-fold over {n_unordered} unordered measured V100 pairs "
        f"({len(xi)} ξ values; measured ξ median {statistics.median(spread):.3f}, max {spread[-1]:.2f}).\n"
        "optimistic = ξ guessed >10 % too low; same decision = pairwise rule (MODEL.md §2, equal "
        "remaining times) decides as with the measured ξ"
    )
    return format_rows(title, rows)


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
    except (GavelImportError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.no_write:
        try:
            write_json_atomic(table, args.out)
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
