"""The baselines' settings of the service (docs/FIDELITY.md): ``SHAREWISE_PLACEMENT`` and the
``SHAREWISE_TIRESIAS_*`` knobs reach every round's ``SchedulerConfig``; bad values are
``ImproperlyConfigured``."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from scheduling import service
from scheduling.core import types as core


def test_defaults_are_ours() -> None:
    config = service.scheduler_config()
    assert config.placement == "spread"
    assert config.tiresias == core.TiresiasConfig()  # 3,200 GPU-s, guard on x 1.0, demoted ahead


def test_the_sjfbsbf_authors_tiresias_from_settings() -> None:
    with override_settings(
        SHAREWISE_PLACEMENT="consolidated",
        SHAREWISE_TIRESIAS_THRESHOLDS=[700.0],
        SHAREWISE_TIRESIAS_SERVICE="wall_s",
        SHAREWISE_TIRESIAS_STARVATION_GUARD=True,
        SHAREWISE_TIRESIAS_STARVATION_FACTOR=1.0,
        SHAREWISE_TIRESIAS_DEMOTED="back",
    ):
        config = service.scheduler_config()
    assert config.placement == "consolidated"
    assert config.tiresias == core.TiresiasConfig((700.0,), "wall_s", True, 1.0, "back")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SHAREWISE_PLACEMENT", "packed"),
        ("SHAREWISE_TIRESIAS_THRESHOLDS", [700.0, 100.0]),
        ("SHAREWISE_TIRESIAS_SERVICE", "gpu_h"),
        ("SHAREWISE_TIRESIAS_STARVATION_FACTOR", 0.0),
        ("SHAREWISE_TIRESIAS_DEMOTED", "front"),
    ],
)
def test_bad_values_are_improperly_configured(name: str, value: object) -> None:
    with override_settings(**{name: value}), pytest.raises(ImproperlyConfigured):
        service.scheduler_config()


def test_fair_switches_from_settings() -> None:
    # docs/FAIRNESS.md §6: on by default; each SHAREWISE_* turns its SchedulerConfig field off
    assert service.scheduler_config().colocation_guard and service.scheduler_config().split_charge
    with override_settings(SHAREWISE_COLOCATION_GUARD=False, SHAREWISE_RECLAIM_COLOCATED=False):
        config = service.scheduler_config()
    assert (
        config.split_charge,
        config.colocation_guard,
        config.reclaim_colocated,
        config.priority_preemption,
    ) == (
        True,
        False,
        False,
        True,
    )
