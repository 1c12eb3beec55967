"""What a results directory says about how it was made, so that it can be made again.

Every recorded run (``qcn run``, and each point of ``qcn sweep``, ``qcn compare`` and
``qcn schemes``) writes two files beside its results:

- ``run.toml``: the scenario as the run ran it, every field, with the command line's
  overrides applied and scaled for BMv2 where the run was.  It is a scenario file:
  ``qcn run DIR/run.toml`` runs it again (a scaled scenario's ``[bmv2]`` section is then
  the identity, so it is not scaled twice).  Its header comments name the command, the
  backend, the seed, the date and the versions (p4c's and BMv2's for a BMv2 run), so the
  file alone says what made it.
- ``provenance.json``: what is not a scenario field: the command line, the overrides as
  given, the backend, the random seed and the run's other options, the project's version
  (``git describe --always --dirty`` in a git checkout, else the package's version), p4c's
  and BMv2's versions for BMv2 runs, the machine (cores, CPU, kernel), the files the
  scenario reads (with their SHA-256), the SHA-256 of run.toml's fields and the date.
  ``qcn run --again DIR`` reads both and reruns with the same options, once
  :func:`changed_inputs` found every input as the run read it (docs/reliability.md).

A separate JSON file rather than TOML comments: a rerun reads the options back, and a
researcher's script can read the whole record without parsing comments.  Both files are
written into the run's staging directory, so they are published with the results, whole
(:mod:`qcn.core.publish`).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomli_w

from qcn.core.errors import QcnError
from qcn.core.flows import size_file
from qcn.core.patterns import Kind
from qcn.core.publish import write_atomic

if TYPE_CHECKING:
    from qcn.core.scenario import Scenario

RUN_FILE = "run.toml"
"""The scenario as run: a scenario file."""
PROVENANCE_FILE = "provenance.json"
"""Everything else a rerun needs, and what the run ran on."""
PACKAGE = "qcn-p4"
#: summary.json's fields about the run itself (how long it took on this machine), not its
#: result: a simulator rerun's summary equals the first's but for these.
RUN_ITSELF_KEYS = ("wall_s", "events_per_s")
#: How long a tool may take to say its version.
VERSION_TIMEOUT_S = 10.0

_CHECKOUT = Path(__file__).resolve().parents[2]
_command: list[str] | None = None


class ProvenanceError(QcnError):
    """A results directory that does not say how it was made (no run.toml, a damaged
    provenance.json)."""


def set_command(argv: list[str]) -> None:
    """The command line a run records (``qcn`` and its arguments); ``qcn.cli.main`` sets
    it, as ``sys.argv`` is the test runner's when a test calls ``main``."""
    global _command  # noqa: PLW0603 - one command line per process
    _command = list(argv)


def command_line() -> list[str]:
    if _command is not None:
        return list(_command)
    return ["qcn" if Path(sys.argv[0]).name in ("qcn", "__main__.py") else sys.argv[0],
            *sys.argv[1:]]  # fmt: skip


@functools.cache
def project_version() -> str:
    """``git describe --always --dirty`` of the checkout the code runs from; the package's
    version where it is not a git checkout (an installed ``qcn``)."""
    if (_CHECKOUT / ".git").exists() and shutil.which("git"):
        try:
            out = subprocess.run(
                ["git", "-C", str(_CHECKOUT), "describe", "--always", "--dirty"],
                capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=True,
            ).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            return out
    return package_version()


def package_version() -> str:
    """The installed package's version (pyproject.toml's, its one source), or "unknown"."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def tool_version(binary: str) -> str:
    """What ``binary --version`` says (its first line), or why there is nothing to say."""
    path = shutil.which(binary)
    if path is None:
        return "not found"
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return lines[0].strip() if lines else f"unknown (exit status {done.returncode})"


@functools.cache
def machine() -> dict[str, Any]:
    """The machine a run ran on: what decides an emulation's noise and a benchmark's speed."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu or platform.processor(),
        "kernel": platform.release(),
        "system": platform.system(),
        "arch": platform.machine(),
        "python": platform.python_version(),
    }


def input_paths(sc: Scenario) -> dict[str, Path]:
    """The files ``sc``'s fields name, by field: a topology file, a flow-size CDF (a shipped
    one too: its content is data, not code).  Every file a run reads besides its scenario,
    so the one list that a rerun's check (:func:`changed_inputs`) and a sweep point's key
    (``qcn.lab.sweep.point_key``) hash."""
    from qcn.core.topology import is_generator_spec  # noqa: PLC0415 - docs/layout.md

    found: dict[str, Path] = {}
    if not is_generator_spec(sc.network.topology):
        found["network.topology"] = Path(sc.network.topology)
    if sc.workload.declared.kind is Kind.FLOWS:
        path = size_file(sc.workload.flow_sizes)
        if path is not None:
            found["workload.flow_sizes"] = path
    return found


def file_sha256(path: Path) -> str:
    """``path``'s SHA-256 (OSError if unreadable)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def input_files(sc: Scenario) -> dict[str, dict[str, str]]:
    """The files ``sc``'s fields name (:func:`input_paths`), by field: where they were and
    their SHA-256, since the scenario holds only their names."""
    out = {}
    for field, path in input_paths(sc).items():
        try:
            digest = file_sha256(path)
        except OSError as e:
            digest = f"unreadable ({e.strerror})"
        out[field] = {"path": str(path.resolve()), "sha256": digest}
    return out


def input_digests(sc: Scenario, memo: dict[Path, str] | None = None) -> dict[str, str]:
    """The SHA-256 of every file ``sc`` reads, by field; a ProvenanceError names one that
    cannot be read.  ``memo``: digests already taken (a sweep reads each file once, not
    once a grid point), filled in."""
    memo = {} if memo is None else memo
    out = {}
    for field, path in input_paths(sc).items():
        try:
            out[field] = memo[path] if path in memo else memo.setdefault(path, file_sha256(path))
        except OSError as e:
            raise ProvenanceError(f"{field}: cannot read {path} ({e.strerror})") from None
    return out


def scenario_sha256(data: dict[str, Any]) -> str:
    """The SHA-256 of a scenario's fields (``Scenario.to_dict``), as run.toml holds them:
    what ``--again`` checks run.toml against."""
    blob = json.dumps(data, sort_keys=True, default=repr, allow_nan=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def record(
    sc: Scenario,
    *,
    backend: str,
    run: dict[str, Any],
    overrides: dict[str, Any],
    environment: dict[str, Any],
) -> dict[str, Any]:
    """provenance.json's content.  ``run``: the run's options as a rerun needs them (the
    random seed among them); ``environment``: what it ran on (:func:`environment`)."""
    argv = command_line()
    return {
        "command": shlex.join(argv),
        "argv": argv,
        "scenario": sc.name,
        "overrides": overrides,
        "backend": backend,
        "random_seed": run.get("seed"),
        "run": run,
        **environment,
        "inputs": input_files(sc),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def environment(toolchain: dict[str, str] | None = None) -> dict[str, Any]:
    """The project's version, the toolchain's (``toolchain``: tool -> version, for BMv2
    runs) and the machine."""
    return {
        "version": {"project": project_version(), **(toolchain or {})},
        "machine": machine(),
    }


def write(out: Path, sc: Scenario, provenance: dict[str, Any], *, in_bmv2_units: bool) -> None:
    """run.toml and provenance.json into ``out`` (a run's staging directory);
    ``in_bmv2_units``: the backend ran it scaled for BMv2 (run.toml's header says so)."""
    scaled = in_bmv2_units or provenance["run"].get("scaled_by")
    versions = "; ".join(f"{k} {v}" for k, v in provenance["version"].items())
    header = (
        "# The scenario as this run ran it: every field, overrides applied"
        f"{', scaled for BMv2' if scaled else ''}.\n"
        f"# `qcn run {RUN_FILE}` runs it; `qcn run --again DIR` also takes the seed, backend\n"
        f"# and options this run had ({PROVENANCE_FILE}, which says all of it).\n"
        f"# Made by: {provenance['command']}\n"
        f"# Backend {provenance['backend']}, random seed {provenance['random_seed']}, "
        f"{provenance['date']}; versions: {versions}\n\n"
    )
    data = sc.to_dict()
    # The files it read, by the paths they were read at (a relative path in run.toml would
    # be taken from run.toml's own folder).
    for field, found in provenance.get("inputs", {}).items():
        table, key = field.split(".")
        given = str(data[table][key])
        if ("/" in given or given.endswith((".cdf", ".toml", ".json"))) and not Path(
            given
        ).is_absolute():
            data[table][key] = found["path"]
    write_atomic(out / RUN_FILE, header + tomli_w.dumps(data))
    provenance = {**provenance, "scenario_sha256": scenario_sha256(data)}
    write_atomic(out / PROVENANCE_FILE, json.dumps(provenance, indent=2) + "\n")


def read(directory: Path) -> tuple[Scenario, dict[str, Any]]:
    """The scenario and the provenance a results directory holds, the provenance's tables
    checked for type (:func:`changed_inputs` and ``RunOptions.from_recorded`` check their
    content)."""
    from qcn.core import scenario as scenarios  # noqa: PLC0415 - docs/layout.md, lazy imports

    run_file, prov_file = directory / RUN_FILE, directory / PROVENANCE_FILE
    if not run_file.is_file() or not prov_file.is_file():
        raise ProvenanceError(
            f"{directory}: no {RUN_FILE} and {PROVENANCE_FILE} (not the results of a run, or "
            "of one made before runs recorded them)"
        )
    try:
        provenance = json.loads(prov_file.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise ProvenanceError(f"{prov_file}: unreadable ({str(e)[:200]})") from None
    if not isinstance(provenance, dict) or not isinstance(provenance.get("run"), dict):
        raise ProvenanceError(f"{prov_file}: no 'run' table of options")
    for key, kind in (("overrides", "table"), ("inputs", "table"), ("backend", "name")):
        value = provenance.get(key)
        if not (isinstance(value, dict) if kind == "table" else isinstance(value, str)):
            raise ProvenanceError(f"{prov_file}: '{key}' is not a {kind} ({value!r:.60})")
    if not all(isinstance(k, str) for k in provenance["overrides"]):
        raise ProvenanceError(f"{prov_file}: 'overrides' has a key that is not a field's name")
    for field, found in provenance["inputs"].items():
        if not (isinstance(found, dict) and isinstance(found.get("sha256"), str)
                and isinstance(found.get("path"), str)):  # fmt: skip
            raise ProvenanceError(f"{prov_file}: inputs.{field} has no path and sha256")
    return scenarios.load(str(run_file)), provenance


def changed_inputs(sc: Scenario, provenance: dict[str, Any], who: str = "run") -> list[str]:
    """What differs between the run that ``provenance`` records and a rerun of ``sc`` (its
    run.toml) now, a phrase each: run.toml's own fields (their SHA-256, where the record
    has it), and the content of every file the scenario reads (:func:`input_paths`).  The
    one check of a rerun: ``qcn run --again`` refuses a run whose inputs changed, and
    ``qcn tune`` a study continued on other inputs (``who``: "study"; its record's
    ``inputs`` are :func:`input_files`')."""
    said = []
    recorded_scenario = provenance.get("scenario_sha256")
    if recorded_scenario is not None and recorded_scenario != scenario_sha256(sc.to_dict()):
        said.append(f"{RUN_FILE} was edited since the {who}")
    recorded: dict[str, dict[str, str]] = provenance["inputs"]
    now = input_paths(sc)
    for field in sorted(set(now) | set(recorded)):
        if field not in now:
            said.append(
                f"{field}: the {who} read {recorded[field]['path']}, the scenario names none"
            )
            continue
        path = now[field]
        if field not in recorded:
            said.append(f"{field}: {path} is not among the inputs the {who} recorded")
            continue
        try:
            digest = file_sha256(path)
        except OSError as e:
            said.append(f"{field}: {path} cannot be read now ({e.strerror})")
            continue
        if digest != recorded[field]["sha256"]:
            said.append(
                f"{field}: {path} changed since the {who} (SHA-256 {digest[:12]}..., the {who} "
                f"read {recorded[field]['sha256'][:12]}...)"
            )
    return said
