"""The store's file on disk: its directory, its permissions, and a sanity check of its header.

Why this exists apart from the SQLite code: everything here happens before SQLite sees the
file. Run records hold task text, prompts and model output, so the file is private to its
user from the first byte (created 0600 in a directory created 0700; SQLite gives the -wal and
-shm files the mode of the database file). And a truncated or foreign file must be refused
with a clear reason before SQLite is allowed to write anything into it: SQLite itself trusts
a header's page count and only fails later, on whichever page happens to be missing.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

from subagents.logs import get_logger
from subagents.store.base import StoreError

log = get_logger("subagents.store")


class _Closes(Protocol):
    def close(self) -> None: ...


T = TypeVar("T", bound=_Closes)

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
FILE_MODE = 0o600
DIR_MODE = 0o700


def prepare_file(path: Path) -> bool:
    """Make sure ``path`` exists as a private file in an existing directory.

    Creates missing directories (the last one 0700) and a missing file (0600). An existing
    file keeps its mode: its owner chose it. Returns True if the file was created here.
    Raises StoreError naming the path for a directory that cannot be made or written, a path
    that is a directory, or a file that cannot be opened for reading and writing.
    """
    parent = path.parent
    if not parent.exists():
        try:
            parent.mkdir(mode=DIR_MODE, parents=True)
            os.chmod(parent, DIR_MODE)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass  # another process made it first
        except OSError as exc:
            raise StoreError(
                f"{path}: cannot create the store's directory {parent}: {exc.strerror}"
            ) from exc
    if not parent.is_dir():
        raise StoreError(f"{path}: the store's directory {parent} is not a directory")
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not a store file")
    created = False
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
        created = True
    except FileExistsError:
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise _open_error(path, exc, creating=False) from exc
    except OSError as exc:
        raise _open_error(path, exc, creating=True) from exc
    try:
        if created:
            os.fchmod(fd, FILE_MODE)  # O_CREAT's mode is masked by the umask too
    finally:
        os.close(fd)
    if not os.access(parent, os.W_OK | os.X_OK):
        # WAL mode needs to create the -wal and -shm files beside the database.
        raise StoreError(
            f"{path}: read-only directory {parent}: the store needs to create its "
            f"-wal and -shm files there"
        )
    if created:
        log.info("store.file_created", path=str(path))
    return created


def _open_error(path: Path, exc: OSError, *, creating: bool) -> StoreError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        if creating:
            return StoreError(
                f"{path}: read-only directory {path.parent}: cannot create the store file "
                f"({exc.strerror})"
            )
        return StoreError(
            f"{path}: read-only path: cannot open the store for writing ({exc.strerror})"
        )
    return StoreError(f"{path}: cannot open the store: {exc.strerror}")


def check_header(path: Path) -> None:
    """Refuse a file that is not a whole SQLite database. An empty file is fine (a new store).

    Checks the magic string, the page size, and that the file holds as many pages as its
    header says. The page count is only trusted when SQLite itself would trust it (the
    change counter equals the version-valid-for number) and when no write-ahead log is
    present: a crash during a checkpoint can leave page 1 ahead of the file, and SQLite
    repairs that from the log when it opens the file.
    """
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as f:
        header = f.read(HEADER_SIZE)
    if not header.startswith(SQLITE_MAGIC[: len(header)]) or len(header) < len(SQLITE_MAGIC):
        raise StoreError(
            f"{path}: not a SQLite database (it starts with {header[:16]!r}); refusing to "
            f"overwrite it"
        )
    if size < HEADER_SIZE:
        raise StoreError(
            f"{path}: truncated database: {size} bytes, less than SQLite's {HEADER_SIZE}-byte "
            f"header"
        )
    raw_page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if raw_page_size == 1 else raw_page_size
    if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
        raise StoreError(
            f"{path}: corrupt database header: page size {raw_page_size} is not a power of two "
            f"between 512 and 65536"
        )
    page_count = int.from_bytes(header[28:32], "big")
    count_valid = page_count > 0 and header[24:28] == header[92:96]
    wal = Path(f"{path}-wal")
    wal_present = wal.exists() and wal.stat().st_size > 0
    if count_valid and not wal_present and size < page_count * page_size:
        raise StoreError(
            f"{path}: truncated database: the header says {page_count} pages of {page_size} "
            f"bytes ({page_count * page_size} bytes) but the file has {size} bytes"
        )


FileKey = tuple[int, int]
"""A file as the kernel knows it (device, inode): two paths to one file are one key."""


class OpenFiles:
    """The database files this process has a SQLite connection to, counted.

    Why: POSIX record locks belong to the process, not to a descriptor, and closing *any*
    descriptor of a file drops *all* of the process's locks on it, SQLite's included. Then
    another process closing its store (``subagents ps``) finds itself the file's last user,
    checkpoints and deletes ``-wal`` and ``-shm`` under this one, whose later commits go to a
    deleted log and are lost with it. So the file is opened with plain descriptors
    (``prepare_file``, ``check_header``) only while this process has no connection to it:
    a file it has open is already prepared and checked. One registry per process
    (``OPEN_FILES``); opening a store and its registration happen under its lock, so no
    thread prepares a file while another has just connected to it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: dict[FileKey, int] = {}

    def open(self, path: Path, connect: Callable[[], T]) -> tuple[T, FileKey]:
        """``connect()`` to ``path``, first preparing and checking the file unless this
        process has it open already; the connection and the file's key (for ``closed``)."""
        with self._lock:
            if _key(path) not in self._count:
                prepare_file(path)
                check_header(path)
            conn = connect()
            key = _key(path)
            if key is None:  # removed since it was connected (``store.unused_file``)
                conn.close()
                raise StoreError(
                    f"{path}: the file was removed as it was being opened (another process "
                    f"took back a store it had made for nothing); nothing was written to it"
                )
            self._count[key] = self._count.get(key, 0) + 1
            return conn, key

    @contextmanager
    def closing(self, key: FileKey) -> Iterator[None]:
        """Close a connection inside (the registry's lock held, so no thread opens plain
        descriptors on the file until it is closed), then forget it."""
        with self._lock:
            try:
                yield
            finally:
                left = self._count.get(key, 0) - 1
                if left > 0:
                    self._count[key] = left
                else:
                    self._count.pop(key, None)


def _key(path: Path) -> FileKey | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


OPEN_FILES = OpenFiles()
"""This process's registry of open store files."""
