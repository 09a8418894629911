#!/usr/bin/env bash
# Build the virtual cluster's provisioning image: a Debian 12 system with a real kernel and the
# roles' packages already installed (the way Bright Cluster Manager provisions software images),
# so site.yml converges on the VMs instead of downloading. Cached by the content of its recipe:
# this file, the package list and the roles' package defaults it is made of.
#
# Usage: scripts/build-vm-image.sh [--dl-stack VENV UID:GID HOROVOD_WHEEL PYTHON] PACKAGE...
#   prints the image directory on stdout. The directory holds base.qcow2 (the root file
#   system), vmlinuz and initrd.img (booted directly), id_ed25519{,.pub} (root's key, for
#   Ansible) and packages.txt.
#   --dl-stack preloads the DL stack the dl_stack role installs: VENV (and its sibling
#   build-venv) owned by UID:GID, holding the pinned dlperf[train,cpu] dependencies (downloaded
#   by PYTHON's pip on this host, with its configuration) and HOROVOD_WHEEL, byte-compiled at
#   native speed; the wheels stay in /var/cache/dlperf/wheels, the image's wheel mirror. dlperf
#   itself is not in the image: the role installs it from the head node's wheelhouse.
# Env:   DLPERF_CACHE   cache directory (default ~/.cache/dlperf-cluster)
#        DLPERF_VM_DISK_SIZE   root file system size (default 6G; the qcow2 stays sparse)
set -euo pipefail
usage="usage: build-vm-image.sh [--dl-stack VENV UID:GID HOROVOD_WHEEL PYTHON] PACKAGE..."
venv='' owner='' horovod='' host_python='' pins=''
if [[ ${1:-} == --dl-stack ]]; then
  (($# >= 5)) || { echo "$usage" >&2; exit 2; }
  venv=$2 owner=$3 horovod=$4 host_python=$5
  shift 5
  [[ $venv == /*/* ]] || { echo "build-vm-image: VENV '$venv' is not an absolute path below a directory" >&2; exit 2; }
  [[ $owner =~ ^[0-9]+:[0-9]+$ ]] || { echo "build-vm-image: UID:GID '$owner' is not numeric" >&2; exit 2; }
  [[ -f $horovod && $horovod == *.whl ]] || { echo "build-vm-image: HOROVOD_WHEEL '$horovod' is not a wheel file" >&2; exit 2; }
  # The pins: dlperf's own dependencies and its train and cpu extras, from the one pin table.
  pins=$(cd "$(dirname "$0")/.." && "$host_python" -c 'import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print(" ".join(project["dependencies"] + extras["train"] + extras["cpu"]))') \
    || { echo "build-vm-image: PYTHON '$host_python' could not read the pins from pyproject.toml" >&2; exit 2; }
fi
(($#)) || { echo "$usage" >&2; exit 2; }

suite=bookworm
disk_size=${DLPERF_VM_DISK_SIZE:-6G}
# What every VM needs to boot, be managed by Ansible and join the cluster network; the roles'
# packages come as arguments.
base=(linux-image-amd64 systemd-sysv udev kmod dbus iproute2 ifupdown iputils-ping procps
      openssh-server python3 python3-apt apt-utils sudo ca-certificates gnupg)
packages=$(printf '%s\n' "$@" | sort -u | paste -sd' ' -)
stack=''
[[ -z $venv ]] || stack="$venv $owner $pins $(sha256sum <"$horovod" | cut -c1-64)"
key=$( { cat "$0"; echo "$suite $disk_size $packages"; echo "$stack"; } | sha256sum | cut -c1-12)
cache=${DLPERF_CACHE:-$HOME/.cache/dlperf-cluster}/vm
image="$cache/debian12-$key"
if [[ -s "$image/base.qcow2" ]]; then
  echo "$image"
  exit 0
fi

# Each step goes to stderr and, when DLPERF_PROGRESS_FILE is set, to that file too ("EPOCH TEXT"
# per line): `dlperf reproduce` shows the latest one while the image builds.
step() {
  echo "build-vm-image: $*" >&2
  [[ -z ${DLPERF_PROGRESS_FILE:-} ]] || printf '%s %s\n' "$(date +%s)" "$*" >>"$DLPERF_PROGRESS_FILE"
}

for tool in debootstrap mkfs.ext4 qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null || { echo "build-vm-image: $tool is missing (scripts/bootstrap.sh installs it)" >&2; exit 1; }
done
# The mirror comes from the host's own apt configuration, never from this repository.
mirror=$(grep -h -m1 -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1 || true)
[[ -n "$mirror" ]] || mirror=$(grep -h -m1 -E '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
[[ -n "$mirror" ]] || { echo "build-vm-image: no Debian mirror found in the host's apt sources" >&2; exit 1; }

mkdir -p "$cache"
# shellcheck source=scripts/lib/scratch.sh
. "$(dirname "$0")/lib/scratch.sh"
scratch_lock "$cache" build
if [[ -s "$image/base.qcow2" ]]; then  # built by another run while this one waited
  echo "$image"
  exit 0
fi
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'scratch_remove "$work"' EXIT
root="$work/root"
# debootstrap installs the base (its resolver does not follow virtual packages such as
# automake-1.16); apt, inside the new system, installs the roles' packages.
step "image 1/4: debootstrap $suite (then $# packages with apt; several minutes in all)"
if ! debootstrap --variant=minbase --include="$(IFS=,; echo "${base[*]}")" "$suite" "$root" "$mirror" \
  >"$work/debootstrap.log" 2>&1; then
  cat "$work/debootstrap.log" "$root/debootstrap/debootstrap.log" >"$cache/debootstrap.log" 2>/dev/null || true
  tail -n 30 "$cache/debootstrap.log" >&2
  echo "build-vm-image: debootstrap failed; full log in $cache/debootstrap.log" >&2
  exit 1
fi

# Same apt sources as the host (security and updates too), and the host's extra CAs (HTTPS
# egress here is re-signed by a local CA).
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  rm -f "$root/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
fi
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
step "image 2/4: apt installs $# packages in the image"
chroot "$root" apt-get -qq update
# No service starts inside the chroot; /proc for the packages' scripts.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"  # the EXIT trap unmounts it too
# shellcheck disable=SC2086  # one word per package
if ! DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends $packages \
  >"$cache/apt-install.log" 2>&1; then
  tail -n 30 "$cache/apt-install.log" >&2
  echo "build-vm-image: installing the packages failed; full log in $cache/apt-install.log" >&2
  exit 1
fi
if [[ -n $venv ]]; then
  step "image 3/4: the DL stack preloaded into $venv (pip download and install)"
  mirror_dir=/var/cache/dlperf/wheels
  mkdir -p "$root$mirror_dir"
  # shellcheck disable=SC2086  # one word per pin
  if ! { "$host_python" -m pip download --disable-pip-version-check --dest "$root$mirror_dir" $pins \
         && cp "$horovod" "$root$mirror_dir/" \
         && chroot "$root" python3 -m venv "$venv" \
         && chroot "$root" python3 -m venv "$(dirname "$venv")/build-venv" \
         && chroot "$root" "$venv/bin/pip" install --disable-pip-version-check --no-index \
              --find-links "$mirror_dir" $pins \
         && chroot "$root" "$venv/bin/pip" install --disable-pip-version-check --no-index --no-deps \
              "$mirror_dir/$(basename "$horovod")"; } >"$cache/dl-stack.log" 2>&1; then
    tail -n 30 "$cache/dl-stack.log" >&2
    echo "build-vm-image: preloading the DL stack failed; full log in $cache/dl-stack.log" >&2
    exit 1
  fi
  chown -R "$owner" "$root$(dirname "$venv")"
  chmod -R a+rX "$root$mirror_dir"
fi
step "image 4/4: boot identity, SSH key and the root file system"
umount "$root/proc"
rm -f "$root/usr/sbin/policy-rc.d"
chroot "$root" apt-get clean

# Identity from the kernel command line (each VM boots the same image with its own
# dlperf.hostname=, dlperf.mgmt=ADDR/PREFIX,GATEWAY and dlperf.cluster=ADDR/PREFIX), host keys
# made on first boot: no two VMs share a machine id or an SSH host key.
cat >"$root/usr/local/sbin/dlperf-vm-identity" <<'IDENTITY'
#!/bin/sh
set -eu
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^dlperf\.$1=//p" | tail -n1; }
name=$(arg hostname); mgmt=$(arg mgmt); cluster=$(arg cluster)
[ -n "$name" ] && { echo "$name" >/etc/hostname; hostname "$name"; }
{
  echo "# Written at boot by dlperf-vm-identity from the kernel command line."
  echo "auto lo"; echo "iface lo inet loopback"
  if [ -n "$mgmt" ]; then
    echo "auto eth0"; echo "iface eth0 inet static"
    echo "  address ${mgmt%%,*}"; echo "  gateway ${mgmt#*,}"
  fi
  if [ -n "$cluster" ]; then
    echo "auto eth1"; echo "iface eth1 inet static"; echo "  address $cluster"
  fi
} >/etc/network/interfaces
# ed25519 only (the cluster trusts no other type): an RSA key took most of a minute on TCG.
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
IDENTITY
chmod 0755 "$root/usr/local/sbin/dlperf-vm-identity"
cat >"$root/etc/systemd/system/dlperf-vm-identity.service" <<'UNIT'
[Unit]
Description=Hostname, addresses and SSH host keys of this dlperf virtual cluster VM
DefaultDependencies=no
After=local-fs.target
Before=network-pre.target ssh.service systemd-hostnamed.service
Wants=network-pre.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/dlperf-vm-identity

[Install]
WantedBy=sysinit.target
UNIT
chroot "$root" systemctl enable dlperf-vm-identity.service >/dev/null 2>&1
rm -f "$root"/etc/ssh/ssh_host_*
printf 'HostKey /etc/ssh/ssh_host_ed25519_key\n' >"$root/etc/ssh/sshd_config.d/dlperf-vm-hostkey.conf"
# Short-lived test nodes: no periodic apt runs (they would take apt's lock from the roles), no
# scrubbing, trimming or dpkg backups competing for an emulated CPU.
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
  e2scrub_reap.service fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
# Every VM makes its own machine id at first boot (systemd would otherwise copy D-Bus's).
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
printf '/dev/vda / ext4 defaults,noatime 0 1\n' >"$root/etc/fstab"
# Resolution through QEMU's user-net DNS (management network only).
printf 'nameserver 169.254.250.3\n' >"$root/etc/resolv.conf"
# A serial console for debugging; no other gettys.
ln -sf /dev/null "$root/etc/systemd/system/getty@tty1.service"

# Root's key for Ansible: made with the image, kept beside it (0600), never in the repository.
ssh-keygen -q -t ed25519 -N '' -C "dlperf virtual cluster $key" -f "$work/id_ed25519"
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$work/id_ed25519.pub" "$root/root/.ssh/authorized_keys"

cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n1)" "$work/vmlinuz"
cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -n1)" "$work/initrd.img"
tr ' ' '\n' <<<"$packages" >"$work/packages.txt"
mkfs.ext4 -q -F -L dlperf-root -d "$root" "$work/base.raw" "$disk_size" >&2
qemu-img convert -O qcow2 "$work/base.raw" "$work/base.qcow2"
rm -rf "$root" "$work/base.raw" "$work/debootstrap.log"
mv "$work" "$image"
trap - EXIT
step "built $image"
echo "$image"
