"""Trace loaders: unit conversions checked by hand, bad rows counted, and the real public traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.limits import MAX_BATCH_SIZE, MAX_ITERATIONS, MAX_TRACE_TIME_S
from scheduling.sim.loaders import (
    CHRONUS_BATCH_SIZE,
    REASON_BATCH_TOO_LARGE,
    REASON_ITERATION_TOO_LONG,
    REASON_MALFORMED,
    REASON_NEGATIVE_GPUS,
    REASON_NO_ITERATIONS,
    REASON_NO_THROUGHPUT,
    REASON_RUN_TOO_LONG,
    REASON_SUBMIT_TOO_LATE,
    REASON_TOO_MANY_GPUS,
    REASON_TOO_MANY_ITERATIONS,
    REASON_ZERO_GPUS,
    TraceError,
    TraceNotFoundError,
    UnknownTraceFormatError,
    detect_format,
    load_traces,
    parse_gavel_job_type,
)

TIRESIAS_HEADER = (
    "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,"
    "iteration_time,resource_time_0,resource_time_1,resource_time_2,priority\n"
)
CHRONUS_HEADER = (
    "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
    "expect_time_list,expect_value_list,best_effort,job_type\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_tiresias_csv_converts_milliseconds(tmp_path: Path) -> None:
    # Row 1: submit 2020 ms = 2.02 s; 226 ms per iteration = 0.226 s; 2836 it -> 640.936 s.
    # Row 2 is submitted earlier (6.18 s vs 31.876 s) but listed later: output is sorted.
    path = write(
        tmp_path,
        "t.csv",
        TIRESIAS_HEADER
        + "35,1,31876,3723,shufflenet_v2_x1_0,128,5794000,535000,798,706.0,59,0.0,0\n"
        + "3,8,2020,2836,vgg19,16,165835000,15000,226,82.0,88,60.0,1\n"
        + "33,2,6180,294,a2c,64,162000,16000,555,502.0,14,0.4,0\n",
    )
    trace = load_traces(path)
    assert trace.formats == ("tiresias",)
    assert [j.id for j in trace.jobs] == [3, 33, 35]
    a = trace.jobs[0]
    assert (a.gpus, a.iterations, a.model, a.batch_size) == (8, 2836, "vgg19", 16)
    assert (a.tenant, a.priority) == ("default", 1)
    assert a.submit_time == pytest.approx(2.02)
    assert a.iter_time_s == pytest.approx(0.226)
    assert a.remaining_time_s == pytest.approx(640.936)
    assert a.memory_mb is None
    assert trace.jobs[2].submit_time == pytest.approx(31.876)
    assert trace.rejected == {} and trace.rows == 3


def test_chronus_csv_is_in_seconds_with_user_as_tenant(tmp_path: Path) -> None:
    # 747 s / 5049 it = 0.147950 s per iteration; submit 8555 s as is.
    path = write(
        tmp_path,
        "c.csv",
        CHRONUS_HEADER
        + "0,vc_6214e9,1,8555,5049,vgg16,747,14,1105,10,0,strict\n"
        + "1,vc_ed69ec,4,832,296,mobilenet_v2,98,8,128,10,0,strict\n",
    )
    trace = load_traces(path)
    assert trace.formats == ("chronus",)
    first, second = trace.jobs  # sorted by submit time: job 1 (832 s) first
    assert (first.id, first.tenant, first.gpus, first.submit_time) == (1, "vc_ed69ec", 4, 832.0)
    assert second.iter_time_s == pytest.approx(747 / 5049)
    assert second.remaining_time_s == pytest.approx(747.0)
    assert second.batch_size == CHRONUS_BATCH_SIZE
    assert trace.tenants == ("vc_6214e9", "vc_ed69ec")


def gavel_line(job_type: str, steps: int, arrival: float, gpus: int) -> str:
    return f"{job_type}\tcd x && python3 train.py\t-n\t1\t{steps}\t{arrival:f}\t{gpus}\n"


def fake_throughput(job_type: str, gpus: int) -> float:
    table = {("ResNet-50 (batch size 64)", 1): 4.0, ("A3C", 2): 0.5}
    return table[(job_type, gpus)]


def test_gavel_tsv_run_time_is_steps_over_throughput(tmp_path: Path) -> None:
    # 1000 steps at 4 steps/s -> iter 0.25 s, 250 s in all; A3C: 30 steps at 0.5/s -> 2 s each.
    folder = tmp_path / "vc"
    folder.mkdir()
    write(folder, "aaa111.trace", gavel_line("ResNet-50 (batch size 64)", 1000, 6.0, 1))
    write(
        folder,
        "bbb222.trace",
        gavel_line("A3C", 30, 0.0, 2) + gavel_line("Unknown (batch size 4)", 9, 1.0, 1),
    )
    trace = load_traces(folder, throughput=fake_throughput)
    assert trace.formats == ("gavel",)
    a3c, resnet = trace.jobs  # A3C arrives at 0 s, ResNet-50 at 6 s
    assert (resnet.tenant, resnet.model, resnet.batch_size, resnet.gpus) == ("aaa111", "ResNet-50", 64, 1)
    assert resnet.iter_time_s == pytest.approx(0.25)
    assert resnet.remaining_time_s == pytest.approx(250.0)
    assert (a3c.tenant, a3c.model, a3c.batch_size, a3c.iter_time_s) == ("bbb222", "A3C", 1, 2.0)
    assert trace.rejected == {REASON_NO_THROUGHPUT: 1}
    assert len({j.id for j in trace.jobs}) == 2


def test_gavel_needs_a_throughput_table(tmp_path: Path) -> None:
    path = write(tmp_path, "x.trace", gavel_line("A3C", 30, 0.0, 2))
    with pytest.raises(TraceError, match="throughput"):
        load_traces(path)


def test_parse_gavel_job_type() -> None:
    assert parse_gavel_job_type("LM (batch size 80)") == ("LM", 80)
    assert parse_gavel_job_type("CycleGAN") == ("CycleGAN", 1)


def test_bad_rows_are_counted_with_reasons(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.csv",
        CHRONUS_HEADER
        + "0,vc_a,0,10,100,vgg16,50,1,1,1,0,strict\n"  # 0 GPUs
        + "1,vc_a,0,11,100,vgg16,50,1,1,1,0,strict\n"  # 0 GPUs
        + "2,vc_a,64,12,100,vgg16,50,1,1,1,0,strict\n"  # more than the 32 GPUs
        + "3,vc_a,1,13,0,vgg16,50,1,1,1,0,strict\n"  # no iterations
        + "4,vc_a,one,14,100,vgg16,50,1,1,1,0,strict\n"  # not a number
        + "5,vc_b,2,15,100,vgg16,50,1,1,1,0,strict\n"  # fine
        + "6,vc_b,-4,16,100,vgg16,50,1,1,1,0,strict\n",
    )  # negative GPU count
    trace = load_traces(path, max_gpus=32)
    assert [j.id for j in trace.jobs] == [5]
    assert trace.rejected == {
        REASON_ZERO_GPUS: 2,
        REASON_TOO_MANY_GPUS: 1,
        REASON_NO_ITERATIONS: 1,
        REASON_MALFORMED: 1,
        REASON_NEGATIVE_GPUS: 1,
    }
    assert REASON_NEGATIVE_GPUS == "asks for a negative number of GPUs"
    assert trace.rows == 7


def test_chronus_rows_beyond_the_bounds_are_rejected(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "c.csv",
        CHRONUS_HEADER
        + "0,vc_a,1,8555,5049,vgg16,747,14,1105,10,0,strict\n"  # fine
        + "1,vc_b,1,832,296,mobilenet_v2,1e308,8,128,10,0,strict\n"  # run 1e308 s
        + "2,vc_b,1,832,296,mobilenet_v2,1e160,8,128,10,0,strict\n"  # run 1e160 s
        + "3,vc_b,1,1e300,296,mobilenet_v2,98,8,128,10,0,strict\n"  # submitted at 1e300 s
        + "4,vc_b,1,832,1e30,mobilenet_v2,98,8,128,10,0,strict\n"  # 1e30 iterations
        + "5,vc_b,1,832,1,mobilenet_v2,86401,8,128,10,0,strict\n"  # one iteration of 86401 s
        + f"6,vc_b,1,{MAX_TRACE_TIME_S:.0f},1,mobilenet_v2,86400,8,128,10,0,strict\n"  # at the bounds
        + "7,vc_b,100001,832,296,mobilenet_v2,98,8,128,10,0,strict\n",  # more GPUs than any cluster
    )
    trace = load_traces(path)
    assert [j.id for j in trace.jobs] == [0, 6]
    assert trace.rejected == {
        REASON_RUN_TOO_LONG: 2,
        REASON_SUBMIT_TOO_LATE: 1,
        REASON_TOO_MANY_ITERATIONS: 1,
        REASON_ITERATION_TOO_LONG: 1,
        REASON_TOO_MANY_GPUS: 1,
    }
    assert REASON_RUN_TOO_LONG == "run time above ten years, 315,360,000 s"
    assert trace.jobs[1].iter_time_s == 86400.0
    assert trace.jobs[1].submit_time == 315_360_000.0


def test_tiresias_rows_beyond_the_api_bounds_are_rejected(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "t.csv",
        TIRESIAS_HEADER
        + "1,1,0,10,dqn,128,0,0,1e200,0,0,0,0\n"  # 1e197 s per iteration
        + "2,1,1e300,10,dqn,128,0,0,490,0,0,0,0\n"  # submitted at 1e297 s
        + "3,1,0,1e30,dqn,128,0,0,490,0,0,0,0\n"  # 1e30 iterations
        + "4,1,0,10,dqn,1e20,0,0,490,0,0,0,0\n"  # batch of 1e20 samples
        + f"5,1,0,10,dqn,{MAX_BATCH_SIZE + 1},0,0,490,0,0,0,0\n"
        + f"6,1,0,{MAX_ITERATIONS + 1},dqn,128,0,0,1,0,0,0,0\n"
        + f"7,1,0,{MAX_ITERATIONS},dqn,{MAX_BATCH_SIZE},0,0,1,0,0,0,0\n",  # at the bounds
    )
    trace = load_traces(path)
    assert [j.id for j in trace.jobs] == [7]
    assert (trace.jobs[0].iterations, trace.jobs[0].batch_size) == (100_000_000, 1_048_576)
    assert trace.rejected == {
        REASON_RUN_TOO_LONG: 1,
        REASON_SUBMIT_TOO_LATE: 1,
        REASON_TOO_MANY_ITERATIONS: 2,
        REASON_BATCH_TOO_LARGE: 2,
    }


def test_short_rows_are_malformed_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "t.csv", TIRESIAS_HEADER + "1,1,0,10\n" + "2,1,0,10,dqn,128,0,0,490,0,0,0,1\n")
    with caplog.at_level("INFO", logger="scheduling.sim.loaders"):
        trace = load_traces(path)
    assert [j.id for j in trace.jobs] == [2]
    assert trace.rejected == {REASON_MALFORMED: 1}
    # the columns it lacks are named, not Python's "float() argument must be ... not 'NoneType'"
    assert (
        "rejected t.csv:2: malformed row (missing column(s) model_name, batch_size, iteration_time: "
        "4 of 13 fields given)"
    ) in caplog.messages


def test_a_row_without_the_optional_last_columns_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", TIRESIAS_HEADER + "2,1,0,10,dqn,128,0,0,490\n")
    trace = load_traces(path)
    assert [(j.id, j.priority) for j in trace.jobs] == [(2, 0)]
    assert trace.rejected == {}


def test_only_bad_rows_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", CHRONUS_HEADER + "0,vc_a,0,10,100,vgg16,50,1,1,1,0,strict\n")
    with pytest.raises(TraceError, match="no usable job"):
        load_traces(path)


def test_merging_traces_renumbers_clashing_ids(tmp_path: Path) -> None:
    row = "0,1,1000,10,dqn,128,0,0,490,0,0,0,1\n"
    a = write(tmp_path, "a.csv", TIRESIAS_HEADER + row)
    b = write(tmp_path, "b.csv", TIRESIAS_HEADER + row)
    trace = load_traces([a, b])
    assert sorted(j.id for j in trace.jobs) == [0, 1]
    assert trace.name == "a.csv+b.csv"


def test_missing_and_unknown_inputs(tmp_path: Path) -> None:
    with pytest.raises(TraceNotFoundError, match="not found"):
        load_traces(tmp_path / "nope.csv")
    odd = write(tmp_path, "odd.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(UnknownTraceFormatError, match="unknown trace format"):
        detect_format(odd)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(UnknownTraceFormatError):
        load_traces(binary)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="no Gavel"):
        load_traces(empty, throughput=fake_throughput)


@pytest.mark.shared_data
@pytest.mark.parametrize(
    ("name", "rows"),
    [
        ("sjfbsbf-testbed-61.csv", 61),
        ("muri-testbed-400.csv", 400),
        ("muri-sim-trace1.csv", 1494),
        ("muri-sim-trace3.csv", 992),
        ("muri-sim-trace4.csv", 2638),
    ],
)
def test_real_tiresias_traces(shared_data: Path, name: str, rows: int) -> None:
    trace = load_traces(shared_data / "traces" / name)
    assert (trace.rows, len(trace.jobs), trace.rejected) == (rows, rows, {})


@pytest.mark.shared_data
def test_real_sjfbsbf_trace_first_job(shared_data: Path) -> None:
    # README: arrivals within the first 600 s; job 3 (first row): 2836 it x 226 ms, submitted at 2020 ms.
    trace = load_traces(shared_data / "traces" / "sjfbsbf-testbed-61.csv")
    assert max(j.submit_time for j in trace.jobs) <= 600.0
    job3 = next(j for j in trace.jobs if j.id == 3)
    assert (job3.submit_time, job3.remaining_time_s) == (pytest.approx(2.02), pytest.approx(2836 * 0.226))


@pytest.mark.shared_data
def test_real_chronus_trace(shared_data: Path) -> None:
    # README: 30,940 rows, 11 tenants, submit times 1-20,151 s, a few rows ask for 0 GPUs.
    trace = load_traces(shared_data / "traces" / "chronus-philly-mix1.csv", max_gpus=32)
    assert trace.rows == 30_940
    assert trace.rejected.keys() == {REASON_ZERO_GPUS}
    assert len(trace.jobs) + trace.rejected[REASON_ZERO_GPUS] == 30_940
    assert len(trace.tenants) == 11
    assert (trace.jobs[0].submit_time, trace.jobs[-1].submit_time) == (1.0, 20_151.0)


@pytest.mark.shared_data
def test_real_gavel_folder(shared_data: Path) -> None:
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    trace = load_traces(shared_data / "traces" / "philly-vc", throughput=profile.isolated_throughput)
    assert trace.rows == 15_264
    assert len(trace.tenants) == 15
    assert len(trace.jobs) + sum(trace.rejected.values()) == 15_264
    assert len({j.id for j in trace.jobs}) == len(trace.jobs)
