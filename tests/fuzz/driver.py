"""Run fuzz targets in this process: ``python -m tests.fuzz.driver NAME [NAME...] --examples N --seed S``.

Exits 0 when every example kept the contract, 1 (with the falsifying example)
when one did not. A crash or a hang ends the process: the parent
(:mod:`tests.fuzz.test_fuzz`, ``make fuzz``) reports it with the seed. A
watchdog dumps every thread's stack and exits if one example runs longer than
``--hang`` seconds.
"""

import argparse
import faulthandler
import sys
import time

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from .targets import TARGETS


def run(name, examples, seed_value, hang):
    fn = TARGETS[name]
    count = [0]

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(st.data())
    def test(data):
        faulthandler.dump_traceback_later(hang, exit=True)
        try:
            fn(data)
        finally:
            faulthandler.cancel_dump_traceback_later()
        count[0] += 1

    test()
    return count[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="targets (default: all)")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang", type=float, default=60.0, help="seconds before one example counts as a hang")
    args = parser.parse_args(argv)
    names = args.names or sorted(TARGETS)
    for name in names:
        start = time.perf_counter()
        n = run(name, args.examples, args.seed, args.hang)
        print(f"{name}: {n} examples in {time.perf_counter() - start:.1f} s (seed {args.seed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
