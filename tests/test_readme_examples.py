"""Every `qcn` example in the README works as written, after `make run`, with `qcn` on the
PATH as the README's quick start puts it there.

Each example is taken from the README itself (the Commands table's example column and the
shell blocks), so an example edited there is the one tested here.  Each is classified by
where it can run; a new example that is not classified fails :func:`test_every_example_is_
classified`, so none goes untested by accident:

- ``HERE``: run as written in a folder laid out as ``make run`` leaves it (results/transient
  present), and must exit 0;
- ``ON_A_HOST``: host-side tools, run on a network's host (tests/test_net_bmv2.py runs them
  there, through Mininet's CLI, as the README says);
- ``NETWORK``: need a running network or BMv2 (tests/test_net_bmv2.py; the BMv2 scenarios'
  own tests: tests/test_compare.py, tests/test_mininet_bmv2.py, tests/test_ptf.py);
- ``BROWSER``: a live run, which starts when its page opens (tests/test_live_browser.py);
- ``LONG``: a minute or more on this machine: run by their own tests (tests/test_sweep.py
  on a real local Dask cluster) or make targets (``make reproduce``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from qcn.cli.main import TOOLS, build_parser
from tests.test_mininet_bmv2 import leftovers
from tests.toolchain import requires_p4lang, requires_root

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent

HERE = {
    "qcn run transient --backend sim --set qcn.rp.fb_hat=true --out results/fb-hat",
    "qcn run fct --scheme qcn,dcqcn,none --backend sim",
    "qcn params --preset 2-qcn",
    "qcn net draw parking-lot:3 -o pl.png",
    "qcn net show leaf-spine:2,2,2",
    "qcn wireshark --install",
}
ON_A_HOST = {
    "qcn rp start --iface h1-eth0 --preset ecm",
    "qcn pause h1-eth0 --line-rate-mbps 10",
    "qcn sink --port 5001",
    "qcn frames count h1-eth0 --seconds 5",
}
NETWORK = {
    "qcn net up leaf-spine:2,2,2 --cli",
    "qcn net up leaf-spine:2,2,2 --cli --no-rp",
    "qcn net up topology.json",
    "qcn net down",
    "qcn ctl -c results/net/network.toml set s3 3 --q-eq-pkts 22 --w 2",
    "qcn compare transient --runs 3",
    "qcn schemes --runs 2",
    "qcn build",
    "qcn ptf test_cp.NoCnmBelowQeqTest",
    "qcn net calibrate",  # (tests/test_placement.py)
}
#: The live run starts when its page opens: tests/test_live_browser.py opens it in Chromium.
BROWSER = {"qcn run transient --backend sim --live --out results/live"}
LONG = {
    "qcn reproduce --seeds 1,2,3",
    "qcn sweep robustness --grid network.rtt_s=10e-6,200e-6 --seeds 3",
    # (tests/test_tune.py: shorter studies; tests/test_net_bmv2.py: --apply and --verify)
    "qcn tune fct --trials 100 --verify",
}

TABLE_EXAMPLE = re.compile(r"^\|\s*`qcn [^`]*`\s*\|\s*`(qcn [^`]*)`\s*\|")
SHELL_LINE = re.compile(r"^(qcn [^#]*?)\s*(#.*)?$")


def readme_examples() -> list[str]:
    """The Commands table's examples and the shell blocks' `qcn` lines, in README order."""
    out: list[str] = []
    shell = False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            shell = line.strip() in ("```sh", "```bash", "```shell")
            continue
        m = SHELL_LINE.match(line) if shell else TABLE_EXAMPLE.match(line)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def test_the_readme_has_examples() -> None:
    assert len(readme_examples()) >= 20


def test_every_example_is_classified() -> None:
    known = HERE | ON_A_HOST | NETWORK | BROWSER | LONG
    unclassified = [e for e in readme_examples() if e not in known]
    assert not unclassified, f"README examples no test runs: {unclassified}"
    gone = known - set(readme_examples())
    assert not gone, f"classified here but no longer in the README: {gone}"


@pytest.mark.parametrize(
    "example", [e for e in readme_examples() if shlex.split(e)[1] not in TOOLS]
)
def test_every_example_parses(example: str) -> None:
    """The subcommands' own parser takes every example (the tools parse in their own
    module: their examples run in the tests named above)."""
    build_parser().parse_args(shlex.split(example)[1:])


def test_the_quick_start_puts_qcn_on_the_path() -> None:
    """The README says, in the quick start, how `qcn` gets on the PATH, and it is where it
    says: the virtual environment's bin (the Makefile's VENV)."""
    text = README.read_text()
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in text
    assert (VENV_BIN / "qcn").exists() or "VIRTUAL_ENV" not in os.environ


@pytest.fixture(scope="module")
def after_make_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder as `make run` leaves it on a machine without the toolchain: the transient's
    results in results/transient."""
    where = tmp_path_factory.mktemp("after-make-run")
    r = run_as_user("qcn run transient --backend sim", where)
    assert r.returncode == 0, r.stderr
    assert (where / "results" / "transient" / "summary.json").exists()
    return where


def run_as_user(
    example: str, cwd: Path, *, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``example`` through a shell, with the PATH the quick start gives (this interpreter's
    bin first) and a HOME of the test's own (`qcn wireshark --install` writes there)."""
    return subprocess.run(
        ["bash", "-c", example],
        cwd=cwd,
        env={
            **os.environ,
            "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            "HOME": str(cwd),
            **(env or {}),
        },
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("example", sorted(HERE))
def test_the_example_runs_after_make_run(example: str, after_make_run: Path) -> None:
    r = run_as_user(example, after_make_run)
    assert r.returncode == 0, (example, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr


#: The README's host-side examples, each as Mininet's CLI runs it on a host of the network
#: the README starts (`qcn net up leaf-spine:2,2,2 --cli`): its output to a file of its own,
#: and, for the ones that run until Ctrl-C, a Ctrl-C after a few seconds.
ON_A_HOST_AS_RUN = {
    "qcn frames count h1-eth0 --seconds 5": ("h1", None),
    "qcn sink --port 5001": ("h4", 3),
    "qcn pause h1-eth0 --line-rate-mbps 10": ("h1", 3),
    "qcn rp start --iface h1-eth0 --preset ecm": ("h1", 3),
}


@requires_p4lang()
@requires_root()
def test_the_network_examples_run_on_bmv2(tmp_path: Path) -> None:
    """`qcn net up leaf-spine:2,2,2 --cli --no-rp` as the README writes it; in its CLI each
    host-side example on a host, and `qcn ctl -c results/net/network.toml set ...` from the
    shell."""
    assert set(ON_A_HOST_AS_RUN) == ON_A_HOST
    (ctl,) = [e for e in NETWORK if e.startswith("qcn ctl")]
    script = [f"sh {ctl} > ctl.out 2>&1; echo status $? >> ctl.out"]
    for i, (example, (host, ctrl_c_after_s)) in enumerate(sorted(ON_A_HOST_AS_RUN.items())):
        stop = f"timeout --preserve-status -s INT {ctrl_c_after_s} " if ctrl_c_after_s else ""
        script.append(f"{host} {stop}{example} > host{i}.out 2>&1; echo status $? >> host{i}.out")
    script.append("exit")
    # --no-rp: the hosts' reaction points are the user's (`qcn rp start`), as the README says.
    (up,) = [e for e in NETWORK if e.startswith("qcn net up leaf-spine") and "--no-rp" in e]
    env = {"QCN_NET_STATE": str(tmp_path / "qcn-net.json")}
    r = run_as_user(up, tmp_path, stdin="\n".join(script) + "\n", env=env)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    said = {"ctl": (tmp_path / "ctl.out").read_text()}
    for i, example in enumerate(sorted(ON_A_HOST_AS_RUN)):
        said[example] = (tmp_path / f"host{i}.out").read_text()
    for example, text in said.items():
        assert "Traceback" not in text, (example, text)
        # 0, or Ctrl-C's 130 for the ones that run until stopped
        assert text.rstrip().splitlines()[-1] in ("status 0", "status 130"), (example, text)
    # q_eq 22 frames of 1500 bytes, as the switch holds it (in bytes), and w 2: written.
    assert said["ctl"].startswith("s3 port 3: q_eq_bytes=33000 w=2 "), said["ctl"]
    links, procs = leftovers()
    assert (links, procs) == ("", "")
