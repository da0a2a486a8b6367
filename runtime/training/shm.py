"""Allreduce through shared memory between the ranks of a group that run on one machine.

Between two worker processes on one host the ring's TCP hops cost more than the sum itself: a 3.7 MB allreduce took
2.5-3.8 ms over loopback (``distributed.comm``, both ranks already waiting) against 0.3-0.5 ms through shared
memory, and a 160-byte one 0.2-0.4 ms against tens of microseconds. NCCL and Gloo take the same shortcut for ranks
on one node.

**The region.** One file in ``/dev/shm`` per group and buffer size, mode 0600, created by rank 0 with ``O_EXCL``
under a random name, mapped by every rank and unlinked by rank 0 as soon as every rank has mapped it (the name
travels over the ring's TCP connections, which also carry the "mapped" acknowledgements): a rank that dies leaves
nothing behind. It holds one counter per rank (each in its own cache line), then a slot per rank for its buffer and
a result buffer, twice (collectives alternate between the two sets, so a rank may start the next collective while
a slower one still reads the last one's slots).

**A collective.** Rank r copies its buffer into its slot (nothing to copy when the caller computed straight into
``slot()``), then:
- large buffers (reduce-scatter, all-gather): a barrier; rank r sums its chunk of every slot, in rank order, into
  the result; a barrier; every rank reads the whole result.
- small ones (``SMALL_BYTES``): a barrier, then every rank sums every slot itself, in rank order.
Either way every element is the same additions in the same order on every rank: every rank holds the same bits.

**The barrier** is a counter per rank: rank r stores the collective's number in its counter and waits until every
counter has reached it: a short spin, then sleeps of growing length (at most 200 us: a waiting rank leaves the core
to the worker's other threads). Stores are ordered (x86's TSO: the region is used only on x86-64, see
``usable``), so a counter seen means the data written before it is there. While waiting, every few milliseconds
the rank checks its ring connections (a peer that died closed them: ``RankLost`` at once, as over TCP), the
driver's abort flag and the group's timeout.
"""
from __future__ import annotations

import mmap
import os
import platform
import socket
import time
import uuid

import numpy as np

SMALL_BYTES = 256 << 10  # at most this: every rank sums every slot (one barrier instead of two)
LINE = 64  # bytes per counter: one cache line each, so ranks never write the same line
CHECK_SECONDS = 0.005  # between looks at the peers' connections, the abort flag and the deadline while waiting


def usable() -> bool:
    """Shared memory needs tmpfs at /dev/shm and x86-64's store ordering (the barrier relies on it)."""
    return platform.machine().lower() in ("x86_64", "amd64") and os.path.isdir("/dev/shm") and \
        os.access("/dev/shm", os.W_OK)


def host_key() -> int:
    """A number equal on two processes of one running machine (its boot id and host name) and one user: ranks
    whose keys are all equal may share memory."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        return 0  # unknown: the key is 0 and the group stays on TCP (see Group._share)
    h = uuid.uuid5(uuid.NAMESPACE_OID, f"{boot}/{socket.gethostname()}/{os.getuid()}")
    return int.from_bytes(h.bytes[:7], "little") + 1


PREFIX = "/dev/shm/phylanx-ring-"


def create(nbytes: int) -> str:
    """A new region's file (rank 0): its path, or "" when it cannot be made. The name holds the creating process's
    id: a file left by a process killed between creating and unlinking one is removed here, by the next."""
    _remove_orphans()
    path = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return ""
    try:
        os.ftruncate(fd, nbytes)
    except OSError:
        os.close(fd)
        os.unlink(path)
        return ""
    os.close(fd)
    return path


def _remove_orphans():
    folder, stem = os.path.split(PREFIX)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(stem)]
    except OSError:
        return
    for n in names:
        pid = n[len(stem):].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(os.path.join(folder, n))
            except OSError:  # another process's, or gone already
                pass


def region_bytes(size: int, nbytes: int) -> int:
    return 2 * (LINE * size + (size + 1) * _rounded(nbytes))


def _rounded(nbytes: int) -> int:
    return -(-max(nbytes, 1) // LINE) * LINE


class Region:
    """A mapped region for buffers of up to ``capacity`` elements of ``dtype`` shared by ``size`` ranks."""

    def __init__(self, path: str, size: int, rank: int, capacity: int, dtype):
        self.size, self.rank, self.capacity, self.dtype = size, rank, capacity, np.dtype(dtype)
        nbytes = capacity * self.dtype.itemsize
        total = region_bytes(size, nbytes)
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != total:
                raise OSError(f"{path} has {os.fstat(fd).st_size} bytes, expected {total}")
            self._map = mmap.mmap(fd, total)
        finally:
            os.close(fd)
        raw = np.frombuffer(self._map, np.uint8)
        half = total // 2
        step = _rounded(nbytes)
        self.sets = []
        for s in range(2):
            base = s * half
            counters = raw[base:base + LINE * size].view(np.int64)[::LINE // 8]
            at = base + LINE * size
            slots = [raw[at + i * step:at + i * step + nbytes].view(self.dtype) for i in range(size)]
            result = raw[at + size * step:at + size * step + nbytes].view(self.dtype)
            self.sets.append((counters, slots, result))
        self.seq = 0  # collectives done: the next one uses set seq % 2 and waits for counters >= 2 seq + 1
        self._chunks: dict = {}

    def slot(self, count: int) -> np.ndarray:
        """This rank's slot of the next collective: a caller that computes its buffer here saves the copy in."""
        return self.sets[self.seq % 2][1][self.rank][:count]

    def chunk(self, count: int) -> slice:
        """This rank's part of a buffer of ``count`` elements in a reduce-scatter (the ring's split)."""
        c = self._chunks.get(count)
        if c is None:
            bounds = np.linspace(0, count, self.size + 1).astype(np.int64)
            c = self._chunks[count] = slice(int(bounds[self.rank]), int(bounds[self.rank + 1]))
        return c

    def allreduce(self, buf: np.ndarray, wait) -> np.ndarray:
        """The sum of every rank's ``buf`` (1-D, contiguous, at most ``capacity`` elements): ``buf`` itself for a
        small buffer that is not the slot, otherwise an array of the region (valid until this rank's collective
        after next). ``wait(counters, target)`` returns once every counter is at least ``target``."""
        counters, slots, result = self.sets[self.seq % 2]
        self.seq += 1
        n = buf.size
        slots = [s[:n] for s in slots]
        result = result[:n]
        mine = slots[self.rank]
        if buf.ctypes.data != mine.ctypes.data:
            np.copyto(mine, buf)
        counters[self.rank] = 2 * self.seq - 1  # everything above is written before this store (x86 TSO)
        wait(counters, 2 * self.seq - 1)
        if buf.nbytes <= SMALL_BYTES:
            out = result if buf.ctypes.data == mine.ctypes.data else buf
            np.add(slots[0], slots[1], out=out)
            for s in slots[2:]:
                out += s
            return out
        c = self.chunk(n)
        np.add(slots[0][c], slots[1][c], out=result[c])
        for s in slots[2:]:
            result[c] += s[c]
        counters[self.rank] = 2 * self.seq
        wait(counters, 2 * self.seq)
        return result

    def close(self):
        self.sets = []
        try:
            self._map.close()
        except BufferError:  # a view of it is still held (a result the caller kept): the mapping goes with it
            pass


def peer_closed(sock: socket.socket) -> bool:
    """True when the peer of ``sock`` (a plain socket on a duplicate of a ring connection's descriptor) closed its
    end: a peek that reads nothing, without waiting. Pending bytes are not consumed."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def wait_all(counters, target: int, check) -> None:
    """Until every counter is at least ``target``: spin briefly, then sleep a little longer each time; ``check()``
    every CHECK_SECONDS (it raises when the group must give up)."""
    for _ in range(200):  # a few tens of microseconds: the usual case when the ranks arrive together
        if counters.min() >= target:
            return
    pause, next_check = 2e-5, time.monotonic() + CHECK_SECONDS
    while counters.min() < target:
        time.sleep(pause)
        pause = min(pause * 1.5, 2e-4)
        now = time.monotonic()
        if now >= next_check:
            check()
            next_check = now + CHECK_SECONDS
