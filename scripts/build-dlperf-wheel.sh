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
# The wheel carries the commit it was built from and whether tracked files differed from it
# (dlperf's provenance reads this where no checkout is around, as on the nodes).
stamp=benchmark/dlperf/_build.json
trap 'rm -f "$stamp"' EXIT
commit=$(git rev-parse HEAD 2>/dev/null || true)
dirty=null
[[ -z $commit ]] || { [[ -z $(git status --porcelain --untracked-files=no) ]] && dirty=false || dirty=true; }
printf '{"git_commit": %s, "git_dirty": %s}\n' "${commit:+\"$commit\"}" "$dirty" | sed 's/: ,/: null,/' >"$stamp"
mkdir -p "$out"
SOURCE_DATE_EPOCH=315532800 "$python" -m pip wheel -q --no-deps --no-build-isolation \
  --disable-pip-version-check -w "$out" . >&2
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')
ls "$out"/dlperf-"$version"-py3-none-any.whl
