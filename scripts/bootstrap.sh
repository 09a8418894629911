#!/usr/bin/env bash
# Install everything the tests and deployments need on a fresh Debian 12 machine:
# system packages (podman, runc, debootstrap ...) and the repo-local virtual environment .venv
# with the versions pinned in pyproject.toml. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the test tiers use: podman + runc + netavark/aardvark (named networks with DNS)
# and iptables (netavark programs its bridges through it; podman only suggests it) for molecule,
# debootstrap for the test image, python3-venv for .venv; a C++ toolchain, cmake and OpenMPI to
# build Horovod and run multi-process training; QEMU for the virtual cluster (e2e tier), rsync
# for benchmark.yml fetching results from it (ansible.posix.synchronize); Slurm and munge for
# the training tier's one-node Slurm (its tests start the daemons themselves, with their own
# configuration; nothing of the system's own is configured or started) and libpmix-dev, whose
# libpmix.so Slurm's PMIx plugin loads; headless Chromium to look at the HTML report as a
# reader's browser draws it; libvirt-dev, which libvirt-python (the bmc tier's emulated nodes,
# libvirt's in-process test driver, no daemon) builds against; GnuPG, whose fingerprints the
# OpenPGP filter's tests compare with.
system_packages=(podman runc netavark aardvark-dns catatonit iptables debootstrap python3-venv git make
                 build-essential cmake libopenmpi-dev openmpi-bin
                 qemu-system-x86 qemu-utils openssh-client rsync
                 slurmctld slurmd slurm-client munge libpmix-dev chromium libvirt-dev gpg)

missing=()
for pkg in "${system_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  echo "bootstrap: installing system packages: ${missing[*]}"
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
  # The tests start their own munged/slurmctld/slurmd: the services these packages just
  # enabled on a systemd machine are stopped and disabled again (never ones that were there).
  if [[ -d /run/systemd/system ]]; then
    for unit in munge slurmctld slurmd; do
      [[ " ${missing[*]} " == *" $unit "* ]] && $sudo systemctl disable --now "$unit" >/dev/null 2>&1 || true
    done
  fi
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  echo "bootstrap: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
# Reinstall only when the pins changed: the stamp carries a hash of pyproject.toml.
stamp=".venv/.dlperf-installed-$(sha256sum pyproject.toml | cut -c1-12)"
if [[ ! -e "$stamp" ]]; then
  echo "bootstrap: installing pinned Python packages into .venv (pyproject.toml [dev,train,cpu,digits,pytorch,dali])"
  if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,train,cpu,digits,pytorch,dali]' 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }; then
    echo "bootstrap: pip install of .[dev,train,cpu,digits,pytorch,dali] failed" >&2
    exit 1
  fi
  rm -f .venv/.dlperf-installed-*
  touch "$stamp"
fi
# Horovod: built once per machine (cached outside the repo), installed into .venv.
horovod_pin=$(grep -oE '"horovod==[0-9.]+"' pyproject.toml | tr -d '"')
if ! .venv/bin/python -m pip show -q horovod >/dev/null 2>&1 \
   || [[ "horovod==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("horovod"))')" != "$horovod_pin" ]]; then
  wheel=$(scripts/build-horovod-wheel.sh .venv/bin/python)
  echo "bootstrap: installing $(basename "$wheel")"
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps "$wheel" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
fi
.venv/bin/dlperf --version
