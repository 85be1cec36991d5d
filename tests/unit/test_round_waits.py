"""The packed wait decisions of a recorded round (scheduling/round_waits.py): packing keeps the
order and each distinct reason once, and the readers take old rows (waits as dicts in
``decisions``) and new rows (``waits`` packed) alike."""

from __future__ import annotations

from scheduling.round_waits import EMPTY, decision_list, pack_waits, unpack_waits, wait_decisions, wait_entry

START = {
    "job_id": 4,
    "action": "start",
    "gpu_ids": [11],
    "gpus": ["node-00:0"],
    "sub_batch": 32,
    "accum_steps": 2,
    "shares": [],
    "reason": "fits alone",
}


def test_packing_keeps_the_order_and_stores_each_reason_once() -> None:
    waits = [(5, "needs 4 GPUs, 2 idle"), (3, "over quota"), (9, "needs 4 GPUs, 2 idle"), (1, "over quota")]
    packed = pack_waits(waits)
    assert packed == {
        "job_ids": [5, 3, 9, 1],
        "reasons": ["needs 4 GPUs, 2 idle", "over quota"],
        "reason_ids": [0, 1, 0, 1],
    }
    assert unpack_waits(packed) == waits


def test_nothing_packed_reads_as_no_wait() -> None:
    assert pack_waits([]) == EMPTY
    assert unpack_waits(EMPTY) == unpack_waits({}) == unpack_waits(None) == []


def test_an_old_row_and_a_new_row_of_the_same_round_read_alike() -> None:
    """Old rows (before Round.waits) hold every decision as a dict; new ones the starts as dicts
    and the waits packed: the waits and the whole list read the same from both."""
    waits = [(5, "needs 4 GPUs, 2 idle"), (3, "over quota")]
    old = [START, *(wait_entry(j, r) for j, r in waits)]
    assert wait_decisions(old, {}) == wait_decisions([START], pack_waits(waits)) == waits
    assert decision_list(old, {}) == decision_list([START], pack_waits(waits)) == old
    assert wait_entry(5, "r") == {
        "job_id": 5,
        "action": "wait",
        "gpu_ids": [],
        "gpus": [],
        "sub_batch": None,
        "accum_steps": None,
        "shares": [],
        "reason": "r",
    }


def test_a_hand_written_row_missing_optional_keys_still_reads() -> None:
    """The dashboard's tests and older code wrote wait dicts with only job id, action and reason
    (or no reason at all)."""
    assert wait_decisions(
        [{"job_id": 7, "action": "wait"}, {"job_id": 8, "action": "wait", "reason": "x"}], None
    ) == [
        (7, ""),
        (8, "x"),
    ]
