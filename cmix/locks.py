"""Locks on outputs and run folders: a second writer stops at once, naming the first.

The locks are the kernel's (flock), so they are released however the holder ends,
``kill -9`` included; the lock files are opened with ``O_NOFOLLOW`` and must be plain
single-link files of the user's, so a planted link is refused rather than overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import time
from pathlib import Path
from typing import Iterator

from .atomic import check_writable_dir, path_identity
from .errors import CmixError


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, holder: str) -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (file ``.cmix.lock`` in it) for the block.

    A second process asking for the same folder fails at once with a CmixError naming
    the holder (``holder`` text, pid, host, start time). The lock is the kernel's
    (flock), so it is released however the holder ends, kill -9 included.
    """
    import fcntl

    folder = check_writable_dir(folder)
    path = folder / ".cmix.lock"
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.EACCES and path.is_file():
            raise CmixError(_not_yours(path, folder)) from None
        why = {errno.ELOOP: "it is a symbolic link; cmix writes its lock only to a plain "
                            "file it made",
               errno.EISDIR: "it is a folder"}.get(err.errno, err.strerror)
        raise CmixError(f"{path}: cannot use this lock file ({why}); remove it") from None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() and stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise CmixError(_not_yours(path, folder))
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise CmixError(f"{path}: not a lock file cmix made (expected a plain file of yours "
                        "with one link; this one is another file or a hard link to one); "
                        "remove it")
    fh = os.fdopen(fd, "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        who = fh.read(4096).strip() or "another process"
        fh.close()
        raise CmixError(f"{folder}: in use by {who}; wait for it to end or use another "
                        "folder") from None
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(f"{holder} (pid {os.getpid()} on {socket.gethostname()}, since "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')})\n")
        fh.flush()
        yield folder
    finally:
        fh.close()


def _not_yours(path: Path, output) -> str:
    """The message for a lock file of ``output`` that another user's cmix left."""
    try:
        import pwd

        owner = pwd.getpwuid(path.stat().st_uid).pw_name
    except (KeyError, OSError, ImportError):
        owner = "another user"
    return (f"{path}: the lock file of {output} belongs to {owner}, whose cmix wrote (or "
            "is writing) it; cmix does not take over another user's lock: ask them, or "
            "remove it if no cmix of theirs runs")


class _OutputLock:
    """An flock on ``.NAME.cmix.lock`` beside an output; the file is removed when the
    lock is released (a SIGKILL leaves it, unlocked: the next writer takes it over)."""

    def __init__(self, output: Path, holder: str):
        import fcntl

        self.path = output.parent / f".{output.name}.cmix.lock"
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        for _ in range(100):                 # the holder may remove the file meanwhile
            try:
                try:
                    fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    fd = os.open(self.path, flags)
            except FileNotFoundError:
                continue
            except OSError as err:
                if err.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise CmixError(f"{output.parent}: no space left on device (creating "
                                    f"the lock of {output}); nothing was written") from None
                if err.errno == errno.ELOOP:
                    raise CmixError(f"{self.path}: cannot use this lock file of {output} (it "
                                    "is a symbolic link; cmix writes its lock only to a plain "
                                    "file it made); remove it") from None
                if err.errno == errno.EISDIR:
                    raise CmixError(f"{self.path}: is a folder, where cmix keeps the lock "
                                    f"file of {output}; remove it") from None
                if err.errno == errno.EACCES and self.path.exists():
                    raise CmixError(_not_yours(self.path, output)) from None
                raise CmixError(f"{output.parent}: cannot write to this folder "
                                f"({err.strerror or err})") from None
            st = os.fstat(fd)
            if st.st_uid != os.getuid() and stat.S_ISREG(st.st_mode):
                os.close(fd)
                raise CmixError(_not_yours(self.path, output))
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                os.close(fd)
                raise CmixError(f"{self.path}: not a lock file cmix made (expected a plain "
                                "file of yours with one link); remove it")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                who = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise CmixError(f"{output}: being written by {who or 'another process'}; "
                                "wait for it to end or choose another output") from None
            if path_identity(self.path) == (st.st_dev, st.st_ino) and st.st_nlink == 1:
                break
            os.close(fd)                     # removed by its holder on release: again
        else:
            raise CmixError(f"{self.path}: the lock of {output} keeps changing; try again")
        self.fd, self.identity = fd, (st.st_dev, st.st_ino)
        with contextlib.suppress(OSError):   # the text only informs (a full disk...)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{holder} (pid {os.getpid()} on {socket.gethostname()}, since "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode(), 0)

    def release(self) -> None:
        if path_identity(self.path) == self.identity:
            with contextlib.suppress(OSError):
                self.path.unlink()
        os.close(self.fd)


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those created, outermost first."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()][::-1]
    for p in missing:
        try:
            p.mkdir()
        except FileExistsError:
            pass
        except OSError as err:
            raise CmixError(f"{p}: cannot write to this folder ({err.strerror or err})") \
                from None
    return missing


@contextlib.contextmanager
def output_locks(paths, holder: str) -> Iterator[None]:
    """Hold the lock of every output in ``paths`` (a file ``.NAME.cmix.lock`` beside
    each, flock) for the block: a second writer of any of them stops at once with a
    CmixError naming the holder (``holder`` text, pid, host, start time). Folders made
    for the locks are removed again when the block leaves them empty."""
    made, held = [], []
    try:
        named = {os.path.abspath(p): Path(p) for p in paths}
        for where in sorted(named):
            made += _make_folders(Path(where).parent)
            held.append(_OutputLock(named[where], holder))
        yield
    finally:
        for lock in reversed(held):
            lock.release()
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
