#!/usr/bin/env bash
# Installs every Debian package Tessera builds, tests or runs with.
# Idempotent: prints nothing and installs nothing when all are present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcaf-dev
  libucx-dev ucx-utils
  libcapnp-dev capnproto
  clang libclang-rt-14-dev
  librocksdb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libxxhash-dev
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libspdlog-dev
  libopenblas-dev
  libsentencepiece-dev
  libpcre2-dev
  libboost-dev
  libssl-dev
  # The SDK's Python binding (sdk/python; skipped by CMake without them).
  pybind11-dev python3-dev
  # tessera launch's tests: their own sshd, munged, slurmctld and slurmd
  # (Debian's postinst does not start the system's daemons where no init
  # system runs; the tests never use them).
  openssh-server openssh-client slurm-wlm munge
  # membership = "etcd" and its tests (etcd 3.4; the tests start their own
  # /usr/bin/etcd on loopback; no system service is started here).
  etcd-server etcd-client
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Tools the tests run (tests/openai: node, npm, curl), looked for as
# commands: a Node.js from elsewhere (NodeSource's nodejs bundles npm and
# conflicts with Debian's npm package) satisfies them as well.
for tool in nodejs:node npm:npm curl:curl; do
  command -v "${tool#*:}" >/dev/null 2>&1 || missing+=("${tool%%:*}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# etcd-server's package enables and starts etcd.service where systemd runs;
# Tessera starts its own etcd (README, Membership through etcd), so a
# service this run brought up is stopped and disabled again.
if [[ " ${missing[*]} " == *" etcd-server "* ]] && [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now etcd >/dev/null 2>&1 || true
fi
echo "install-deps: done"
