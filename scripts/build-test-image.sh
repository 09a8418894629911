#!/usr/bin/env bash
# Build the systemd container image the molecule scenarios boot, from debootstrap (no registry
# is reachable), and cache it by the content of its recipe: the image tag carries a hash of this
# file, so editing the recipe rebuilds it and an unchanged recipe costs nothing.
#
# Usage: scripts/build-test-image.sh            prints the image reference on stdout
# Env:   DLPERF_CACHE   cache directory (default ~/.cache/dlperf-cluster)
set -euo pipefail

suite=bookworm
packages=python3,python3-apt,systemd,systemd-sysv,dbus,sudo,iproute2,procps,iputils-ping,ca-certificates,apt-utils,gnupg
recipe_hash=$( { cat "$0"; echo "$suite $packages"; } | sha256sum | cut -c1-12)
image="localhost/dlperf-systemd:debian12-${recipe_hash}"

if podman image exists "$image"; then
  echo "$image"
  exit 0
fi

# The mirror comes from the host's own apt configuration, never from this repository.
mirror=$(grep -h -m1 -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1 || true)
if [[ -z "$mirror" ]]; then
  mirror=$(grep -h -m1 -E '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -n1 || true)
fi
if [[ -z "$mirror" ]]; then
  echo "build-test-image: no Debian mirror found in /etc/apt/sources.list{,.d/*.sources}" >&2
  exit 1
fi

cache=${DLPERF_CACHE:-$HOME/.cache/dlperf-cluster}
mkdir -p "$cache"
# shellcheck source=scripts/lib/scratch.sh
. "$(dirname "$0")/lib/scratch.sh"
scratch_lock "$cache" rootfs
if podman image exists "$image"; then  # built by another run while this one waited
  echo "$image"
  exit 0
fi
rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
trap 'scratch_remove "$rootfs"' EXIT

echo "build-test-image: debootstrap $suite from the host's mirror into $rootfs" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 \
  || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }

# Same apt sources as the host (security and updates included).
if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
  rm -f "$rootfs/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/"
fi
# HTTPS egress here is re-signed by a local CA: trust the host's extra CAs inside the image.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
# Package lists stay (as on an installed system: check mode can resolve packages without
# updating the cache); downloaded .debs go. Every container gets its own machine id.
chroot "$rootfs" apt-get -qq update
chroot "$rootfs" apt-get clean
: >"$rootfs/etc/machine-id"
# Units that make no sense in a container and only slow boot down.
for unit in systemd-remount-fs.service systemd-udevd.service systemd-udev-trigger.service \
            getty.target console-getty.service systemd-logind.service; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done

tar -C "$rootfs" -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' - "$image" >/dev/null
echo "build-test-image: built $image" >&2
echo "$image"
