"""all_gather, gather, broadcast, scatter and all_to_all of LoDTensors over torch.distributed.

Each call is two exchanges (see :mod:`lodtensor.distributed._wire`): one
``all_gather_into_tensor`` of int64 heads of one fixed size for every
collective (the sizes; ``scatter`` and ``all_to_all`` then tell each peer its
tensor's sizes in an ``all_to_all_single`` of 72 bytes per pair), then one data
exchange of exactly the bytes of the tensors: ``all_to_all_single`` with uneven
splits (gloo's and NCCL's variable-size exchange), or ``broadcast``. No exchange
whose size depends on the collective runs before every rank has checked that
all called the same one. The entry of the calling rank is the caller's own
tensor (not copied, not sent).
"""

import datetime
import numbers
import operator

import numpy as np

from . import _wire
from ._wire import LocalError

__all__ = ["all_gather", "gather", "broadcast", "scatter", "all_to_all", "CollectiveError"]

# Bytes of the last call on this process, for tests and benchmarks:
# {"op", "header_bytes", "sent_bytes", "received_bytes"} (the data exchange only in the last two;
# header_bytes: what this rank received in the head and items exchanges).
last_call = {}


class CollectiveError(RuntimeError):
    """A collective did not complete: a peer rank failed, exited or did not join in time.

    After this error the process group is in an unknown state (as after any
    torch.distributed failure); destroy it and start again.

    >>> issubclass(CollectiveError, RuntimeError)
    True

    Catch it around a step, then start the group afresh (a world of one rank here):

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> try:
    ...     batches = all_gather(lt.LoDTensor(np.arange(2.0), [[0, 2]]), timeout=60)
    ... except CollectiveError:  # a peer failed or left: the group is unusable
    ...     dist.destroy_process_group()
    ...     raise
    >>> len(batches)
    1
    >>> dist.destroy_process_group()
    """


class _Call:
    """One collective on this rank: the group, its size, our rank in it, the device, the timeout."""

    def __init__(self, op, group, timeout):
        try:
            import torch
            import torch.distributed as dist
        except ImportError as err:
            raise ImportError(f"{op}(): lodtensor.distributed needs torch: pip install 'lodtensor[torch]'") from err
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"{op}(): torch.distributed is not initialised; call torch.distributed.init_process_group() first"
            )
        self.op, self.group, self.torch, self.dist = op, group, torch, dist
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError(f"{op}(): this process is not a member of group {group!r}")
        self.world = dist.get_world_size(group)
        if dist.get_backend(group) == "nccl":
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.device = torch.device("cpu")
        self.pending = None  # a bad argument found before the heads: it travels in ours
        try:
            self.timeout = _as_timedelta(timeout)
        except LocalError as err:
            self.timeout, self.pending = None, err

    def root(self, root, name):
        """The group rank of the global rank ``root``; a LocalError when it is out of range."""
        dist = self.dist
        try:
            r = operator.index(root)  # not int(): 0.7 is no rank, and int(inf) raises OverflowError
        except TypeError:
            raise LocalError(2, f"{name} must be a rank (int), got {type(root).__name__} {root!r}") from None
        if self.group is not None and self.group is not dist.group.WORLD:
            try:
                return dist.get_group_rank(self.group, r)
            except (ValueError, RuntimeError, OverflowError):
                raise LocalError(1, f"{name}={r} is not a rank of the group") from None
        if not 0 <= r < self.world:
            raise LocalError(1, f"{name}={r} is out of range for a world of {self.world} ranks")
        return r

    def run(self, stage, issue):
        """Issue one async collective and wait for it, turning failures into CollectiveError."""
        try:
            work = issue()
            if self.timeout is None:
                work.wait()
            else:
                work.wait(timeout=self.timeout)
        except RuntimeError as err:
            limit = "" if self.timeout is None else f" (timeout {self.timeout.total_seconds():g} s)"
            raise CollectiveError(
                f"{self.op}(): rank {self.rank} of {self.world} could not complete the {stage} exchange{limit}: "
                f"another rank failed, exited, or is not calling {self.op}() with the same arguments. "
                f"torch.distributed said: {str(err).strip()[:300]}"
            ) from err

    def exchange_heads(self, root, local, *, multi=False):
        """Send this rank's head, receive everyone's, check them alike on every rank.

        ``local()`` returns this rank's :func:`_wire.describe` results or raises
        LocalError; the error travels to every rank, which all raise it. With
        ``multi`` (``scatter``, ``all_to_all``: one tensor per destination) the
        items exchange follows once the heads agree.

        Returns ``(heads, own, incoming)``: the :class:`_wire.Heads`, this
        rank's Items (by destination for ``multi``), and by rank the Item of
        the tensor that rank sends here (``multi``) or holds (else).
        """
        torch, world = self.torch, self.world
        error, described = self.pending, []
        if error is None:
            try:
                described = local()
            except LocalError as err:
                error = err
        own = [_wire.item_of(d) for d in described]
        sends = sum(it.nbytes for j, it in enumerate(own) if j != self.rank) if multi else 0
        head = _wire.encode_head(self.op, root, described, follow=_wire.ITEM if multi else 0, sends=sends, error=error)
        send = torch.from_numpy(head).to(self.device)
        out = torch.empty(world * head.size, dtype=torch.int64, device=self.device)
        gather_single = getattr(self.dist, "all_gather_single", None) or self.dist.all_gather_into_tensor
        self.run("sizes", lambda: gather_single(out, send, group=self.group, async_op=True))
        last_call.clear()
        last_call.update(op=self.op, header_bytes=int(head.nbytes) * world, sent_bytes=0, received_bytes=0)
        heads = _wire.decode_head(self.op, out.cpu().numpy().reshape(world, head.size), world)
        if not heads.follow:
            return heads, own, heads.inline
        if world == 1:
            return heads, own, own
        records = torch.from_numpy(_wire.encode_items(described, world).reshape(-1)).to(self.device)
        got = torch.empty(world * _wire.ITEM, dtype=torch.int64, device=self.device)
        self.run("items", lambda: self.dist.all_to_all_single(got, records, group=self.group, async_op=True))
        last_call["header_bytes"] += int(got.numel()) * 8
        return heads, own, _wire.decode_items(self.op, got.cpu().numpy().reshape(world, _wire.ITEM), heads, world)

    def alltoallv(self, sendbuf, send_splits, recv_splits):
        """One ``all_to_all_single`` with uneven splits; the receive buffer (uint8)."""
        torch = self.torch
        recvbuf = torch.empty(int(sum(recv_splits)), dtype=torch.uint8, device=self.device)
        self.run(
            "data",
            lambda: self.dist.all_to_all_single(
                recvbuf, sendbuf, list(recv_splits), list(send_splits), group=self.group, async_op=True
            ),
        )
        last_call.update(sent_bytes=int(sum(send_splits)), received_bytes=int(sum(recv_splits)))
        return recvbuf

    def empty(self, nbytes):
        return self.torch.empty(int(nbytes), dtype=self.torch.uint8, device=self.device)


def _as_timedelta(timeout):
    """The timeout as a timedelta; a LocalError (sent to every rank, the group's timeout used) if it is bad."""
    if timeout is None or (isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0):
        return timeout
    if isinstance(timeout, numbers.Real) and not isinstance(timeout, bool) and 0 < timeout < 1e9:
        return datetime.timedelta(seconds=float(timeout))
    raise LocalError(1, f"timeout must be a positive number of seconds or a timedelta, got {timeout!r}")


def _lib_and_device(t):
    """The array library and torch device results on this rank follow: those of ``t``'s data."""
    be = t.backend
    return be.name, be.device_of(t.data)


def _split_points(sizes):
    return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).tolist()


def _receive(call, recvbuf, recv_splits, items_from, lib, device):
    """The tensors in ``recvbuf``: one per rank with a nonzero split (``items_from[j]``), else None."""
    starts = _split_points(recv_splits)
    out = [None] * call.world
    for j, item in enumerate(items_from):
        if item is not None and j != call.rank:
            chunk = recvbuf[starts[j] : starts[j] + item.nbytes]
            out[j] = _wire.unpack(chunk, item, lib or item.lib, device)
    return out


def all_gather(t, group=None, *, timeout=None):
    """Every rank's LoDTensor, on every rank: a list indexed by rank. Copies (except ``t`` itself).

    Tensors may differ in rows and lod lengths (an empty tensor is fine); all
    must have the same lod depth, dtype and row shape, or every rank raises
    the same ValueError. One all-gather of fixed-size headers, then one
    ``all_to_all_single`` of the real bytes (no padding to the longest).

    Parameters
    ----------
    t : lodtensor.LoDTensor
        This rank's tensor (NumPy, torch or CuPy data; results on this rank use
        the same library and device). Not modified; ``result[rank] is t``.
    group : ProcessGroup, optional
        Default: the world.
    timeout : float seconds or timedelta, optional
        How long each exchange may wait for the other ranks; default the group's timeout.

    Raises
    ------
    ValueError, TypeError
        A rank passed a bad tensor, or the ranks' tensors disagree; the same error on every rank.
    CollectiveError
        Another rank failed, exited or did not call ``all_gather`` within the timeout.

    Examples
    --------
    A world of one rank (gloo, in this process); with ``R`` ranks the list holds ``R`` tensors:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> t = lt.LoDTensor(np.arange(5.0), [[0, 2, 5]])
    >>> out = all_gather(t)
    >>> [x.lod() for x in out], out[0] is t
    ([[[0, 2, 5]]], True)
    >>> dist.destroy_process_group()
    """
    call = _Call("all_gather", group, timeout)
    _, _, items = call.exchange_heads(-1, lambda: [_wire.describe(t, "t")])
    sizes = [it.nbytes for it in items]
    me, world = call.rank, call.world
    send = [0 if j == me else sizes[me] for j in range(world)]
    recv = [0 if j == me else sizes[j] for j in range(world)]
    if sum(sizes) and world > 1:
        sendbuf = call.empty(sum(send))
        n = sizes[me]
        if n:
            first = sendbuf[:n]
            _wire.pack_into(first, t)
            for k in range(1, world - 1):  # the same bytes to every other rank
                sendbuf[k * n : (k + 1) * n].copy_(first)
        recvbuf = call.alltoallv(sendbuf, send, recv)
    else:
        recvbuf = call.empty(0)
    lib, device = _lib_and_device(t)
    out = _receive(call, recvbuf, recv, items, lib, device)
    out[me] = t
    return out


def gather(t, dst=0, group=None, *, timeout=None):
    """Every rank's LoDTensor, on rank ``dst`` (a list indexed by rank); None on the others.

    Same rules as :func:`all_gather`; the data exchange sends each tensor once, to ``dst``.

    A world of one rank (gloo, in this process), which is also ``dst``:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> t = lt.LoDTensor(np.arange(3), [[0, 1, 3]])
    >>> [x.tolist() for x in gather(t, dst=0)]  # None on every rank but dst
    [[[0], [1, 2]]]
    >>> dist.destroy_process_group()
    """
    call = _Call("gather", group, timeout)

    def local():
        call.root(dst, "dst")
        return [_wire.describe(t, "t")]

    _, _, items = call.exchange_heads(_root_field(dst), local)
    root = call.root(dst, "dst")
    me, world = call.rank, call.world
    sizes = [it.nbytes for it in items]
    send = [sizes[me] if (j == root and me != root) else 0 for j in range(world)]
    recv = [sizes[j] if (me == root and j != root) else 0 for j in range(world)]
    if sum(sizes) - sizes[root] > 0:
        sendbuf = call.empty(sum(send))
        if sum(send):
            _wire.pack_into(sendbuf, t)
        recvbuf = call.alltoallv(sendbuf, send, recv)
    else:
        recvbuf = call.empty(0)
    if me != root:
        return None
    lib, device = _lib_and_device(t)
    out = _receive(call, recvbuf, recv, items, lib, device)
    out[me] = t
    return out


def broadcast(t, src=0, group=None, *, timeout=None):
    """Rank ``src``'s LoDTensor on every rank (``t`` is ignored, and may be None, elsewhere).

    On ``src`` the result is ``t`` itself; other ranks get a copy whose data
    uses ``src``'s array library. One all-gather of headers, one ``broadcast``.

    A world of one rank (gloo, in this process); the other ranks would pass ``None``:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> t = lt.LoDTensor(np.arange(3.0), [[0, 3]])
    >>> broadcast(t, src=0) is t
    True
    >>> broadcast(t, src=1)
    Traceback (most recent call last):
    ...
    ValueError: broadcast(): on rank 0: src=1 is out of range for a world of 1 ranks
    >>> dist.destroy_process_group()
    """
    call = _Call("broadcast", group, timeout)

    def local():
        return [_wire.describe(t, "t")] if call.root(src, "src") == call.rank else []

    _, _, items = call.exchange_heads(_root_field(src), local)
    root = call.root(src, "src")
    item = _root_item(call, items, root)
    me = call.rank
    if item.nbytes and call.world > 1:
        buf = call.empty(item.nbytes)
        if me == root:
            _wire.pack_into(buf, t)
        call.run("data", lambda: call.dist.broadcast(buf, src=int(src), group=call.group, async_op=True))
        last_call.update(sent_bytes=item.nbytes if me == root else 0, received_bytes=0 if me == root else item.nbytes)
    else:
        buf = call.empty(0)
    if me == root:
        return t
    return _wire.unpack(buf, item, item.lib, None)


def scatter(tensors, src=0, group=None, *, timeout=None):
    """Rank ``i`` receives ``tensors[i]`` of rank ``src`` (``tensors`` is ignored elsewhere).

    ``tensors`` on ``src`` is a list of one LoDTensor per rank, all of one lod
    depth, dtype and row shape, any lengths. On ``src`` the result is
    ``tensors[src]`` itself; other ranks get a copy in ``src``'s array library.

    A world of one rank (gloo, in this process): ``src`` passes one tensor per rank:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> parts = [lt.LoDTensor(np.arange(4), [[0, 1, 4]])]
    >>> scatter(parts, src=0).tolist()
    [[0], [1, 2, 3]]
    >>> scatter(parts * 2, src=0)
    Traceback (most recent call last):
    ...
    ValueError: scatter(): on rank 0: tensors must hold one LoDTensor per rank (1), got a list of 2
    >>> dist.destroy_process_group()
    """
    call = _Call("scatter", group, timeout)
    world = call.world

    def local():
        if call.root(src, "src") != call.rank:
            return []
        return _wire.describe_list(tensors, "tensors", world)

    heads, own, incoming = call.exchange_heads(_root_field(src), local, multi=True)
    root = call.root(src, "src")
    me = call.rank
    if me != root:
        _check_announced(call, _root_item(call, incoming, root).nbytes, heads.sends[root])
    send = [own[j].nbytes if (me == root and j != root) else 0 for j in range(world)]
    recv = [incoming[root].nbytes if (j == root and me != root) else 0 for j in range(world)]
    if heads.sends[root] > 0:
        sendbuf = call.empty(sum(send))
        if me == root:
            starts = _split_points(send)
            for j in range(world):
                if send[j]:
                    _wire.pack_into(sendbuf[starts[j] : starts[j + 1]], tensors[j])
        recvbuf = call.alltoallv(sendbuf, send, recv)
    else:
        recvbuf = call.empty(0)
    if me == root:
        return tensors[me]
    item = incoming[root]
    return _wire.unpack(recvbuf[: item.nbytes], item, item.lib, None)


def all_to_all(tensors, group=None, *, timeout=None):
    """Rank ``i`` sends ``tensors[j]`` to rank ``j``; returns what every rank sent it, by rank.

    ``tensors`` is a list of one LoDTensor per rank; every tensor of every rank
    must have one lod depth, dtype and row shape. ``result[rank]`` is
    ``tensors[rank]`` itself; received tensors use this rank's array library.

    A world of one rank (gloo, in this process): one tensor per destination rank:

    >>> import os, tempfile
    >>> import numpy as np
    >>> import torch.distributed as dist
    >>> import lodtensor as lt
    >>> init = "file://" + os.path.join(tempfile.mkdtemp(), "pg")
    >>> dist.init_process_group("gloo", init_method=init, rank=0, world_size=1)
    >>> received = all_to_all([lt.LoDTensor(np.arange(4.0), [[0, 1, 4]])])
    >>> [x.lod() for x in received]
    [[[0, 1, 4]]]
    >>> dist.destroy_process_group()
    """
    call = _Call("all_to_all", group, timeout)
    world = call.world
    heads, own, incoming = call.exchange_heads(-1, lambda: _wire.describe_list(tensors, "tensors", world), multi=True)
    me = call.rank
    send = [own[j].nbytes if j != me else 0 for j in range(world)]
    recv = [incoming[j].nbytes if j != me else 0 for j in range(world)]
    _check_announced(call, sum(recv), sum(heads.sends))
    if sum(heads.sends):  # the same decision on every rank: the bytes crossing between any two ranks
        sendbuf = call.empty(sum(send))
        starts = _split_points(send)
        for j in range(world):
            if send[j]:
                _wire.pack_into(sendbuf[starts[j] : starts[j + 1]], tensors[j])
        recvbuf = call.alltoallv(sendbuf, send, recv)
    else:
        recvbuf = call.empty(0)
    lib, device = _lib_and_device(tensors[me])
    out = _receive(call, recvbuf, recv, incoming, lib, device)
    out[me] = tensors[me]
    return out


def _root_field(root):
    """The root as it travels in the header (so ranks that disagree on it are told); -2 for no int64 rank.

    Never raises: a rank that raised here would leave its peers waiting in the head exchange.
    """
    try:
        r = operator.index(root)
    except TypeError:
        return -2
    return r if -(1 << 63) <= r < (1 << 63) else -2


def _check_announced(call, receiving, sent):
    """A peer's item announcing bytes while the heads say nothing is sent: corrupt (no exchange runs then,
    so raising on this rank alone leaves no peer waiting)."""
    if receiving and not sent:
        raise ValueError(
            f"{call.op}(): the heads are corrupt: rank {call.rank} is told to receive {receiving} bytes, "
            f"but the heads say that no rank sends any"
        )


def _root_item(call, items, root):
    """The Item the root sends (``broadcast``, ``scatter``); the heads say the same on every rank."""
    if items[root] is None:
        raise ValueError(f"{call.op}(): the heads are corrupt: rank {root}, the root, announces no tensor")
    return items[root]
