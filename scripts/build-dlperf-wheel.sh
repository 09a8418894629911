#!/usr/bin/env bash
# Build the dlperf wheel reproducibly (same sources -> same bytes, so copying it to the
# wheelhouse is idempotent) and print its path.
# Usage: scripts/build-dlperf-wheel.sh PYTHON OUTDIR
set -euo pipefail
python=${1:?usage: build-dlperf-wheel.sh PYTHON OUTDIR}
out=${2:?usage: build-dlperf-wheel.sh PYTHON OUTDIR}
cd "$(dirname "$0")/.."
# setuptools reuses build/ and would package files since deleted from the tree.
rm -rf build
mkdir -p "$out"
SOURCE_DATE_EPOCH=315532800 "$python" -m pip wheel -q --no-deps --no-build-isolation \
  --disable-pip-version-check -w "$out" . >&2
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')
ls "$out"/dlperf-"$version"-py3-none-any.whl
