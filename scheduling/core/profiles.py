"""Performance profile of jobs: sub-batch speed, memory and co-location slowdown (pure Python).

:class:`TableProfile` implements :class:`scheduling.core.types.Profile` from a plain dict — the
compact table that ``python -m scheduling.profiles.import_gavel`` derives from Gavel's measured
throughputs (stanford-futuredata/gavel, MIT, ``scheduler/simulation_throughputs.json``) and ships as
``scheduling/profiles/default.json``. No file I/O here: ``scheduling.profiles`` reads the file.

What the trace gives wins; the profile supplies only what the trace lacks (issue 3):

- ``t_j(b)`` (MODEL.md §1): ``job.iter_time_s`` is ``t_j(B_j)``; ``t_j(b) = t_j(B_j) · sps(B_j) / sps(b)``
  with ``sps`` the samples/s curve of the job's model family, measured on one V100 at a few batch
  sizes and interpolated piecewise linearly in (log batch, log samples/s). Outside the measured
  range it is clamped **(ours)**: below the smallest measured batch a micro-step takes as long as
  one at the smallest batch (the GPU is under-used, so step time is flat: ``sps ∝ b``); above the
  largest, samples/s stays at the largest measured value.
- ``mem_j(b) = static_j + per_sample_j · b`` (MODEL.md §1, linear model **ours**). A fraction
  ``f`` of the memory at the reference batch is per-sample activations (estimate, **ours**); when
  the trace gives ``job.memory_mb`` the line is anchored so that ``mem_j(B_j) = job.memory_mb``;
  otherwise the reference memory comes from per-model defaults (the SJF-BSBF authors' figures for
  the Tiresias/Muri models; estimates **(ours)** for the others).
- ``ξ`` (MODEL.md §2): each job maps to a Gavel job type — its family at the measured batch size
  nearest (in log) to its sub-batch — and ``ξ = isolated steps/s ÷ co-located steps/s`` of that
  measured single-V100 pair. Pairs never measured use the table's fitted :class:`SlowdownPredictor`
  ``ln ξ_{a|b} = μ + s_a + g_b + h_{F(a),F(b)}`` (**ours**); a job of unknown family gets the table's
  conservative default for both jobs of the pair. ξ is a per-GPU figure: the same whatever the gang size.

All queries are memoised in plain dicts keyed by ``(model, batch, sub-batch)``-like tuples, so
policies can call them in hot loops: O(1) after the first call for a key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduling.core.types import Job

UNKNOWN_FAMILY = "unknown"
"""Family of a model the mapping does not know: flat step time at every sub-batch, the fallback
memory entry, the conservative slowdown."""

_GAVEL_TYPE = re.compile(r"^(?P<family>.+?) \(batch size (?P<batch>\d+)\)$")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


class ProfileError(ValueError):
    """A profile table is malformed, or a query names something the table cannot answer."""


def normalise_model_name(name: str) -> str:
    """Lower-case ``name`` and drop every character that is not a letter or digit.

    ``"ResNet-18"``, ``"resnet_18"`` and ``"ResNet18"`` all become ``"resnet18"``.
    """
    return _NON_ALNUM.sub("", name.lower())


def split_gavel_job_type(job_type: str) -> tuple[str, int | None]:
    """``"ResNet-50 (batch size 64)"`` → ``("ResNet-50", 64)``; ``"A3C"`` → ``("A3C", None)``."""
    match = _GAVEL_TYPE.match(job_type.strip())
    if match is None:
        return job_type.strip(), None
    return match["family"], int(match["batch"])


def gavel_job_type(family: str, batch: int | None) -> str:
    """Inverse of :func:`split_gavel_job_type`: Gavel's key for ``family`` at ``batch``."""
    return family if batch is None else f"{family} (batch size {batch})"


def _require(table: Mapping[str, Any], key: str) -> Any:
    try:
        return table[key]
    except (KeyError, TypeError):
        raise ProfileError(f"profile table has no '{key}' section") from None


class TableProfile:
    """The :class:`~scheduling.core.types.Profile` of a shipped table (see module docstring).

    ``table`` is the dict written by ``scheduling.profiles.import_gavel`` (format
    ``sharewise-profile/1``). Raises :class:`ProfileError` when a required section is missing or
    malformed. The memo dicts only ever gain entries that are pure functions of their keys, so
    sharing an instance between threads is safe (two threads may compute the same entry twice).
    """

    def __init__(self, table: Mapping[str, Any]) -> None:
        if not isinstance(table, Mapping):
            raise ProfileError(f"profile table must be a JSON object, got {type(table).__name__}")
        fmt = table.get("format")
        if fmt != "sharewise-profile/1":
            raise ProfileError(f"unsupported profile format {fmt!r} (expected 'sharewise-profile/1')")
        try:
            self.gpu_type: str = str(_require(table, "gpu_type"))
            self.source: dict[str, Any] = dict(table.get("source", {}))
            self._isolated: dict[str, dict[int, float]] = {
                job_type: {int(n): float(v) for n, v in by_gpus.items()}
                for job_type, by_gpus in _require(table, "isolated_steps_per_s").items()
            }
            self._curves: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}  # batches, samples/s
            for family, curve in _require(table, "families").items():
                batches = [int(b) for b in curve["batches"]]
                sps = [float(s) for s in curve["samples_per_s"]]
                if len(batches) != len(sps) or batches != sorted(set(batches)) or min(sps, default=1) <= 0:
                    raise ProfileError(
                        f"family {family!r}: batches must be increasing, one positive samples/s each"
                    )
                self._curves[family] = (tuple(batches), tuple(sps))
            self._measured: dict[str, dict[str, float]] = {
                a: {b: float(x) for b, x in row.items()} for a, row in _require(table, "slowdowns").items()
            }
            self.predictor = SlowdownPredictor.from_table(_require(table, "predictor"))
            self.conservative_slowdown = float(_require(table, "conservative_slowdown"))
            if not self.conservative_slowdown >= 1.0:
                raise ProfileError(f"conservative_slowdown must be ≥ 1, got {self.conservative_slowdown}")
            self._families = {
                normalise_model_name(k): str(v) for k, v in _require(table, "model_families").items()
            }
            memory = _require(table, "memory")
            self._mem_models = {
                normalise_model_name(k): _memory_entry(v) for k, v in memory["models"].items()
            }
            self._mem_families = {k: _memory_entry(v) for k, v in memory["families"].items()}
            self._mem_fallback = _memory_entry(memory["fallback"])
        except ProfileError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProfileError(f"malformed profile table: {exc!r}") from None
        self._family_memo: dict[str, str] = {}
        self._type_memo: dict[tuple[str, int], str | None] = {}
        self._ratio_memo: dict[tuple[str, int, int], float] = {}
        self._memory_memo: dict[tuple[str, int, int, float | None], float] = {}
        self._subs_memo: dict[tuple[int, int], tuple[int, ...]] = {}
        self._slowdown_memo: dict[tuple[str, int, str, int], tuple[float, float]] = {}

    # ----------------------------------------------------------------- mapping
    def family_of(self, model_name: str) -> str:
        """The measured family (``"ResNet-50"``, ``"A3C"``…) a trace's model name maps to.

        Accepts trace names (``vgg16``, ``shufflenet_v2_x1_0``…, matched after
        :func:`normalise_model_name`) and Gavel job types (``"ResNet-50 (batch size 64)"``).
        An unknown name gives :data:`UNKNOWN_FAMILY`, never an error.
        """
        family = self._family_memo.get(model_name)
        if family is None:
            gavel_family, _ = split_gavel_job_type(model_name)
            if gavel_family in self._curves:
                family = gavel_family
            else:
                family = self._families.get(normalise_model_name(gavel_family), UNKNOWN_FAMILY)
            self._family_memo[model_name] = family
        return family

    def job_type_for(self, model_name: str, batch: int) -> str | None:
        """The measured Gavel job type used for ``model_name`` running micro-batches of ``batch``.

        The family's measured batch size nearest to ``batch`` in log scale (the smaller on a tie);
        ``None`` for an unknown family.
        """
        key = (model_name, batch)
        if key in self._type_memo:
            return self._type_memo[key]
        family = self.family_of(model_name)
        job_type: str | None = None
        if family in self._curves:
            batches = self._curves[family][0]
            if not batches:
                job_type = family
            else:
                target = math.log(max(batch, 1))
                # rounded so that an exact tie in log (32 between 16 and 64) is a tie despite float error
                nearest = min(batches, key=lambda m: (round(abs(math.log(m) - target), 9), m))
                job_type = gavel_job_type(family, nearest)
        self._type_memo[key] = job_type
        return job_type

    # --------------------------------------------------------------- Profile API
    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)`` (s): ``job.iter_time_s × sps(B_j) / sps(b)`` of the job's family.

        ``b == B_j`` returns exactly ``job.iter_time_s``. Raises :class:`ProfileError` for
        ``sub_batch < 1``.
        """
        key = (job.model, job.batch_size, sub_batch)
        ratio = self._ratio_memo.get(key)
        if ratio is None:
            ratio = self._speed_ratio(job.model, job.batch_size, sub_batch)
            self._ratio_memo[key] = ratio
        return job.iter_time_s * ratio

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b) = static_j + per_sample_j · b`` (MB per GPU), anchored on ``job.memory_mb``.

        Raises :class:`ProfileError` for ``sub_batch < 1`` or a non-positive ``job.memory_mb``.
        """
        key = (job.model, job.batch_size, sub_batch, job.memory_mb)
        mem = self._memory_memo.get(key)
        if mem is None:
            static, per_sample = self.memory_model(job.model, job.batch_size, job.memory_mb)
            if sub_batch < 1:
                raise ProfileError(f"sub-batch must be at least 1, got {sub_batch}")
            mem = static + per_sample * sub_batch
            self._memory_memo[key] = mem
        return mem

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """``(B_j, …)``: ``B_j`` first, then the powers of two below it that divide ``B_j`` and are
        ``≥ min_sub_batch``, largest first (MODEL.md §2, sub-batch choice)."""
        key = (job.batch_size, min_sub_batch)
        subs = self._subs_memo.get(key)
        if subs is None:
            subs = sub_batch_sizes(job.batch_size, min_sub_batch)
            self._subs_memo[key] = subs
        return subs

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ_a, ξ_b)`` (≥ 1) when ``a`` at ``sub_a`` and ``b`` at ``sub_b`` share a GPU.

        Measured pair if any, else the fitted predictor, else (unknown family)
        ``(conservative_slowdown, conservative_slowdown)``.
        """
        key = (a.model, sub_a, b.model, sub_b)
        pair = self._slowdown_memo.get(key)
        if pair is None:
            pair = self.type_slowdown(self.job_type_for(a.model, sub_a), self.job_type_for(b.model, sub_b))
            self._slowdown_memo[key] = pair
        return pair

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        """Where ``ξ_a`` of :meth:`slowdown` comes from: ``"measured"`` (the pair was measured),
        ``"predicted"`` (the fitted predictor), ``"default"`` (the conservative guess: a job of
        unknown family, or a type the predictor was not fitted on)."""
        type_a, type_b = self.job_type_for(a.model, sub_a), self.job_type_for(b.model, sub_b)
        if type_a is None or type_b is None:
            return "default"
        if (
            self.measured_slowdown(type_a, type_b) is not None
            and self.measured_slowdown(type_b, type_a) is not None
        ):
            return "measured"
        if self.predictor.predict(type_a, type_b) is None:
            return "default"
        return "predicted"

    def memory_known(self, job: Job) -> bool:
        """Whether ``job``'s memory is declared (``job.memory_mb``) or in the table for its model
        or family — not the fallback guess."""
        if job.memory_mb is not None:
            return True
        name = job.model
        return (
            split_gavel_job_type(name)[0] in self._mem_families
            or normalise_model_name(name) in self._mem_models
            or self.family_of(name) in self._mem_families
        )

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """True unless (and ``unknown_ok`` is False) either ``ξ`` is the guessed default
        (:meth:`slowdown_source`); the shipped table knows no incompatible pair."""
        return unknown_ok or (
            self.slowdown_source(a, sub_a, b, sub_b) != "default"
            and self.slowdown_source(b, sub_b, a, sub_a) != "default"
        )

    # ------------------------------------------------------------- the details
    def type_slowdown(self, type_a: str | None, type_b: str | None) -> tuple[float, float]:
        """``(ξ_a, ξ_b)`` for two Gavel job types (``None``: unknown family → conservative)."""
        if type_a is None or type_b is None:
            return self.conservative_slowdown, self.conservative_slowdown
        xi_a = self.measured_slowdown(type_a, type_b)
        xi_b = self.measured_slowdown(type_b, type_a)
        if xi_a is None or xi_b is None:
            return self.predicted_slowdown(type_a, type_b), self.predicted_slowdown(type_b, type_a)
        return xi_a, xi_b

    def measured_slowdown(self, type_a: str, type_b: str) -> float | None:
        """Measured ``ξ`` of ``type_a`` co-located with ``type_b``, or ``None`` if never measured."""
        return self._measured.get(type_a, {}).get(type_b)

    def predicted_slowdown(self, type_a: str, type_b: str) -> float:
        """The predictor's ``ξ_{a|b}``; the conservative default for a job type it was not fitted on."""
        xi = self.predictor.predict(type_a, type_b)
        return self.conservative_slowdown if xi is None else xi

    def isolated_throughput(self, job_type: str, num_gpus: int) -> float:
        """Isolated throughput (steps/s) of a Gavel job type on ``num_gpus`` V100s.

        Measured value when Gavel has it; otherwise **(ours)** the measurement at the largest
        measured GPU count ``m ≤ num_gpus`` (or the smallest measured one) scaled linearly by
        ``num_gpus / m``. Raises :class:`ProfileError` for an unknown job type or ``num_gpus < 1``.
        """
        by_gpus = self._isolated.get(job_type.strip())
        if by_gpus is None:
            raise ProfileError(
                f"unknown Gavel job type {job_type!r}; known: {', '.join(sorted(self._isolated))}"
            )
        if num_gpus < 1:
            raise ProfileError(f"a job needs at least one GPU, got {num_gpus}")
        if num_gpus in by_gpus:
            return by_gpus[num_gpus]
        below = [m for m in by_gpus if m <= num_gpus]
        m = max(below) if below else min(by_gpus)
        return by_gpus[m] * num_gpus / m

    def job_types(self) -> tuple[str, ...]:
        """Every Gavel job type with an isolated throughput in the table, sorted."""
        return tuple(sorted(self._isolated))

    def memory_model(
        self, model_name: str, batch: int, memory_mb: float | None = None
    ) -> tuple[float, float]:
        """``(static_mb, per_sample_mb)`` of ``model_name`` at global batch ``batch``.

        With ``memory_mb`` (the trace's memory at ``batch``): ``static = (1−f)·memory_mb``,
        ``per_sample = f·memory_mb / batch``. Without: the same from the reference memory at the
        reference batch of, in order, the Gavel family spelt exactly (``"ResNet-50"``), the model
        (``"vgg16"``), the model's family, or the fallback (whose reference batch is the job's own
        batch). ``f`` comes from the same entry. Raises :class:`ProfileError` for ``batch < 1`` or
        a non-positive ``memory_mb``.
        """
        if batch < 1:
            raise ProfileError(f"batch size must be at least 1, got {batch}")
        if memory_mb is not None and not memory_mb > 0:  # also rejects NaN
            raise ProfileError(f"a job's memory must be a positive number of MB, got {memory_mb}")
        # A Gavel family name spelt exactly ("ResNet-18", Gavel's CIFAR-10 model) is not the trace
        # model "resnet18" (ImageNet, the SJF-BSBF figure): exact family names are matched first.
        entry = self._mem_families.get(split_gavel_job_type(model_name)[0])
        if entry is None:
            entry = self._mem_models.get(normalise_model_name(model_name))
        if entry is None:
            entry = self._mem_families.get(self.family_of(model_name))
        ref_batch: float
        if entry is None:
            ref_batch, ref_mb, fraction = float(batch), self._mem_fallback[1], self._mem_fallback[2]
        else:
            ref_batch, ref_mb, fraction = entry
        if memory_mb is not None:
            ref_batch, ref_mb = float(batch), float(memory_mb)
        return (1.0 - fraction) * ref_mb, fraction * ref_mb / ref_batch

    def _speed_ratio(self, model_name: str, batch: int, sub_batch: int) -> float:
        if sub_batch < 1 or batch < 1:
            raise ProfileError(f"batch and sub-batch must be at least 1, got {batch} and {sub_batch}")
        if sub_batch == batch:
            return 1.0
        curve = self._curves.get(self.family_of(model_name), ((), ()))
        return samples_per_s(curve, batch) / samples_per_s(curve, sub_batch)


@dataclass(frozen=True, slots=True)
class SlowdownPredictor:
    """Predicted slowdown of job type ``a`` co-located with ``b`` on one GPU (**ours**)::

        ln ξ_{a|b} = μ + s_a + g_b + h_{F(a),F(b)},    ξ = max(1, exp(…))

    ``s_a`` (``sensitivity``): how much job type ``a`` suffers from sharing; ``g_b``
    (``intensity``): how much ``b`` hurts its partner; ``h`` (``interaction``, nested
    ``{family_a: {family_b: h}}``): the extra of that pair of families (``F`` = the Gavel family,
    e.g. ``"ResNet-50"`` for ``"ResNet-50 (batch size 64)"``). Fitted by ridge least squares on
    measured pairs (``scheduling.profiles.import_gavel``); a missing ``h`` counts as 0.
    """

    mu: float
    sensitivity: Mapping[str, float]
    intensity: Mapping[str, float]
    interaction: Mapping[str, Mapping[str, float]]

    @classmethod
    def from_table(cls, raw: Mapping[str, Any]) -> SlowdownPredictor:
        """From the table's ``predictor`` section. Raises ``KeyError``/``ValueError`` if malformed."""
        return cls(
            float(raw["mu"]),
            {k: float(v) for k, v in raw["sensitivity"].items()},
            {k: float(v) for k, v in raw["intensity"].items()},
            {fa: {fb: float(v) for fb, v in row.items()} for fa, row in raw.get("interaction", {}).items()},
        )

    def predict(self, type_a: str, type_b: str) -> float | None:
        """``ξ_{a|b}`` (≥ 1) for two Gavel job types, or ``None`` if either was never fitted."""
        s_a = self.sensitivity.get(type_a)
        g_b = self.intensity.get(type_b)
        if s_a is None or g_b is None:
            return None
        fam_a, fam_b = split_gavel_job_type(type_a)[0], split_gavel_job_type(type_b)[0]
        h = self.interaction.get(fam_a, {}).get(fam_b, 0.0)
        return max(1.0, math.exp(self.mu + s_a + g_b + h))


def _memory_entry(raw: Mapping[str, Any]) -> tuple[float, float, float]:
    """``(reference batch, MB at that batch, activation fraction)`` from a table entry."""
    batch = float(raw.get("batch", 1))
    mb = float(raw["memory_mb"])
    fraction = float(raw["activation_fraction"])
    if batch <= 0 or mb <= 0 or not 0.0 <= fraction <= 1.0:
        raise ProfileError(f"bad memory entry {dict(raw)!r}: need batch > 0, memory_mb > 0, 0 ≤ fraction ≤ 1")
    return batch, mb, fraction


def samples_per_s(curve: tuple[tuple[float, ...], tuple[float, ...]], batch: float) -> float:
    """Samples/s at ``batch`` from a measured ``(batches, samples/s)`` curve (increasing batches).

    Piecewise linear in (log batch, log samples/s) between measured points; below the first point
    step time is flat (``sps ∝ batch``), above the last samples/s is flat (**ours**). An empty curve
    (a family measured at no batch size, or an unknown one) is treated as flat step time:
    ``sps = batch`` (only ratios of this function are meaningful).
    """
    batches, sps = curve
    if not batches:
        return float(batch)
    if batch <= batches[0]:
        return sps[0] * batch / batches[0]
    if batch >= batches[-1]:
        return sps[-1]
    for i in range(1, len(batches)):
        if batch <= batches[i]:
            lo, hi = batches[i - 1], batches[i]
            w = (math.log(batch) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return math.exp((1.0 - w) * math.log(sps[i - 1]) + w * math.log(sps[i]))
    raise AssertionError("unreachable: batch is within the curve")  # pragma: no cover


def sub_batch_sizes(batch: int, min_sub_batch: int = 1) -> tuple[int, ...]:
    """``batch`` first, then the powers of two ``p < batch`` with ``batch % p == 0`` and
    ``p ≥ min_sub_batch``, in decreasing order. ``sub_batch_sizes(12) == (12, 4, 2, 1)``.

    Raises :class:`ProfileError` for ``batch < 1``.
    """
    if batch < 1:
        raise ProfileError(f"batch size must be at least 1, got {batch}")
    sizes = [batch]
    p = 1
    while p * 2 < batch and batch % (p * 2) == 0:
        p *= 2
    while p >= max(1, min_sub_batch):
        if p < batch:
            sizes.append(p)
        p //= 2
    return tuple(sizes)
