"""A collective group of long-running tasks: a ring over ``distributed.comm``, formed through each worker's ring port.

**The port** (ports.py): one listener per worker process, its address learnt once by the client and put in the
segment's job, so forming a group is one connection per rank, with no rendezvous through the scheduler (that cost
two scheduler round trips per rank, 5-10 ms, on every segment).

**The group.** A rank connects to its right neighbour's port and takes its left neighbour's connection from its own
port. Connections are made once per group (a segment) and every TCP connection is full duplex, so a rank talks to
its right neighbour on the connection it made and to its left on the one it accepted.

Data goes over the comm's byte stream as raw frames: a 16-byte header (tag, byte count) then the buffer itself, a
memoryview of the caller's NumPy array (no pickling, no copy on send), received with ``read_into`` straight into a
buffer allocated once per group. A peer that dies closes its connection: the next read or write on it raises
``RankLost`` at once (no timeout involved); a peer that stays silent for ``timeout`` seconds is an error too.

The comms live on the port's IO thread (its own asyncio loop; the worker's event loop keeps serving the scheduler);
a collective is a coroutine run there, the rank's thread waiting for it.
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import time

import numpy as np

from . import shm
from .ports import RankLost, _freeze_old_objects, _port

HEADER = struct.Struct("<qq")  # tag (the collective's sequence number), payload bytes
# An allreduce of at most this many bytes gathers every rank's buffer and sums locally: n-1 latency steps instead
# of 2(n-1) (a ring's reduce-scatter then all-gather). With two ranks the bytes are the same; with n they are n-1
# times the buffer instead of 2(n-1)/n, which at this size costs less than the steps saved (loopback: 0.1-0.2 ms a
# step, 256 KB in 0.05-0.1 ms). The digits CNN's 80 KB gradient: 1.60 -> 1.14 ms a step on two workers.
SMALL_BYTES = 256 << 10


class Group:
    """``shared``: an allreduce between ranks that all run on one machine goes through shared memory (shm.py)
    instead of the TCP ring; False keeps every collective on TCP."""

    def __init__(self, name: str, rank: int, size: int, timeout: float = 600.0, shared: bool = True):
        self.name, self.rank, self.size, self.timeout = name, rank, size, timeout
        self.port = None
        self.left = self.right = None  # comms
        self._seq = 0
        self.sent = 0  # payload bytes this rank wrote, for the profile
        self.messages = 0  # collectives this rank took part in (the group's own set-up not counted)
        self.comm_seconds = 0.0
        self._tmp = None
        self._want_shared = shared
        self.shared = False  # decided by every rank together in join
        self._regions: dict = {}  # (dtype, capacity) -> shm.Region, or None: that size stays on TCP
        self._peeks: list = []  # (peer rank, plain socket on a duplicate of the connection's descriptor)
        self._aborted = lambda: False
        self.worker = None  # the Dask worker the rank runs on (set by its rank context, segments/rank.py)

    # ---- forming and closing the group ------------------------------------------------------------------
    def join(self, ports, aborted=lambda: False, worker=None):
        """Form the group on a worker (inside a task, or in a service request's thread: then ``worker`` is given):
        ``ports`` are the ranks' ring port addresses in rank order (``port_addresses``). Connects to the right
        neighbour and takes the left one's connection. Returns self."""
        from distributed import get_worker

        _freeze_old_objects()
        if self.size == 1:
            return self
        self._aborted = aborted
        self.port = _port(worker if worker is not None else get_worker())
        try:
            self.port.run(self._connect(ports[(self.rank + 1) % self.size], aborted), self.timeout)
        except asyncio.TimeoutError:
            raise RankLost(f"group {self.name}: forming the ring took over {self.timeout:.0f} s") from None
        self._share()
        return self

    def _share(self):
        """Whether allreduces go through shared memory: every rank on one machine (equal host keys, exchanged
        over the ring, so every rank takes the same decision) and able to map /dev/shm."""
        key = shm.host_key() if self._want_shared and shm.usable() else 0
        sent = self.sent
        keys = self._allgather(np.array([key], np.int64))[:, 0]
        self.sent = sent  # the group's own set-up messages are not the caller's traffic
        self.shared = bool(keys[0] != 0 and np.all(keys == keys[0]))
        if self.shared:
            for peer, c in ((self.rank - 1) % self.size, self.left), ((self.rank + 1) % self.size, self.right):
                sock = getattr(getattr(c, "stream", None), "socket", None)
                if sock is not None:  # a plain socket even under TLS: only its end-of-stream is looked at
                    tls = isinstance(sock, ssl.SSLSocket)
                    try:
                        peek = socket.socket(fileno=os.dup(sock.fileno()))
                    except OSError as e:  # the stream saw the neighbour leave and closed it (fileno -1)
                        raise RankLost(f"group {self.name}: rank {peer} closed its connection "
                                       f"({type(e).__name__})") from e
                    self._peeks.append((peer, peek, tls))

    def _region(self, buf: np.ndarray):
        """The shared region for buffers like ``buf`` (made by every rank together the first time one of its size
        class is reduced: ``_mapped``); None when that failed on any rank (that size then stays on TCP)."""
        capacity = shm.capacity_for(buf.size, buf.dtype)  # size classes: a few regions however sizes vary
        return self._mapped((buf.dtype.str, capacity), shm.region_bytes(self.size, capacity, buf.dtype),
                            lambda path: shm.Region(path, self.size, self.rank, capacity, buf.dtype))

    def vectors(self, count: int, dtype, k: int):
        """``k`` vectors of ``count`` elements every rank of a group that shares memory maps (shm.Vectors: their
        reads and writes ordered by the caller, e.g. with ``reduce_apply``), the same ones on every later call;
        None when the group does not share memory or they could not be made."""
        if not self.shared:
            return None
        dtype = np.dtype(dtype)
        found = self._mapped(("vectors", dtype.str, count, k), shm.vectors_bytes(count, dtype, k),
                             lambda path: shm.Vectors(path, count, dtype, k))
        return None if found is None else found.arrays

    def _mapped(self, key, nbytes: int, open_region):
        """The region kept under ``key``, or a new one of ``nbytes``: rank 0 creates the file, names it over the
        ring, every rank maps it (``open_region(path)``) and says so, and rank 0 unlinks it; None when that
        failed on any rank."""
        if key in self._regions:
            self._regions[key] = self._regions.pop(key)  # the most recently used last
            return self._regions[key]
        sent = self.sent  # (the set-up messages below are not the caller's traffic)
        name = np.zeros(128, np.uint8)
        path, fd = shm.create(nbytes) if self.rank == 0 else ("", None)
        made = path
        region = None
        try:
            name[:len(path)] = np.frombuffer(path.encode(), np.uint8)
            path = bytes(self._allgather(name)[0]).rstrip(b"\0").decode()
            if path:
                try:
                    region = open_region(path)
                except (OSError, ValueError):
                    region = None
            ok = self._allgather(np.array([region is not None], np.int8))
        except BaseException:
            if region is not None:
                region.close()
            raise
        finally:
            if made:  # every rank has mapped it, given up, or failed: nothing is left behind
                shm.release(made, fd)
        self.sent = sent
        if not ok.all():
            if region is not None:
                region.close()
            region = None
        if len(self._regions) >= 8:  # an SPMD loop whose sums change size: the least recently used goes
            old = self._regions.pop(next(iter(self._regions)))
            if old is not None:
                old.close()
        self._regions[key] = region
        return region

    def _check(self, deadline):
        """Raise RankLost when a ring neighbour closed its connection or sent data (it is in another collective),
        the driver gave up or ``deadline`` passed."""
        for peer, sock, tls in self._peeks:
            state = shm.peer_state(sock)
            if state == "closed":
                raise RankLost(f"group {self.name}: rank {peer} closed its connection (OSError)")
            if state == "data" and not tls:  # (TLS may have records of its own pending: not a sign)
                raise RankLost(f"group {self.name}: rank {peer} sent data while this rank waits in a shared-memory "
                               "sum: the ranks disagree about the schedule")
        if self._aborted():
            raise RankLost(f"group {self.name}: the driver cancelled the segment")
        if time.monotonic() > deadline:
            raise RankLost(f"group {self.name}: no data from a peer for {self.timeout:.0f} s")

    def scratch(self, like: np.ndarray):
        """A buffer like ``like`` (1-D) to compute the next allreduce's input into: this rank's shared slot when
        the group shares memory (the allreduce then copies nothing in), else None."""
        if not self.shared or like.nbytes <= shm.SMALL_BYTES:
            return None
        region = self._region(like)
        return None if region is None else region.slot(like.size)

    def reduce(self, buf: np.ndarray) -> np.ndarray:
        """The sum of ``buf`` (1-D, contiguous) over the ranks, as ``allreduce`` computes it, but not necessarily
        in ``buf``: through shared memory, for a large buffer, a read-only array of the region, to be read before
        this rank's next collective."""
        self.messages += 1
        if self.size == 1:
            return buf
        region = self._region(buf) if self.shared else None
        if region is None:
            return self._ring_allreduce(buf)
        return self._in_region(buf, lambda wait: region.allreduce(buf, wait))

    def reduce_apply(self, buf: np.ndarray, apply, parts: bool = False) -> None:
        """``apply(chunk, total)`` on this rank's part of the sum of ``buf`` over the ranks (shm.Region's
        ``reduce_apply``: a reduce-scatter, then a barrier after every rank's ``apply``), for a large buffer
        (``scratch`` gives its slot) on a group that shares memory; with ``parts``, ``total`` is that part of every
        rank's ``buf``, in rank order, for ``apply`` to add. ``apply``'s time is not communication."""
        self.messages += 1
        region = self._region(buf)
        spent = [0.0]

        def timed(chunk, total):
            t0 = time.perf_counter()
            apply(chunk, total)
            spent[0] += time.perf_counter() - t0

        self._in_region(buf, lambda wait: region.reduce_apply(buf, wait, timed, parts))
        self.comm_seconds -= spent[0]

    def _in_region(self, buf, collective):
        """Run ``collective(wait)`` on a shared region, its waits watching the peers, the driver and the timeout."""
        t0 = time.perf_counter()
        try:
            deadline = time.monotonic() + self.timeout
            out = collective(lambda counters, target: shm.wait_all(counters, target, lambda: self._check(deadline)))
        except shm.Disagree as e:
            raise RankLost(f"group {self.name}: {e}: the ranks disagree about the schedule") from None
        finally:
            self.comm_seconds += time.perf_counter() - t0
        n = self.size
        self.sent += buf.nbytes * (n - 1) if buf.nbytes <= shm.SMALL_BYTES else \
            2 * (n - 1) * buf.nbytes // n  # what the others read of this rank's data, as the ring would send
        return out

    async def _connect(self, right_address, aborted):
        from distributed.comm import connect

        deadline = time.monotonic() + self.timeout
        # Dask's ``connect`` retries a refused connection until its timeout: a neighbour whose worker died would
        # keep this rank (and its thread) connecting for the whole of it, after the driver gave the segment up.
        # Watched here, the attempt ends when the driver aborts the segment.
        attempt = asyncio.ensure_future(connect(right_address, timeout=self.timeout,
                                                **self.port.security.get_connection_args("worker")))
        try:
            while not attempt.done():
                if aborted():
                    attempt.cancel()
                    raise RankLost(f"group {self.name}: the driver cancelled the segment while this rank was "
                                   f"connecting to rank {(self.rank + 1) % self.size} at {right_address}")
                await asyncio.wait([attempt], timeout=0.1)
            self.right = attempt.result()
            await self.right.write({"group": self.name, "rank": self.rank})
        except OSError as e:  # the neighbour's worker is gone (CommClosedError is an OSError)
            raise RankLost(f"group {self.name}: cannot reach rank {(self.rank + 1) % self.size} at "
                           f"{right_address}: {type(e).__name__}: {e}") from e
        self.left = await self.port.accept(self.name, (self.rank - 1) % self.size, aborted, deadline)
        for c in (self.left, self.right):  # room for a whole chunk in flight: fewer trips through the loop
            sock = getattr(getattr(c, "stream", None), "socket", None)
            if sock is not None:
                for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                    sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)

    def lease(self, name: str, aborted):
        """This formed group, kept from the last segment of the same ranks (rank.py POOL), for segment ``name``:
        its connections, regions and message count go on; its traffic counts start again."""
        self.name, self._aborted = name, aborted
        self.sent = self.messages = 0
        self.comm_seconds = 0.0
        return self

    def close(self):
        """Close the connections (a peer still reading sees a closed connection at once)."""
        if self.port is None:
            return
        for region in self._regions.values():
            if region is not None:
                region.close()
        self._regions.clear()
        for _, sock, _ in self._peeks:
            sock.close()
        self._peeks = []
        comms = [c for c in (self.left, self.right) if c is not None]
        self.left = self.right = None
        self.port.loop.call_soon_threadsafe(lambda: [c.abort() for c in comms])
        self.port.forget(self.name)

    # ---- raw frames ------------------------------------------------------------------------------------
    def _stream(self, comm, peer):
        stream = getattr(comm, "stream", None)
        if stream is None:
            raise RankLost(f"group {self.name}: the connection to rank {peer} is closed")
        return stream

    async def _send(self, comm, peer, tag, buf):
        from tornado.iostream import StreamClosedError

        mv = memoryview(buf).cast("B")
        try:
            s = self._stream(comm, peer)
            s.write(HEADER.pack(tag, mv.nbytes))
            if mv.nbytes:  # an empty buffer (a rank without rows) is its header alone
                await s.write(mv)
            else:
                await s.write(b"")
        except (StreamClosedError, OSError) as e:
            raise RankLost(f"group {self.name}: rank {peer} closed its connection ({type(e).__name__})") from e
        self.sent += mv.nbytes

    async def _recv(self, comm, peer, tag, out):
        from tornado.iostream import StreamClosedError

        mv = memoryview(out).cast("B")
        try:
            s = self._stream(comm, peer)
            got_tag, n = HEADER.unpack(await s.read_bytes(HEADER.size))
            if (got_tag, n) != (tag, mv.nbytes):
                raise RankLost(f"group {self.name}: rank {peer} sent message {got_tag} of {n} bytes, expected "
                               f"{tag} of {mv.nbytes}: the ranks disagree about the schedule")
            if mv.nbytes:
                await s.read_into(mv)
        except (StreamClosedError, OSError) as e:
            raise RankLost(f"group {self.name}: rank {peer} closed its connection ({type(e).__name__})") from e

    def _run(self, coro):
        t0 = time.perf_counter()
        try:
            return self.port.run(coro, self.timeout)
        except asyncio.TimeoutError:
            raise RankLost(f"group {self.name}: no data from a peer for {self.timeout:.0f} s") from None
        finally:
            self.comm_seconds += time.perf_counter() - t0

    def _exchange(self, send_to, send_buf, recv_from, recv_buf):
        """Send and receive at the same time (full duplex): ``send_to``/``recv_from`` are "right" or "left"."""
        self._seq += 1
        tag = self._seq
        peers = {"right": (self.right, (self.rank + 1) % self.size), "left": (self.left, (self.rank - 1) % self.size)}
        c_out, p_out = peers[send_to]
        c_in, p_in = peers[recv_from]
        return asyncio.gather(self._send(c_out, p_out, tag, send_buf), self._recv(c_in, p_in, tag, recv_buf))

    # ---- collectives -----------------------------------------------------------------------------------
    def allreduce(self, buf: np.ndarray) -> np.ndarray:
        """Sum ``buf`` (1-D, contiguous) over the ranks, in place: through shared memory (``reduce``) or over the
        ring. Every rank ends with the same values (the same additions in the same order for each element)."""
        out = self.reduce(buf)
        if out is not buf:
            buf[...] = out
        return buf

    def _ring_allreduce(self, buf: np.ndarray) -> np.ndarray:
        """``buf`` summed in place over the TCP ring: reduce-scatter then all-gather, each rank sending and receiving
        2(n-1)/n of the buffer (a small buffer: gathered whole, see SMALL_BYTES)."""
        n = self.size
        if buf.nbytes <= SMALL_BYTES:  # latency-bound: every rank's buffer to every rank (n-1 steps, not 2(n-1)),
            parts = self._allgather(buf)  # then the same additions in rank order on every rank
            buf[...] = parts[0]
            for part in parts[1:]:
                buf += part
            return buf
        bounds = np.linspace(0, buf.size, n + 1).astype(np.int64)
        chunk = [buf[bounds[i]:bounds[i + 1]] for i in range(n)]
        need = int(np.max(np.diff(bounds)))
        if self._tmp is None or self._tmp.size < need or self._tmp.dtype != buf.dtype:
            self._tmp = np.empty(need, buf.dtype)  # once per group and buffer size
        r = self.rank

        async def ring():
            for k in range(n - 1):  # reduce-scatter: after it, rank r holds the sum of chunk (r + 1) % n
                out, into = chunk[(r - k) % n], chunk[(r - k - 1) % n]
                tmp = self._tmp[:into.size]
                await self._exchange("right", out, "left", tmp)
                into += tmp
            for k in range(n - 1):  # all-gather: pass the summed chunks round
                await self._exchange("right", chunk[(r + 1 - k) % n], "left", chunk[(r - k) % n])

        self._run(ring())
        return buf

    def allgather(self, buf: np.ndarray) -> np.ndarray:
        """Every rank's ``buf`` (the same shape and dtype on every rank), stacked in rank order: the ring passes
        each rank's buffer round in n-1 steps. Every rank ends with the same array."""
        self.messages += 1
        return self._allgather(buf)

    def _allgather(self, buf: np.ndarray) -> np.ndarray:
        n, r = self.size, self.rank
        out = np.empty((n,) + np.shape(buf), np.asarray(buf).dtype)
        out[r] = buf
        if n == 1:
            return out

        async def ring():
            for k in range(n - 1):
                await self._exchange("right", out[(r - k) % n], "left", out[(r - k - 1) % n])

        self._run(ring())
        return out

    def halo(self, first: np.ndarray, last: np.ndarray, from_left: np.ndarray, from_right: np.ndarray):
        """Neighbour exchange along the ring: ``first`` (this rank's first rows) goes to the left neighbour and
        ``last`` (its last rows) to the right one, while ``from_right`` receives the right neighbour's first rows
        and ``from_left`` the left neighbour's last rows. The ends of a non-periodic array get (and ignore) the
        other end's rows: every rank sends and receives the same messages, so no rank waits on another."""
        self.messages += 1
        if self.size == 1:
            return

        async def swap():
            await asyncio.gather(self._exchange("left", first, "right", from_right),
                                 self._exchange("right", last, "left", from_left))

        self._run(swap())

    def neighbour_mean(self, buf: np.ndarray) -> np.ndarray:
        """``buf`` becomes the mean of itself and its ring neighbours' (one neighbour when there are two ranks)."""
        n = self.size
        self.messages += 1
        if n == 1:
            return buf
        if self._tmp is None or self._tmp.size < 2 * buf.size or self._tmp.dtype != buf.dtype:
            self._tmp = np.empty(2 * buf.size, buf.dtype)
        a, b = self._tmp[:buf.size], self._tmp[buf.size:2 * buf.size]

        async def swap():
            if n == 2:  # the one neighbour: send on the connection we made, hear on the one we accepted
                await self._exchange("right", buf, "left", a)
            else:
                await asyncio.gather(self._exchange("right", buf, "left", a), self._exchange("left", buf, "right", b))

        self._run(swap())
        buf += a
        if n > 2:
            buf += b
        buf /= 3 if n > 2 else 2
        return buf


def allreduce_task(name: str, rank: int, size: int, ports, buf, repeats: int = 1, shared: bool = True):
    """A task forming group ``name`` (``ports``: ``port_addresses`` of the ranks' workers) and summing ``buf`` over
    it ``repeats`` times (tests and benchmarks): the sum of one round and the seconds of each round. ``shared``:
    as Group's."""
    from distributed import secede

    secede()
    g = Group(name, rank, size, timeout=120.0, shared=shared).join(ports)
    times, out = [], np.array(buf, copy=True)
    try:
        for _ in range(repeats):
            out = np.array(buf, copy=True)
            t0 = time.perf_counter()
            g.allreduce(out)
            times.append(time.perf_counter() - t0)
    finally:
        g.close()
    return out, times
