"""Allreduce through shared memory between the ranks of a group that run on one machine.

Between two worker processes on one host the ring's TCP hops cost more than the sum itself: a 3.7 MB allreduce took
2.5-4.5 ms over loopback (``distributed.comm``) against 0.3-0.5 ms through shared memory. NCCL and Gloo take the
same shortcut for ranks on one node.

**The region.** One file in ``/dev/shm`` per group and size class, mode 0600, created by rank 0 with ``O_EXCL``
under a random name and its space reserved (``posix_fallocate``: a full /dev/shm is a fallback to TCP, not a
SIGBUS later), mapped by every rank and unlinked by rank 0 as soon as every rank has mapped it (the name travels
over the ring's TCP connections, which also carry the "mapped" acknowledgements). Until then rank 0 holds a shared
``flock`` on it; a file left by a creator killed in that window is removed by a later ``create`` once it is a
minute old and nobody holds the lock (locks, unlike process ids, are seen across PID namespaces sharing /dev/shm).
The region holds a line per rank (its counter and the length it reduces), a slot per rank for its buffer and a
result buffer: twice for small buffers (collectives alternate between the two sets: see below), once for large ones.

**A collective.** Rank r copies its buffer into its slot (nothing to copy when the caller computed straight into
``slot()``), stores its length and its counter, then:
- large buffers (reduce-scatter, all-gather): a barrier; rank r sums its chunk of every slot, in rank order, into
  the result; a barrier; every rank reads the whole result (until its next collective: a rank writes its chunk of
  the next result only after every rank has arrived at that next collective). ``reduce_apply`` stops after the
  sum of the chunk: the caller's function uses it (training/shard.py: an optimizer's update of that chunk of
  parameters kept in ``Vectors``, a region of plain vectors every rank maps), then a barrier; nobody reads it all.
- small ones (``SMALL_BYTES``): a barrier, then every rank sums every slot itself, in rank order, into its own
  buffer. One barrier only, so a rank may start the next collective while a slower one still reads this one's
  slots: the next uses the other set.
Either way every element is the same additions in the same order on every rank: every rank holds the same bits.
Ranks that reduce different lengths (they disagree about the schedule) raise instead of summing garbage.

**The barrier** is a counter per rank: rank r stores the collective's number in its counter and waits until every
counter has reached it: a short spin, then sleeps of growing length (at most 200 us: a waiting rank leaves the core
to the worker's other threads). Stores are ordered (x86's TSO: the region is used only on x86-64, see
``usable``), so a counter seen means the data written before it is there. While waiting, every few milliseconds
the rank checks its ring connections (a peer that died closed them: ``RankLost`` at once, as over TCP; a peer that
sent data there is in another collective: the ranks disagree about the schedule), the driver's abort flag and the
group's timeout; counters are read again after such a finding, since a peer that completed the collective may have
closed its connections at once.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import platform
import socket
import time
import uuid

import numpy as np

SMALL_BYTES = 256 << 10  # at most this: every rank sums every slot (one barrier instead of two)
LINE = 64  # bytes per rank's line (counter, length): one cache line each, so ranks never write the same line
CHECK_SECONDS = 0.005  # between looks at the peers' connections, the abort flag and the deadline while waiting
MAX_REGION_BYTES = 1 << 30  # a larger region (a huge model on many ranks) stays on TCP
ORPHAN_SECONDS = 60.0  # a region file this old that nobody holds locked was left by a killed creator
PREFIX = "/dev/shm/phylanx-ring-"


class Disagree(Exception):
    """The ranks are not in the same collective (different lengths, or a peer sent data over the ring)."""


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


def small(capacity: int, dtype) -> bool:
    return capacity * np.dtype(dtype).itemsize <= SMALL_BYTES


def capacity_for(count: int, dtype) -> int:
    """The size class of a buffer of ``count`` elements: a power of two (at least 64) for small buffers, a multiple
    of 1/16 of the power of two below for large ones (at most 6% unused). Small and large classes never meet."""
    if small(count, dtype):
        return max(64, 1 << (count - 1).bit_length())
    step = 1 << max(0, count.bit_length() - 5)
    return -(-count // step) * step


def region_bytes(size: int, capacity: int, dtype) -> int:
    sets = 2 if small(capacity, dtype) else 1
    return sets * (LINE * size + (size + 1) * _rounded(capacity * np.dtype(dtype).itemsize))


def _rounded(nbytes: int) -> int:
    return -(-max(nbytes, 1) // LINE) * LINE


def create(nbytes: int):
    """A new region's file (rank 0): (path, descriptor holding its shared lock), or ("", None) when it cannot be
    made (too large, no room in /dev/shm). ``release`` unlinks it."""
    _remove_orphans()
    if nbytes > MAX_REGION_BYTES:
        return "", None
    path = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return "", None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        os.posix_fallocate(fd, 0, nbytes)  # the pages exist now: no SIGBUS on a full /dev/shm later
    except OSError:
        release(path, fd)
        return "", None
    return path, fd


def release(path: str, fd) -> None:
    """Unlink a region's file (every rank has mapped it or given up) and drop the creator's lock."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    if fd is not None:
        os.close(fd)


def _remove_orphans():
    folder, stem = os.path.split(PREFIX)
    try:
        names = [n for n in os.listdir(folder) if n.startswith(stem)]
    except OSError:
        return
    now = time.time()
    for n in names:
        path = os.path.join(folder, n)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # gone already, or not ours to read
            continue
        try:
            if now - os.fstat(fd).st_mtime < ORPHAN_SECONDS:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its creator holds it
            os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)


class Region:
    """A mapped region for buffers of up to ``capacity`` elements of ``dtype`` shared by ``size`` ranks."""

    def __init__(self, path: str, size: int, rank: int, capacity: int, dtype):
        self.size, self.rank, self.capacity, self.dtype = size, rank, capacity, np.dtype(dtype)
        nbytes = capacity * self.dtype.itemsize
        total = region_bytes(size, capacity, dtype)
        self._map = _mapped(path, total)
        raw = np.frombuffer(self._map, np.uint8)
        n_sets = 2 if small(capacity, dtype) else 1
        part = total // n_sets
        step = _rounded(nbytes)
        self.sets = []
        for s in range(n_sets):
            base = s * part
            lines = raw[base:base + LINE * size].view(np.int64).reshape(size, LINE // 8)
            at = base + LINE * size
            slots = [raw[at + i * step:at + i * step + nbytes].view(self.dtype) for i in range(size)]
            result = raw[at + size * step:at + size * step + nbytes].view(self.dtype)
            self.sets.append((lines[:, 0], lines[:, 1], slots, result))
        self.seq = 0  # collectives done: the next one waits for counters >= 2 seq + 1
        self._chunks: dict = {}

    def slot(self, count: int) -> np.ndarray:
        """This rank's slot of the next collective: a caller that computes its buffer here saves the copy in."""
        return self.sets[self.seq % len(self.sets)][2][self.rank][:count]

    def chunk(self, count: int) -> slice:
        """This rank's part of a buffer of ``count`` elements in a reduce-scatter (the ring's split)."""
        c = self._chunks.get(count)
        if c is None:
            bounds = np.linspace(0, count, self.size + 1).astype(np.int64)
            c = self._chunks[count] = slice(int(bounds[self.rank]), int(bounds[self.rank + 1]))
        return c

    def allreduce(self, buf: np.ndarray, wait) -> np.ndarray:
        """The sum of every rank's ``buf`` (1-D, contiguous, at most ``capacity`` elements): ``buf`` itself for a
        small buffer that is not the slot, a new array for a small one that is, and a read-only array of the region
        for a large one (valid until this rank's next collective). ``wait(counters, target)`` returns once every
        counter is at least ``target``. Raises Disagree when the ranks' lengths differ."""
        counters, slots, result, mine = self._arrive(buf, wait)
        if small(self.capacity, self.dtype):
            out = np.empty_like(buf) if buf.ctypes.data == mine.ctypes.data else buf  # never a shared array:
            np.add(slots[0], slots[1], out=out)  # every rank writes all of it
            for s in slots[2:]:
                out += s
            return out
        self._sum_chunk(slots, result)
        counters[self.rank] = 2 * self.seq
        wait(counters, 2 * self.seq)
        view = result.view()
        view.flags.writeable = False  # every rank reads this memory: a write would change the others' sum
        return view

    def reduce_apply(self, buf: np.ndarray, wait, apply, parts: bool = False) -> None:
        """A large buffer's reduce-scatter without its all-gather: ``apply(chunk, total)`` gets this rank's part
        (``chunk(n)``) and the sum of every rank's ``buf`` there, the same bits as ``allreduce`` gives, then one
        barrier: when this returns, every rank's ``apply`` has run (nobody reads the whole sum). With ``parts``,
        ``total`` is the list of every rank's ``buf`` at that part, in rank order (``apply`` adds them in its own
        pass: no result written and read back)."""
        if small(self.capacity, self.dtype):
            raise ValueError("reduce_apply is for buffers of more than SMALL_BYTES")
        counters, slots, result, _ = self._arrive(buf, wait)
        if parts:
            c = self.chunk(result.size)
            apply(c, [s[c] for s in slots])  # (read only: no rank writes its slot before the closing barrier)
        else:
            c = self._sum_chunk(slots, result)
            apply(c, result[c])  # (this rank's part of the result: nobody else reads or writes it)
        counters[self.rank] = 2 * self.seq
        wait(counters, 2 * self.seq)

    def _arrive(self, buf, wait):
        """This rank's ``buf`` in its slot, then the first barrier: (counters, every slot, the result buffer, this
        rank's slot), each cut to ``buf``'s length."""
        counters, lengths, slots, result = self.sets[self.seq % len(self.sets)]
        self.seq += 1
        n = buf.size
        slots = [s[:n] for s in slots]
        mine = slots[self.rank]
        if buf.ctypes.data != mine.ctypes.data:
            np.copyto(mine, buf)
        lengths[self.rank] = n
        counters[self.rank] = 2 * self.seq - 1  # everything above is written before this store (x86 TSO)
        wait(counters, 2 * self.seq - 1)
        if np.any(lengths != n):
            raise Disagree(f"the ranks reduce buffers of {sorted(set(lengths.tolist()))} elements")
        return counters, slots, result[:n], mine

    def _sum_chunk(self, slots, result) -> slice:
        """This rank's chunk of the sum into ``result``: every slot's, in rank order."""
        c = self.chunk(result.size)
        np.add(slots[0][c], slots[1][c], out=result[c])
        for s in slots[2:]:
            result[c] += s[c]
        return c

    def close(self):
        self.sets = []
        try:
            self._map.close()
        except BufferError:  # a view of it is still held (a result the caller kept): the mapping goes with it
            pass


def _mapped(path: str, total: int) -> mmap.mmap:
    """The file at ``path`` (made by the driver, ``total`` bytes: anything else is an OSError) mapped shared."""
    fd = os.open(path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size != total:
            raise OSError(f"{path} has {os.fstat(fd).st_size} bytes, expected {total}")
        return mmap.mmap(fd, total)
    finally:
        os.close(fd)


def vectors_bytes(count: int, dtype, k: int) -> int:
    return k * _rounded(count * np.dtype(dtype).itemsize)


class Vectors:
    """``k`` vectors of ``count`` elements of ``dtype`` in a region every rank maps (no counters: the caller orders
    its reads and writes with a Region's barriers), each starting at a multiple of 64 bytes."""

    def __init__(self, path: str, count: int, dtype, k: int):
        total = vectors_bytes(count, dtype, k)
        self._map = _mapped(path, total)
        raw, step = np.frombuffer(self._map, np.uint8), total // k
        self.arrays = [raw[i * step:i * step + count * np.dtype(dtype).itemsize].view(dtype) for i in range(k)]

    def close(self):
        self.arrays = []
        try:
            self._map.close()
        except BufferError:  # a view of it is still held: the mapping goes with it
            pass


def peer_state(sock: socket.socket) -> str:
    """"closed" when the peer of ``sock`` (a plain socket on a duplicate of a ring connection's descriptor) closed
    its end, "data" when it sent something, "idle" otherwise: a peek, without waiting or consuming anything."""
    try:
        return "closed" if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"" else "data"
    except (BlockingIOError, InterruptedError):
        return "idle"
    except OSError:
        return "closed"


def wait_all(counters, target: int, check) -> None:
    """Until every counter is at least ``target``: spin briefly, then sleep a little longer each time; ``check()``
    every CHECK_SECONDS (it raises when the group must give up). What ``check`` finds is acted on only if the
    counters, read again after it, still fall short."""
    for _ in range(200):  # a few tens of microseconds: the usual case when the ranks arrive together
        if counters.min() >= target:
            return
    pause, next_check = 2e-5, time.monotonic() + CHECK_SECONDS
    while counters.min() < target:
        time.sleep(pause)
        pause = min(pause * 1.5, 2e-4)
        now = time.monotonic()
        if now >= next_check:
            try:
                check()
            except BaseException:
                if counters.min() >= target:  # the peer finished this collective, then closed or moved on
                    return
                raise
            next_check = now + CHECK_SECONDS
