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
run never put its own there (else removed).  A leftover is known by its owner marker
(:data:`OWNER_MARKER`: the process id and start time of the run that made it), never by
its name alone: a user's own ``.OUT.old-1999`` is left as it is.

A single file is written to a temporary sibling, synced and renamed over the target
(:func:`write_atomic`): a full disk leaves the old file, or none, never a 0-byte one.

An ``OUT`` that is a symbolic link stands for where it points: the results go there and the
link stays.

**One owner per results folder.**  Every results folder a command writes holds
:data:`RESULTS_MARKER`, the command's kind of results; a folder made before the marker is
known by its kind's own file (:data:`KNOWN_BY`).  A command writes only into a new or empty
folder, or one of its own kind; ``qcn run --force`` replaces only a folder of the project's;
the root folder, a system folder and a folder of anyone else's files are refused in one line
(:func:`check_results_folder`).  docs/reliability.md gives the reasons for these choices.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from qcn.core.errors import QcnError
from qcn.core.processes import process_start_ticks

PARTIAL_MARKER = "PARTIAL"
"""A file in a results directory whose writing has not finished (removed at the end)."""
OWNER_MARKER = ".qcn-owner"
"""A file in every staging directory a run makes, and in old results it renames aside:
``PID START_TICKS BOOT_ID``, the process that made it.  A leftover is a run's only if it
holds one naming its own PID: a user's ``.t.old-1999`` is theirs, whatever its name."""
RESULTS_MARKER = ".qcn-results"
"""A file in every results folder a command writes (``qcn run``, ``sweep``, ``tune``,
``compare``, ``schemes``): its kind of results, one word of :data:`KINDS`.  Unlike
:data:`OWNER_MARKER` it stays: it is what makes a folder the project's."""
KINDS = {
    "run": "a run's results (qcn run)",
    "sweep": "a sweep (qcn sweep)",
    "study": "a study (qcn tune)",
    "compare": "a comparison (qcn compare)",
    "schemes": "a comparison of schemes (qcn schemes)",
}
"""Each kind of results, as a refusal names it."""
KNOWN_BY = (
    ("sweep.json", "sweep"),
    ("study.json", "study"),
    ("study.journal", "study"),
    ("compare.json", "compare"),
    ("schemes.json", "schemes"),
    ("summary.json", "run"),
)
"""How a folder written before :data:`RESULTS_MARKER` is known: its kind's own file, in this
order (a study's folder holds a run.toml too; a run's results always had summary.json)."""
SYSTEM_FOLDERS = frozenset(
    Path(f"/{name}")
    for name in ("bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32",
                 "media", "mnt", "opt", "proc", "root", "run", "sbin", "snap", "srv", "sys",
                 "tmp", "usr", "var")
)  # fmt: skip
"""The system's own folders (the Filesystem Hierarchy Standard's top level); so are the
folders just below /usr, /var and /home: never a results folder, whatever they hold."""
_SYSTEM_PARENTS = (Path("/usr"), Path("/var"), Path("/home"))
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
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


def write_atomic(path: Path, data: str | bytes, *, durable: bool = True) -> None:
    """Write ``path`` whole or not at all: into a temporary sibling of this process's own,
    synced (unless not ``durable``: a table rewritten as each point lands), then renamed
    over it.  Raises OSError (the temporary file removed)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    raw = data.encode() if isinstance(data, str) else data
    try:
        with tmp.open("wb") as f:
            f.write(raw)
            f.flush()
            if durable:
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
    try:
        full = out.absolute()
    except FileNotFoundError:  # a relative path from a directory that was deleted
        raise error(
            f"{option} {out}: the current directory no longer exists: cd to one that does, "
            "or give an absolute path"
        ) from None
    _check_length(full, error, option)
    try:
        if not out.is_symlink():
            return out
        # (a link that points nowhere yet is where the results go; a loop is refused: it
        # made the run say that another run had put its results there)
        with contextlib.suppress(FileNotFoundError):
            os.stat(out)
        target = Path(os.path.realpath(out))
    except OSError as e:
        raise error(f"{option} {out}: {e.strerror}") from None
    _check_length(target, error, option)
    return target


def _check_length(full: Path, error: Callable[[str], QcnError], option: str) -> None:
    length, last = len(os.fsencode(full)), len(os.fsencode(full.name))
    if length + STAGING_OVERHEAD >= PATH_MAX or last + STAGING_OVERHEAD > NAME_MAX:
        raise error(
            f"{option}: the path is too long ({length} bytes, its last part {last}; at most "
            f"{PATH_MAX - STAGING_OVERHEAD - 1} and {NAME_MAX - STAGING_OVERHEAD})"
        )


def results_kind(folder: Path) -> str | None:
    """The kind of results ``folder`` holds (:data:`KINDS`): its marker's, else that of its
    kind's own file (:data:`KNOWN_BY`); None if it is not the project's."""
    try:
        marked = (folder / RESULTS_MARKER).read_text().strip()
    except (OSError, UnicodeDecodeError):
        marked = ""
    if marked in KINDS:
        return marked
    for name, kind in KNOWN_BY:
        if (folder / name).is_file():
            return kind
    return None


def mark_results(folder: Path, kind: str) -> None:
    """Mark ``folder`` as results of ``kind`` (:data:`RESULTS_MARKER`).  Raises OSError.
    (Written in place: a temporary sibling left by a kill would be taken for results.)"""
    (folder / RESULTS_MARKER).write_text(kind + "\n")


def system_folder(path: Path) -> str:
    """Why ``path`` (absolute) is the system's ("" if it is not): the root folder, one of
    :data:`SYSTEM_FOLDERS`, or a folder just below /usr, /var or /home."""
    real = Path(os.path.realpath(path))
    if real == Path(real.anchor):
        return "the root folder"
    if real in SYSTEM_FOLDERS or real.parent in _SYSTEM_PARENTS:
        return "a system folder"
    return ""


def check_results_folder(
    out: Path,
    error: Callable[[str], QcnError],
    *,
    kind: str | None,
    replace: bool = False,
    renamed: bool = False,
    option: str = "--out",
) -> str | None:
    """Whether a command may write its ``kind`` of results at ``out``: the kind of results
    it holds already (None: absent, or an empty folder).  Refused in one line (``error``):
    the root folder or a system folder (whatever they hold), a file, a folder of files that
    are not the project's results (``replace``: said as ``--force`` would have replaced
    them), a folder of another ``kind`` (None: any kind is taken), and, where the results
    are ``renamed`` into place, a mount point (a rename cannot replace one)."""
    why = system_folder(out)
    if why:
        raise error(f"{option} {out}: {why} is never a results folder; give a folder of your own")
    try:
        if not os.path.lexists(out):
            return None
        if not out.is_dir():
            raise error(f"{option} {out}: not a directory")
        if renamed and os.path.ismount(out):
            raise error(
                f"{option} {out}: a mount point: results are put in place by renaming a "
                "folder beside it, which cannot replace it; give a folder inside it"
            )
        names = sorted(os.listdir(out))
        held = results_kind(out) if names else None
        if names and held is None:
            shown = [f"{n}/" if (out / n).is_dir() else n for n in names[:3]]
            some = ", ".join(shown) + (", ..." if len(names) > 3 else "")
            but = ": --force replaces only qcn's own;" if replace else ";"
            raise error(
                f"{option} {out} holds files that are not qcn's results ({some}){but} choose "
                f"another {option} (a new or empty folder)"
            )
    except OSError as e:
        raise error(f"{option} {out}: {e.strerror}") from None
    if kind is not None and held not in (None, kind):
        raise error(
            f"{option} {out} holds {KINDS[held]}, not {KINDS[kind]}; choose another {option}"
        )
    return held


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return "unknown"


def owner_text(pid: int | None = None, ticks: int | None = None) -> str:
    """What :data:`OWNER_MARKER` holds for process ``pid`` (this one), started at ``ticks``
    (clock ticks since boot: its own start time, if None)."""
    pid = os.getpid() if pid is None else pid
    ticks = process_start_ticks(pid) if ticks is None else ticks
    return f"{pid} {ticks} {_boot_id()}\n"


def claim(directory: Path) -> None:
    """Mark ``directory`` as this process's (:data:`OWNER_MARKER`)."""
    (directory / OWNER_MARKER).write_text(owner_text())


def make_staging(staging: Path) -> None:
    """Make the directory ``staging`` (and its parents) and mark it this process's: only
    so marked is a leftover ever moved or removed.  Raises OSError (nothing left made)."""
    staging.mkdir(parents=True)
    try:
        claim(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def owner(path: Path, pid: int) -> str:
    """Who made ``path``, a directory named with process id ``pid``: "live" (a run going
    on), "dead" (a run that ended without cleaning up), or "" (not a run: no marker of
    ``pid``'s, a user's own directory)."""
    try:
        if path.is_symlink() or not path.is_dir():
            return ""
        words = (path / OWNER_MARKER).read_text().split()
    except (OSError, UnicodeDecodeError):
        return ""
    if len(words) != 3 or words[0] != str(pid) or not words[1].isdigit():
        return ""
    alive = words[2] == _boot_id() and process_start_ticks(pid) == int(words[1])
    return "live" if alive else "dead"


SCRATCH_PREFIX = "qcn-point-"
"""A sweep's or a study's point keeps what its run writes besides its Trace (a Mininet
run's logs) in a temporary directory of this name (:func:`scratch`)."""


@contextlib.contextmanager
def scratch(prefix: str = SCRATCH_PREFIX) -> Iterator[Path]:
    """A temporary directory of this process's, marked (:data:`OWNER_MARKER`) and named
    with its process id, removed after the block; one a process killed outright left (kill
    -9 of a sweep left an empty ``/tmp/qcn-point-XXXX`` per point in flight) is removed by
    the next (:func:`remove_dead_scratch`)."""
    # Made hidden, marked, then renamed: a kill between the folder and its marker left an
    # unmarked qcn-point-PID-XXXX that no later run would touch (CI, 2026-11-28).
    staging = Path(tempfile.mkdtemp(prefix=f".{prefix}{os.getpid()}-"))
    path = staging.with_name(staging.name[1:])
    try:
        claim(staging)
        staging.rename(path)
        yield path
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(path, ignore_errors=True)


def remove_dead_scratch(prefix: str = SCRATCH_PREFIX) -> None:
    """Remove the scratch directories (:func:`scratch`) of processes that are gone: only
    those that hold their process's marker (a user's own ``qcn-point-...`` is left)."""
    where = Path(tempfile.gettempdir())
    pattern = re.compile(rf"(?P<hidden>\.?){re.escape(prefix)}(?P<pid>\d+)-.+")
    try:
        names = os.listdir(where)
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m is None:
            continue
        pid = int(m["pid"])
        # A hidden one is a scratch folder not yet named (a kill before its marker was
        # written): only :func:`scratch` makes that name; its process gone, it goes.
        if m["hidden"]:
            gone = process_start_ticks(pid) is None
        else:
            gone = owner(where / name, pid) == "dead"
        if gone:
            shutil.rmtree(where / name, ignore_errors=True)


def unmark(directory: Path) -> None:
    """Remove the owner marker from results put in place (they are the user's now)."""
    with contextlib.suppress(OSError):
        (directory / OWNER_MARKER).unlink(missing_ok=True)


def remove_own(path: Path) -> bool:
    """Remove ``path``, named with this process's id, if a run made it (this process, or a
    dead one that had the same id) or it is absent; False if something else is there (left
    alone)."""
    if not os.path.lexists(path):
        return True
    if not owner(path, os.getpid()):
        return False
    shutil.rmtree(path)
    return True


def staging_path(out: Path, pid: int | None = None) -> Path:
    return out.with_name(f".{out.name}.partial-{os.getpid() if pid is None else pid}")


def old_path(out: Path, pid: int | None = None) -> Path:
    return out.with_name(f".{out.name}.old-{os.getpid() if pid is None else pid}")


def publish(staging: Path, out: Path, *, replace: bool) -> None:
    """Put the directory ``staging`` at ``out``.  Without ``replace``, only if ``out`` is free
    (absent, or an empty directory): FileExistsError if it holds anything, as it does when
    another run published there meanwhile.  With ``replace``, the old ``out`` goes: it is
    first marked this run's and renamed aside, so that a run killed between the two renames
    leaves old results the next run knows for a run's."""
    if not replace:
        try:
            rename_noreplace(staging, out)
        except FileExistsError:
            _remove_if_empty(out)
            rename_noreplace(staging, out)
        unmark(out)
        return
    old = old_path(out)
    with contextlib.suppress(OSError):  # (absent, or unwritable: then never restored)
        claim(out)
    try:
        os.rename(out, old)
    except FileNotFoundError:
        os.rename(staging, out)
        unmark(out)
        return
    # Claimed again once aside: another run that claimed the same ``out`` meanwhile (two
    # sweeps putting one point in place) left its own marker in it, and this run's old
    # results, named with its id, were then not its own to remove (CI, 1 in 15).
    with contextlib.suppress(OSError):
        claim(old)
    os.rename(staging, out)
    unmark(out)
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
    """The stagings and old results in ``directory`` of runs that died, as (path, the name
    they stand for, "partial" or "old", the process id): only those that hold the marker of
    the process their name gives (:func:`owner`).  A live run's are not, nor a directory
    that merely has such a name."""
    try:
        names = sorted(p.name for p in directory.iterdir())
    except OSError:
        return []
    out = []
    for name in names:
        m = LEFTOVER.fullmatch(name)
        if m is not None and owner(directory / name, int(m["pid"])) == "dead":
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
        unmark(out)
        return [f"restored {out}: a run (PID {pid}) died replacing it"]
    content = {p.name for p in path.iterdir()} - {OWNER_MARKER, RESULTS_MARKER}
    if content and content != {PARTIAL_MARKER}:
        # Beside OUT, not at it: the run about to start means to write OUT.
        where = keep_partial(path, out, at_out=False)
        return [f"a run (PID {pid}) died unfinished: its partial results are in {where}/"]
    shutil.rmtree(path)
    return []
