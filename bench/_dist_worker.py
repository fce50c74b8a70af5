"""One rank of bench/distributed.py: times every all-gather contender on a gloo process group.

Spawned by ``torch.multiprocessing.spawn`` (so it lives in its own module:
``bench/distributed.py`` would shadow Dask's ``distributed`` package in the
children). The contenders run in interleaved rounds; each timed call starts
after a barrier, and a call's time is the slowest rank's (an all-reduce MAX
after the clock stops). Rank 0 writes the
results as JSON.
"""

import datetime
import json
import os
import pickle
import statistics
import time

import numpy as np


def long_tailed_batch(rank, sequences, width, mean_len, max_len, seed):
    """A one-level LoDTensor of ``sequences`` lognormal lengths (mean ~``mean_len``, one of ``max_len``)."""
    import lodtensor as lt

    rng = np.random.default_rng([seed, rank])
    sigma = 1.1
    mu = np.log(mean_len) - sigma**2 / 2
    lengths = np.clip(np.round(rng.lognormal(mu, sigma, size=sequences)), 1, max_len).astype(np.int64)
    lengths[rng.integers(sequences)] = max_len  # the tail: one sequence of the longest length
    data = rng.standard_normal((int(lengths.sum()), width), dtype=np.float32)
    return lt.LoDTensor.from_lengths(data, lengths)


def rank_main(rank, world, init_file, spec, out_file):
    import torch
    import torch.distributed as dist

    import lodtensor as lt
    import lodtensor.distributed as ld

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )  # fmt: skip
    t = long_tailed_batch(rank, spec["sequences"], spec["width"], spec["mean_len"], spec["max_len"], spec["seed"])
    expected = [long_tailed_batch(r, spec["sequences"], spec["width"], spec["mean_len"], spec["max_len"], spec["seed"])
                for r in range(world)]  # fmt: skip
    data_bytes = [e.numpy().nbytes + 8 * len(e.lod.levels[0]) for e in expected]
    width = spec["width"]

    def lodtensor_all_gather():
        return ld.all_gather(t)

    def padding_workaround():
        """Gather (sequences, max length), pad to the global max, all_gather_into_tensor, unpad."""
        sizes = torch.tensor([len(t), int(t.lengths().max())], dtype=torch.int64)
        all_sizes = torch.empty(world * 2, dtype=torch.int64)
        dist.all_gather_into_tensor(all_sizes, sizes)
        s_max, l_max = (int(v) for v in all_sizes.view(world, 2).max(0).values)
        padded = np.zeros((s_max, l_max, width), dtype=np.float32)
        t.to_padded(maxlen=l_max, out=padded[: len(t)])
        lengths = np.zeros(s_max, dtype=np.int64)
        lengths[: len(t)] = t.lengths()
        out = torch.empty((world * s_max, l_max, width), dtype=torch.float32)
        dist.all_gather_into_tensor(out, torch.from_numpy(padded))
        out_lengths = torch.empty(world * s_max, dtype=torch.int64)
        dist.all_gather_into_tensor(out_lengths, torch.from_numpy(lengths))
        result = []
        for r, n in enumerate(all_sizes.view(world, 2)[:, 0].tolist()):
            block = out[r * s_max : r * s_max + n].numpy()
            result.append(lt.from_padded(block, out_lengths[r * s_max : r * s_max + n].numpy()))
        return result

    def object_workaround():
        result = [None] * world
        dist.all_gather_object(result, t)
        return result

    n_same = -(-sum(data_bytes) // world)  # the same total bytes, split evenly
    same_in = torch.zeros(n_same, dtype=torch.uint8)
    same_out = torch.empty(world * n_same, dtype=torch.uint8)

    def same_bytes_limit():
        dist.all_gather_into_tensor(same_out, same_in)

    contenders = [
        ("lodtensor.distributed.all_gather", lodtensor_all_gather),
        ("pad to global max + all_gather_into_tensor + unpad", padding_workaround),
        ("all_gather_object (pickle)", object_workaround),
        ("limit: all_gather_into_tensor of the same bytes", same_bytes_limit),
    ]
    for name, fn in contenders:
        got = fn()
        if got is not None:  # every contender must deliver what each rank held
            for r in range(world):
                assert got[r].lod() == expected[r].lod(), name
                assert np.array_equal(got[r].numpy(), expected[r].numpy()), name
    # Interleaved rounds (each contender once per round), so that a busy spell of the machine
    # hits every contender alike; a contender whose call takes over a second runs min_repeat rounds.
    times = {name: [] for name, _ in contenders}
    slow = set()
    start = time.perf_counter()
    for i in range(spec["warmup"] + spec["max_repeat"]):
        for name, fn in contenders:
            if name in slow and len(times[name]) >= spec["min_repeat"]:
                continue
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            took = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(took, op=dist.ReduceOp.MAX)
            if i >= spec["warmup"]:
                times[name].append(float(took))
            if float(took) > 1.0:
                slow.add(name)
        spent = time.perf_counter() - start
        stop = torch.tensor([i >= spec["warmup"] + spec["min_repeat"] and spent > spec["budget"] * len(contenders)])
        dist.broadcast(stop, src=0)  # every rank leaves the loop together
        if bool(stop):
            break
    results = {name: {"best": min(v), "median": statistics.median(v), "n": len(v)} for name, v in times.items()}

    s_max = max(len(e) for e in expected)
    l_max = max(int(e.lengths().max()) for e in expected)
    padded = s_max * (l_max * width * 4 + 8) + 16  # one rank's padded block, lengths and sizes
    pickled = max(len(pickle.dumps(e)) for e in expected)  # all_gather_object pads to the largest pickle
    wire = {  # bytes leaving each rank, summed over ranks (what crosses the network)
        "lodtensor.distributed.all_gather": sum(data_bytes) * (world - 1),
        "pad to global max + all_gather_into_tensor + unpad": world * (world - 1) * padded,
        "all_gather_object (pickle)": world * (world - 1) * (pickled + 8),
        "limit: all_gather_into_tensor of the same bytes": world * (world - 1) * n_same,
    }
    ld.all_gather(t)
    measured = ld.last_call["sent_bytes"]
    sent = torch.tensor([measured], dtype=torch.int64)
    dist.all_reduce(sent)
    if rank == 0:
        info = {
            "results": results,
            "wire": wire,
            "lodtensor_sent_measured": int(sent),
            "data_bytes": data_bytes,
            "rows": [e.num_rows for e in expected],
            "mean_len": float(np.mean(np.concatenate([e.lengths() for e in expected]))),
            "max_len": l_max,
        }
        with open(out_file, "w") as f:
            json.dump(info, f)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)
