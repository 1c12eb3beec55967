"""Results put where the user finds them whole, or not at all: the one way every command
publishes what it wrote (``qcn run``'s results directory, a sweep's points, ``qcn params
--write``, ``qcn wireshark --install``).

A directory of results is written into a hidden staging sibling, ``.OUT.partial-PID``, and
renamed to ``OUT`` once complete.  The rename is the check: without ``--force`` it is
``renameat2(RENAME_NOREPLACE)``, so of two runs to one fresh ``OUT`` only the first to
finish publishes, and the second is told (it used to replace the first's results, both
reporting success).  With ``--force`` the old ``OUT`` is first renamed aside to
``.OUT.old-PID``, then removed.  What an interrupted or failed run wrote goes, still marked
partial, to ``OUT`` if that is free, else to the first free of ``OUT.partial``,
``OUT.partial-2``, ... : an earlier run's partial results are never deleted.

A process killed outright (kill -9, a full disk at the wrong moment) leaves its staging or
its old results behind; the next run to the same ``OUT`` finds them
(:func:`recover_leftovers`): a dead run's staging that holds results goes beside ``OUT``
as partial results (never at ``OUT``, which the new run means to write), an empty one is
removed, and old results are restored to ``OUT`` if the dead
run never put its own there (else removed).

A single file is written to a temporary sibling, synced and renamed over the target
(:func:`write_atomic`): a full disk leaves the old file, or none, never a 0-byte one.

An ``OUT`` that is a symbolic link stands for where it points: the results go there and the
link stays.  docs/reliability.md gives the reasons for these choices.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from qcn.core.errors import QcnError
from qcn.core.processes import process_started_at

PARTIAL_MARKER = "PARTIAL"
"""A file in a results directory whose writing has not finished (removed at the end)."""
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")
NAME_MAX = os.pathconf("/", "PC_NAME_MAX")
STAGING_OVERHEAD = len(".") + len(".partial-") + 10
"""What a staging name adds to OUT's own (a dot, the tag, a process id)."""
RENAME_NOREPLACE = 1
AT_FDCWD = -100


def _renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        func: Callable[..., int] = libc.renameat2
    except (OSError, AttributeError):
        return None
    return func


_RENAMEAT2 = _renameat2()


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` unless ``dst`` exists (FileExistsError), in one step.

    Where the C library or the file system lacks renameat2, the check and the rename are two
    steps (another process may come between them)."""
    if _RENAMEAT2 is not None:
        if _RENAMEAT2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_NOREPLACE):
            code = ctypes.get_errno()
            if code not in (errno.ENOSYS, errno.EINVAL):
                raise OSError(code, os.strerror(code), str(src), None, str(dst))
        else:
            return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or not at all: into a temporary sibling, synced, then renamed
    over it.  Raises OSError (the temporary file removed)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with tmp.open("wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def resolve_out(out: Path, error: Callable[[str], QcnError], option: str = "--out") -> Path:
    """Where the results of ``out`` go: checked for length (a staging sibling must fit in
    PATH_MAX and NAME_MAX), and followed if it is a symbolic link.  Raises ``error``."""
    if str(out) in ("", "."):
        raise error(f"{option}: give a directory for the results (not the current one)")
    _check_length(out.absolute(), error, option)
    try:
        if not out.is_symlink():
            return out
        target = Path(os.path.realpath(out))
    except OSError as e:
        raise error(f"{option}: {e.strerror}") from None
    _check_length(target, error, option)
    return target


def _check_length(full: Path, error: Callable[[str], QcnError], option: str) -> None:
    length, last = len(os.fsencode(full)), len(os.fsencode(full.name))
    if length + STAGING_OVERHEAD >= PATH_MAX or last + STAGING_OVERHEAD > NAME_MAX:
        raise error(
            f"{option}: the path is too long ({length} bytes, its last part {last}; at most "
            f"{PATH_MAX - STAGING_OVERHEAD - 1} and {NAME_MAX - STAGING_OVERHEAD})"
        )


def staging_path(out: Path, pid: int | None = None) -> Path:
    return out.with_name(f".{out.name}.partial-{os.getpid() if pid is None else pid}")


def old_path(out: Path, pid: int | None = None) -> Path:
    return out.with_name(f".{out.name}.old-{os.getpid() if pid is None else pid}")


def publish(staging: Path, out: Path, *, replace: bool) -> None:
    """Put the directory ``staging`` at ``out``.  Without ``replace``, only if ``out`` is free
    (absent, or an empty directory): FileExistsError if it holds anything, as it does when
    another run published there meanwhile.  With ``replace``, the old ``out`` goes."""
    if not replace:
        try:
            rename_noreplace(staging, out)
        except FileExistsError:
            _remove_if_empty(out)
            rename_noreplace(staging, out)
        return
    old = old_path(out)
    try:
        os.rename(out, old)
    except FileNotFoundError:
        os.rename(staging, out)
        return
    os.rename(staging, out)
    shutil.rmtree(old, ignore_errors=True)


def _remove_if_empty(out: Path) -> None:
    """Remove ``out`` if it is an empty directory (it holds no results); else
    FileExistsError."""
    try:
        if out.is_dir() and not out.is_symlink():
            out.rmdir()  # (fails if something arrived meanwhile)
            return
    except OSError:
        pass
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(out))


def keep_partial(staging: Path, out: Path, *, at_out: bool = True) -> Path:
    """Put what an interrupted or failed run wrote (``staging``) where the user finds it,
    never over anything: ``out`` if it is free (and ``at_out``), else the first free of
    ``out.partial``, ``out.partial-2``, ...; return where."""
    n = 0 if at_out else 1
    while True:
        n += 1
        where = out.with_name(out.name + ("", ".partial", f".partial-{n - 1}")[min(n, 3) - 1])
        try:
            publish(staging, where, replace=False)
        except FileExistsError:
            continue
        return where


LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>partial|old)-(?P<pid>\d+)")


def dead_leftovers(directory: Path) -> list[tuple[Path, str, str, int]]:
    """The stagings and old results in ``directory`` whose process died (a live one's, of
    a run going on, are not), as (path, the name they stand for, "partial" or "old", the
    process id)."""
    try:
        names = sorted(p.name for p in directory.iterdir())
    except OSError:
        return []
    out = []
    for name in names:
        m = LEFTOVER.fullmatch(name)
        if m is not None and not _owner_alive(directory / name, int(m["pid"])):
            out.append((directory / name, m["name"], m["kind"], int(m["pid"])))
    return out


def recover_leftovers(out: Path) -> list[str]:
    """What runs to ``out`` that died outright left beside it, dealt with; a line for the
    user about each."""
    said: list[str] = []
    for path, name, kind, pid in dead_leftovers(out.parent):
        if name != out.name:
            continue
        try:
            said += _recover(path, out, kind, pid)
        except OSError as e:
            said.append(f"could not clean up {path} ({e.strerror}); remove it by hand")
    return said


def _recover(path: Path, out: Path, kind: str, pid: int) -> list[str]:
    if kind == "old":
        if os.path.lexists(out):
            shutil.rmtree(path)
            return []
        os.rename(path, out)
        return [f"restored {out}: a run (PID {pid}) died replacing it"]
    if path.is_dir() and not path.is_symlink():
        content = [p.name for p in path.iterdir()]
        if content and content != [PARTIAL_MARKER]:
            # Beside OUT, not at it: the run about to start means to write OUT.
            where = keep_partial(path, out, at_out=False)
            return [f"a run (PID {pid}) died unfinished: its partial results are in {where}/"]
        shutil.rmtree(path)
    else:
        path.unlink()
    return []


def _owner_alive(path: Path, pid: int) -> bool:
    """Whether process ``pid`` is alive and older than ``path``'s last change (a process
    that reused the id of a dead run's started after it)."""
    started = process_started_at(pid)
    if started is None:
        return False
    try:
        changed = path.lstat().st_ctime
    except OSError:
        return False
    return started <= changed + 1.0  # (clock ticks: start times are coarse)
