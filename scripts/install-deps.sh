#!/usr/bin/env bash
# Installs what qcn-p4 needs, the way users do, and says plainly what is missing.
#   install-deps.sh system   Debian/Ubuntu packages (mininet, iperf3, ...)
#   install-deps.sh p4lang   p4c, BMv2 (simple_switch_grpc) and PI from p4lang's packages
#   install-deps.sh browser  Debian's chromium and chromium-driver (the live view's browser test)
#   install-deps.sh status   one line: which p4lang tools are present
#   install-deps.sh thrift-path VENV   make BMv2's Thrift Python modules importable in VENV
# Safe to run any number of times: it installs only what is missing.
set -euo pipefail

# g++ and python3-dev build the simulator's compiled core (simulator/_core.cpp).
SYSTEM_PACKAGES=(mininet iperf3 iputils-ping ethtool iproute2 tcpdump tshark python3-venv python3-pip g++ python3-dev)
P4LANG_TOOLS=(p4c simple_switch_grpc)
P4LANG_PACKAGES=(p4lang-p4c p4lang-bmv2 p4lang-pi)
# Debian's headless browser and its WebDriver, for the live view's browser test (optional:
# the test skips in one line without them; Selenium is pointed at these, never downloads).
BROWSER_PACKAGES=(chromium chromium-driver)

say() { echo "install-deps: $*"; }

missing_packages() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"
  done
}

missing_tools() {
  local t
  for t in "${P4LANG_TOOLS[@]}"; do command -v "$t" >/dev/null || echo "$t"; done
}

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
}

# Installs those of the Debian packages named after $1 that are missing; $1 says what
# happens without them, in the one line printed where they cannot be installed.
install_packages() {
  local without=$1
  shift
  command -v dpkg-query >/dev/null || { say "not a Debian/Ubuntu system: install $* yourself"; return 0; }
  mapfile -t miss < <(missing_packages "$@")
  [ ${#miss[@]} -eq 0 ] && return 0
  if ! can_apt; then
    say "missing Debian packages: ${miss[*]} (run as root, or: sudo apt-get install ${miss[*]}); $without"
    return 0
  fi
  say "installing Debian packages: ${miss[*]}"
  apt-get update -q >/dev/null
  apt_install "${miss[@]}"
}

system() { install_packages "the tests that need them will skip" "${SYSTEM_PACKAGES[@]}"; }

status() {
  mapfile -t miss < <(missing_tools)
  if [ ${#miss[@]} -eq 0 ]; then
    say "p4lang toolchain present: $(command -v p4c), $(command -v simple_switch_grpc)"
  else
    say "p4lang toolchain missing: ${miss[*]} -- BMv2/PTF tests skip; the models, controller logic and reaction point still work ('make deps' to install)"
  fi
}

browser() { install_packages "the live view's browser test skips" "${BROWSER_PACKAGES[@]}"; }

# p4lang publishes Debian/Ubuntu packages on the openSUSE Build Service.
p4lang_repo() {
  . /etc/os-release
  case "$ID" in
    debian) echo "Debian_${VERSION_ID}" ;;
    ubuntu) echo "xUbuntu_${VERSION_ID}" ;;
    *) return 1 ;;
  esac
}

p4lang() {
  mapfile -t miss < <(missing_tools)
  if [ ${#miss[@]} -eq 0 ]; then status; return 0; fi
  if ! can_apt; then
    say "p4lang toolchain missing: ${miss[*]}; run 'make deps' as root to install p4lang's packages"
    return 0
  fi
  if ! apt-cache policy p4lang-p4c 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    local dist url
    if dist=$(p4lang_repo); then
      url="https://download.opensuse.org/repositories/home:/p4lang/${dist}"
      if curl -fsSL --max-time 20 "$url/Release.key" 2>/dev/null | gpg --dearmor >/etc/apt/trusted.gpg.d/home_p4lang.gpg 2>/dev/null \
          && [ -s /etc/apt/trusted.gpg.d/home_p4lang.gpg ]; then
        echo "deb $url/ /" >/etc/apt/sources.list.d/home:p4lang.list
        apt-get update -q >/dev/null || true
      else
        rm -f /etc/apt/trusted.gpg.d/home_p4lang.gpg
        say "p4lang's package repository ($url) is not reachable from here"
      fi
    fi
  fi
  if apt-cache policy p4lang-p4c 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    say "installing ${P4LANG_PACKAGES[*]}"
    apt_install "${P4LANG_PACKAGES[@]}"
  fi
  status
}

# BMv2 installs its Thrift client packages (bm_runtime, sswitch_runtime) under
# /usr/local/lib/python3.X/site-packages, which Debian's interpreter does not search.  Link
# just those two into the virtual environment (not the whole folder: PI puts a `google`
# package there that would shadow protobuf's).  Redone each time, so a BMv2 installed after
# the environment is found too.
THRIFT_PACKAGES=(bm_runtime sswitch_runtime)
thrift_path() {
  local venv=$1 site p d found
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  for p in "${THRIFT_PACKAGES[@]}"; do
    found=""
    for d in /usr/local/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages; do
      if [ -f "$d/$p/__init__.py" ]; then found="$d/$p"; fi
    done
    if [ -n "$found" ]; then ln -sfn "$found" "$site/$p"; else rm -f "$site/$p"; fi
  done
  rm -f "$site/qcn-bmv2-thrift.pth"
}

case "${1:-}" in
  system) system ;;
  p4lang) p4lang ;;
  browser) browser ;;
  status) status ;;
  thrift-path) thrift_path "${2:?usage: $0 thrift-path VENV}" ;;
  *) echo "usage: $0 system|p4lang|browser|status|thrift-path VENV" >&2; exit 2 ;;
esac
