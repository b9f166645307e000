"""One io_uring request from the command line, standard library only (no liburing): what a
hostile shell in the sandbox can run to reach the kernel without the system call a seccomp
filter sees. A ring's requests are not system calls: ``IORING_OP_SOCKET`` makes a socket
without ``socket()``, ``IORING_OP_SETXATTR`` sets an attribute without ``setxattr()``.

    python io_uring_probe.py connect PATH          # a unix socket made by the ring, connected
    python io_uring_probe.py setxattr PATH NAME VALUE

Prints what happened; exits 0 only when the ring did what was asked."""

from __future__ import annotations

import ctypes
import mmap
import socket
import struct
import sys

IO_URING_SETUP, IO_URING_ENTER = 425, 426  # alike on x86_64 and aarch64
OP_SETXATTR, OP_SOCKET = 42, 45
ENTER_GETEVENTS = 1
FEAT_SINGLE_MMAP = 1
OFF_CQ_RING, OFF_SQES = 0x8000000, 0x10000000


def submit(opcode: int, *, fd: int = 0, off: int = 0, addr: int = 0, length: int = 0,
           addr3: int = 0) -> int:  # fmt: skip
    """Submit one request, wait for it; its result (``-errno`` on failure, as the kernel's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    ring = libc.syscall(IO_URING_SETUP, 4, params)
    if ring < 0:
        return -ctypes.get_errno()
    sq_entries, cq_entries, _, _, _, features = struct.unpack_from("6I", params.raw, 0)
    _, sq_tail, sq_mask, _, _, _, sq_array = struct.unpack_from("7I", params.raw, 40)
    cq_head, _, cq_mask, _, _, cqes = struct.unpack_from("6I", params.raw, 80)
    rw = mmap.PROT_READ | mmap.PROT_WRITE
    sq_size, cq_size = sq_array + 4 * sq_entries, cqes + 16 * cq_entries
    sq = mmap.mmap(ring, max(sq_size, cq_size), mmap.MAP_SHARED, rw, offset=0)
    cq = (
        sq
        if features & FEAT_SINGLE_MMAP
        else mmap.mmap(ring, cq_size, mmap.MAP_SHARED, rw, offset=OFF_CQ_RING)
    )
    sqes = mmap.mmap(ring, 64 * sq_entries, mmap.MAP_SHARED, rw, offset=OFF_SQES)
    sqes[0:64] = struct.pack(
        "=BBHiQQIIQHHIQQ", opcode, 0, 0, fd, off, addr, length, 0, 1, 0, 0, 0, addr3, 0
    )
    tail = struct.unpack_from("I", sq, sq_tail)[0]
    struct.pack_into("I", sq, sq_array + 4 * (tail & sq_mask), 0)
    struct.pack_into("I", sq, sq_tail, tail + 1)
    if libc.syscall(IO_URING_ENTER, ring, 1, 1, ENTER_GETEVENTS, None, 0) < 0:
        return -ctypes.get_errno()
    head = struct.unpack_from("I", cq, cq_head)[0]
    return int(struct.unpack_from("=QiI", cq, cqes + 16 * (head & cq_mask))[1])


def main(argv: list[str]) -> int:
    if argv[0] == "connect":
        fd = submit(OP_SOCKET, fd=socket.AF_UNIX, off=socket.SOCK_STREAM)
        if fd < 0:
            print(f"ring socket: errno {-fd}")
            return 1
        socket.socket(fileno=fd).connect(argv[1])
        print("ring socket connected")
        return 0
    path, name, value = (ctypes.create_string_buffer(a.encode()) for a in argv[1:4])
    done = submit(
        OP_SETXATTR,
        addr=ctypes.addressof(name),
        off=ctypes.addressof(value),
        length=len(value.value),
        addr3=ctypes.addressof(path),
    )
    print(f"ring setxattr: {'set' if done == 0 else f'errno {-done}'}")
    return 0 if done == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
