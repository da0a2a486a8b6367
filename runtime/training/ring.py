"""A collective group of long-running tasks: rendezvous through the scheduler, then a ring over ``distributed.comm``.

Each rank opens one listener on its worker's host (the worker's own address scheme and host: loopback when the
cluster is on loopback, TLS when the cluster uses TLS: the listener and the connections take the worker's
``Security`` arguments), publishes its address in a ``distributed.Variable`` named after the group, connects to
its right neighbour and accepts its left neighbour. Connections are made once per group (a training segment) and
every TCP connection is full duplex, so a rank talks to its right neighbour on the connection it made and to its
left on the one it accepted.

Data goes over the comm's byte stream as raw frames: a 16-byte header (tag, byte count) then the buffer itself, a
memoryview of the caller's NumPy array (no pickling, no copy on send), received with ``read_into`` straight into a
buffer allocated once per group. A peer that dies closes its connection: the next read or write on it raises
``RankLost`` at once (no timeout involved); a peer that stays silent for ``timeout`` seconds is an error too.

The group runs a private asyncio loop in the task's own thread (the worker's event loop keeps serving the
scheduler): the comms are made on it and every collective is ``loop.run_until_complete``.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time

import numpy as np

HEADER = struct.Struct("<qq")  # tag (the collective's sequence number), payload bytes


class RankLost(ConnectionError):
    """A peer of the group closed its connection or went silent: the segment cannot go on."""


class Group:
    def __init__(self, name: str, rank: int, size: int, timeout: float = 600.0):
        self.name, self.rank, self.size, self.timeout = name, rank, size, timeout
        self.loop = asyncio.new_event_loop()
        self.left = self.right = None  # comms
        self._listener = None
        self._seq = 0
        self.sent = 0  # payload bytes this rank wrote, for the profile
        self.comm_seconds = 0.0
        self._tmp = None

    # ---- forming and closing the group ------------------------------------------------------------------
    def join(self, aborted=lambda: False):
        """Form the group from inside a task: rendezvous through the scheduler (a ``distributed.Variable`` per
        rank, named after the group; the driver deletes them afterwards). Returns self."""
        from distributed import Variable, get_client

        client = get_client()

        def lookup(r):
            var = Variable(f"{self.name}-{r}", client=client)
            deadline = time.monotonic() + self.timeout
            while True:
                if aborted() or time.monotonic() > deadline:
                    raise RankLost(f"group {self.name}: rank {r} never announced itself")
                try:  # long polls: each timeout is an error line in the scheduler's log
                    return var.get(timeout=5.0)
                except TimeoutError:
                    pass

        return self.connect(lambda a: Variable(f"{self.name}-{self.rank}", client=client).set(a), lookup, aborted)

    def connect(self, publish, lookup, aborted=lambda: False):
        """Open the listener, ``publish(address)``, connect to the right neighbour's ``lookup(rank)`` address and
        accept the left neighbour. Returns self."""
        if self.size > 1:
            self.loop.run_until_complete(self._connect(publish, lookup, aborted))
        return self

    async def _connect(self, publish, lookup, aborted):
        from distributed.comm import connect, listen
        from distributed.comm.addressing import get_address_host, parse_address
        from distributed.worker import get_worker

        worker = get_worker()
        scheme, _ = parse_address(worker.address)
        host = get_address_host(worker.address)  # the worker's own interface: never 0.0.0.0
        sec = worker.security
        accepted = asyncio.get_running_loop().create_future()

        async def on_comm(comm):
            hello = await comm.read()
            if hello.get("group") == self.name and hello.get("rank") == (self.rank - 1) % self.size \
                    and not accepted.done():
                accepted.set_result(comm)
            else:  # a stale rank of an earlier attempt: not ours
                await comm.close()

        # the listener's handshake and the hello message are Dask's usual (small) messages; data is not
        self._listener = listen(f"{scheme}://{host}:0", on_comm, **sec.get_listen_args("worker"))
        await self._listener.start()
        publish(self._listener.contact_address)
        right_rank = (self.rank + 1) % self.size
        address = await asyncio.get_running_loop().run_in_executor(None, lookup, right_rank)
        self.right = await connect(address, timeout=self.timeout, **sec.get_connection_args("worker"))
        await self.right.write({"group": self.name, "rank": self.rank})
        deadline = time.monotonic() + self.timeout
        while not accepted.done():
            if aborted() or time.monotonic() > deadline:
                raise RankLost(f"group {self.name}: rank {(self.rank - 1) % self.size} never connected")
            await asyncio.wait([accepted], timeout=0.2)
        self.left = accepted.result()
        for c in (self.left, self.right):  # room for a whole chunk in flight: fewer trips through the loop
            sock = getattr(getattr(c, "stream", None), "socket", None)
            if sock is not None:
                for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
                    sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
        self._listener.stop()  # one connection per neighbour for the group's life
        self._listener = None

    def close(self):
        """Close the connections (a peer still reading sees a closed connection at once) and the loop."""
        async def _close():
            for c in (self.left, self.right):
                if c is not None:
                    c.abort()
            if self._listener is not None:
                self._listener.stop()

        try:
            self.loop.run_until_complete(_close())
        finally:
            self.loop.close()

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
            return self.loop.run_until_complete(asyncio.wait_for(coro, self.timeout))
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
        """Sum ``buf`` (1-D, contiguous) over the ranks, in place: ring reduce-scatter then all-gather, each rank
        sending and receiving 2(n-1)/n of the buffer. Every rank ends with the same values (the same additions in
        the same order for each chunk)."""
        n = self.size
        if n == 1:
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
        if self.size == 1:
            return

        async def swap():
            await asyncio.gather(self._exchange("left", first, "right", from_right),
                                 self._exchange("right", last, "left", from_left))

        self._run(swap())

    def neighbour_mean(self, buf: np.ndarray) -> np.ndarray:
        """``buf`` becomes the mean of itself and its ring neighbours' (one neighbour when there are two ranks)."""
        n = self.size
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


def allreduce_task(name: str, rank: int, size: int, buf, repeats: int = 1):
    """A task forming group ``name`` and summing ``buf`` over it ``repeats`` times (tests and benchmarks): the sum
    of one round and the seconds of each round."""
    from distributed import secede

    secede()
    g = Group(name, rank, size, timeout=120.0).join()
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
