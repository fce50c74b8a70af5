"""``make fuzz``: every fuzz target, with fresh seeds, in subprocesses, for a given time.

    python -m tests.fuzz.run --minutes 30 [--examples 400] [NAME ...]

Prints a line per run and a summary (examples run per target); exits 1 with
the failing target's output and seed if any run crashed, hung or broke the
contract. Reproduce one with ``python -m tests.fuzz.driver NAME --seed S
--examples N``.
"""

import argparse
import random
import sys
import time

from .targets import TARGETS
from .test_fuzz import FEWER, run_target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--examples", type=int, default=400)
    args = parser.parse_args(argv)
    names = args.names or sorted(TARGETS)
    deadline = time.monotonic() + 60 * args.minutes
    counts = dict.fromkeys(names, 0)
    runs = 0
    rng = random.Random()
    while time.monotonic() < deadline:
        for name in names:
            if time.monotonic() >= deadline:
                break
            seed = rng.randrange(2**31)
            examples = FEWER.get(name, args.examples)
            code, output = run_target(name, examples, seed, timeout=900)
            runs += 1
            if code != 0:
                print(output[-8000:])
                print(f"FAILED: {name} seed {seed} examples {examples} (exit {code})")
                print(f"reproduce: python -m tests.fuzz.driver {name} --seed {seed} --examples {examples}")
                return 1
            counts[name] += examples
            print(f"ok {name} seed {seed}: {examples} examples", flush=True)
    total = sum(counts.values())
    print(f"\nfuzz: {runs} runs, {total} examples, nothing found in {args.minutes:g} min")
    for name, n in counts.items():
        print(f"  {name}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
