"""Count the instructions of one SJF-BSBF decision, cold and warm, with valgrind's callgrind.

On a machine shared with other work a decision's time moves by tens of per cent, far more than
the changes being compared; the number of instructions executed does not move with the load
(``PYTHONHASHSEED=0`` fixes the only other source of variation, set and dictionary order).
The scenario is ``bench_decision.py``'s (10,000 pending × 4,096 GPUs, the default profile, explain
off), decided with the cyclic garbage collector off. Three runs under ``valgrind --tool=callgrind``:
the set-up alone, set-up plus one cold decision (a fresh policy object), and set-up plus the cold
decision and three warm ones (the same snapshot and policy object, as ``bench_decision.py``
does); the differences are one cold and one warm decision, printed in millions of instructions.
With ``--baseline PATH`` the same is counted for another checkout (its own Python files, this
interpreter) and the ratios printed. Each run takes about a minute (valgrind runs Python some 50×
slower). Not a test: nothing is asserted. Exits 2 when valgrind is not installed.

Run: ``python benchmarks/decision_instructions.py [--baseline PATH/TO/old-checkout]``
(internally also ``python benchmarks/decision_instructions.py --decide N cold|warm``).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def decide(n: int, mode: str) -> None:
    """Build the scenario, then decide ``n`` times (``cold``: a fresh policy object each time;
    ``warm``: one object, after a first decision)."""
    sys.path.insert(0, str(Path.cwd()))
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    import bench_decision  # the checkout's own (the current directory)

    from scheduling.core.policies import get_policy

    profile, _ = bench_decision.load_profile()
    snapshot = bench_decision.make_snapshot(10_000)
    gc.disable()
    policy = get_policy("sjf-bsbf")
    if mode == "warm" and n:
        policy.decide(snapshot, profile, explain=False)
    for _ in range(n):
        if mode == "cold":
            policy = get_policy("sjf-bsbf")
        policy.decide(snapshot, profile, explain=False)


def count(checkout: Path, n: int, mode: str) -> int:
    """Instructions (callgrind's ``Collected``) of ``--decide n mode`` run in ``checkout``."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    command += [str(HERE / "decision_instructions.py"), "--decide", str(n), mode]
    run = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected\s*:\s*(\d+)", run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {run.stderr[-500:]}")
    return int(found.group(1))


def per_decision(checkout: Path) -> tuple[float, float]:
    """(cold, warm) millions of instructions of one decision in ``checkout``."""
    # a first plain run compiles the checkout's .pyc files, so that no count includes compiling
    subprocess.run(
        [sys.executable, str(HERE / "decision_instructions.py"), "--decide", "0", "cold"],
        cwd=checkout,
        check=True,
    )
    setup, cold, warm = count(checkout, 0, "cold"), count(checkout, 1, "cold"), count(checkout, 3, "warm")
    return (cold - setup) / 1e6, (warm - cold) / 3 / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to count the same way")
    parser.add_argument("--decide", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.decide:
        decide(int(args.decide[0]), args.decide[1])
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (e.g. apt-get install valgrind)", file=sys.stderr)
        return 2
    ours = per_decision(HERE.parent)
    print(f"this checkout: cold {ours[0]:.1f} M instructions, warm {ours[1]:.1f} M")
    if args.baseline is not None:
        old = per_decision(args.baseline.resolve())
        print(f"baseline:      cold {old[0]:.1f} M instructions, warm {old[1]:.1f} M")
        print(f"ours ÷ baseline: cold {ours[0] / old[0]:.3f}, warm {ours[1] / old[1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
