"""Run a function on N spawned ranks (gloo, ``file://`` init in a temporary directory).

``run_ranks(target, world, tmp_path, *args)`` starts ``world`` processes with
``torch.multiprocessing.spawn``; each initialises the default process group and
calls ``target(rank, world, *args)`` (a module-level function, named as
``"module:function"`` so that spawned children import it). Each rank's return
value, or its exception (type name and message), comes back in a list by rank.
"""

import datetime
import importlib
import os
import pickle
import sys
import time
import traceback


def _entry(rank, world, init_file, target, args, out_dir, pg_timeout, backend="gloo"):
    import torch.distributed as dist

    result = None
    try:
        if backend == "nccl":  # one GPU per rank, as NCCL requires
            import torch  # noqa: PLC0415

            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"file://{init_file}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=pg_timeout),
        )
        module, name = target.split(":")
        fn = getattr(importlib.import_module(module), name)
        result = ("ok", fn(rank, world, *args))
    except BaseException as err:  # noqa: BLE001 - every failure goes back to the test
        result = ("err", type(err).__name__, str(err), traceback.format_exc())
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)
    sys.stdout.flush()
    sys.stderr.flush()
    # A rank whose peer failed may leave gloo threads behind: leave without tearing them down.
    os._exit(0)


def run_ranks(target, world, tmp_path, *args, pg_timeout=60, wall=240, backend="gloo"):
    """``[(status, value_or_type, ...), ...]`` by rank; fails the test if the ranks do not finish in ``wall`` s."""
    import torch.multiprocessing as mp

    init_file = os.path.join(str(tmp_path), f"init-{time.monotonic_ns()}")
    out_dir = os.path.join(str(tmp_path), f"out-{time.monotonic_ns()}")
    os.makedirs(out_dir)
    ctx = mp.spawn(_entry, args=(world, init_file, target, args, out_dir, pg_timeout, backend), nprocs=world,
                   join=False)
    deadline = time.monotonic() + wall
    while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise AssertionError(f"{target} on {world} ranks did not finish within {wall} s (a hang)")
    results = []
    for rank in range(world):
        path = os.path.join(out_dir, f"rank{rank}.pkl")
        if not os.path.exists(path):
            raise AssertionError(f"rank {rank} of {target} left no result")
        with open(path, "rb") as f:
            results.append(pickle.load(f))
    return results


def values(results):
    """The return values, after checking that no rank raised."""
    for rank, res in enumerate(results):
        assert res[0] == "ok", f"rank {rank} raised {res[1]}: {res[2]}\n{res[3]}"
    return [res[1] for res in results]
