#!/usr/bin/env bash
# Installs every Debian package Ringmaster builds, tests and runs with (as root; idempotent: a
# machine that already has them all is left alone without touching the network).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git python3     # toolchain
  ccache                                                       # compiler cache (tests/README.md)
  libopenblas-dev libdnnl-dev                                  # CPU GEMM (OpenBLAS, oneDNN)
  nlohmann-json3-dev libfmt-dev libcli11-dev                   # JSON, formatting, command lines
  libsimdjson-dev                                              # the telemetry decoder's fast path
  libgtest-dev libgmock-dev                                    # tests
  python3-torch                                                # the GPT's PyTorch reference test
  libgloo-dev                                                  # CPU collectives
  libsqlite3-dev                                               # run storage
  zlib1g-dev                                                   # checkpoint checksums (CRC-32)
  libssh-dev                                                   # SSH launcher
  openssh-server openssh-client iproute2                       # the SSH tests' sshd, ssh, netns
  munge slurmctld slurmd slurm-client                          # the Slurm tests' own cluster
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev    # desktop application (SVG: chart export)
  xvfb xauth                                                   # headless screenshots of the GUI
  libgl-dev libegl-dev libxkbcommon-dev libvulkan-dev          # what Qt 6 Gui and Charts need to configure
  clang libclang-rt-14-dev                                     # libFuzzer targets
  libcpp-httplib-dev                                           # `ringmaster serve`, the web dashboard
  nodejs chromium                                              # its pages (npm ci) and browser tests
)
# Extra packages named on the command line (e.g. openmpi-bin for a benchmark's anchor).
packages+=("$@")

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# The `ringmaster` Python package (python/, pure Python): the system python3 finds it through a .pth
# file, so that a script that reports with it also runs under plain python3 or torchrun (where it
# does nothing). Ringmaster's own launches put the copy beside ringmaster-node first on PYTHONPATH.
# npm comes with NodeSource's Node.js; Debian's own nodejs has it in a package of its own.
install_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  [ -n "${updated:-}" ] || $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm
}

install_python_reporter() {
  local site pth root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  site=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null) || return 0
  pth="$site/ringmaster.pth"
  if [ "$(cat "$pth" 2>/dev/null)" != "$root/python" ]; then
    $SUDO mkdir -p "$site" && echo "$root/python" | $SUDO tee "$pth" >/dev/null &&
      echo "[install-deps] the ringmaster Python package: $pth -> $root/python"
  fi
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "[install-deps] all ${#packages[@]} packages present"
  install_npm
  install_python_reporter
  exit 0
fi

echo "[install-deps] installing: ${missing[*]}"
$SUDO apt-get update -qq
updated=1
# openssh-server's package scripts would start sshd on port 22, and munge's, slurmctld's and
# slurmd's their daemons with /etc's configuration: the tests start their own (sshd on 127.0.0.1,
# a Slurm cluster in a temporary directory: tests/common/slurm_cluster.h), so service starts are
# refused for the install (policy-rc.d) unless a policy exists.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  added_policy=1
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if ((added_policy)); then $SUDO rm -f "$policy"; fi
install_npm
install_python_reporter
