#!/usr/bin/env bash
# Build the Horovod wheel once (MXNet only: no PyTorch/TensorFlow; Gloo + MPI controllers) and
# cache it outside the repository by the content of this recipe and of the pins it builds
# against. Prints the wheel's path on stdout.
#
# Usage: scripts/build-horovod-wheel.sh PYTHON
#   PYTHON  the interpreter of a venv that already has the pinned mxnet and numpy
# Env:    DLPERF_CACHE  cache directory (default ~/.cache/dlperf-cluster)
set -euo pipefail
python=${1:?usage: build-horovod-wheel.sh PYTHON}
cd "$(dirname "$0")/.."

version=$(grep -oE '"horovod==[0-9.]+"' pyproject.toml | grep -oE '[0-9.]+[0-9]')
mxnet=$("$python" -c 'import importlib.metadata as m; print(m.version("mxnet"))')
key=$( { cat "$0"; echo "$version $mxnet"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)
cache=${DLPERF_CACHE:-$HOME/.cache/dlperf-cluster}/wheels/horovod-$key
existing=$(ls "$cache"/horovod-"$version"-*.whl 2>/dev/null | head -n1 || true)
if [[ -n "$existing" ]]; then
  echo "$existing"
  exit 0
fi

mkdir -p "$cache"
build=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$build"' EXIT
echo "build-horovod-wheel: building horovod $version against mxnet $mxnet (a minute or two)" >&2
# --no-build-isolation: Horovod's MXNet extension must compile against the venv's mxnet.
if ! HOROVOD_WITH_MXNET=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_GPU_OPERATIONS= MAKEFLAGS=-j2 \
  "$python" -m pip wheel -q --no-deps --no-build-isolation -w "$build" "horovod==$version" \
  >"$cache/build.log" 2>&1; then
  tail -n 40 "$cache/build.log" >&2
  echo "build-horovod-wheel: build failed; full log in $cache/build.log" >&2
  exit 1
fi
mv "$build"/horovod-*.whl "$cache"/
ls "$cache"/horovod-"$version"-*.whl | head -n1
