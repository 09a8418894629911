#!/usr/bin/env bash
# `make test`: bootstrap, then the test tiers in order, each timed. Every tier runs even when
# an earlier one failed (so one run shows everything that is wrong); the exit status is
# non-zero when any tier failed.
#
# Usage: scripts/test.sh [TIER ...]      tiers: lint unit training molecule e2e (default: all)
# Env:   MOLECULE_SCENARIOS="common nfs_server"   run only these scenarios
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export PATH="$root/.venv/bin:$PATH"
export CONTAINERS_CONF="$root/molecule/containers.conf"
export ANSIBLE_CONFIG="$root/ansible.cfg"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

tiers=("$@")
((${#tiers[@]})) || tiers=(lint unit training molecule e2e)

declare -a summary=()
failed=0
start_all=$SECONDS

run_tier() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== tier $name: start $(date -u +%H:%M:%S)"
  if "$@"; then
    summary+=("$(printf '%-9s PASS %5ds' "$name" $((SECONDS - t0)))")
  else
    failed=1
    summary+=("$(printf '%-9s FAIL %5ds' "$name" $((SECONDS - t0)))")
  fi
  echo "=== tier $name: $((SECONDS - t0)) s"
}

tier_bootstrap() { scripts/bootstrap.sh; }

tier_lint() {
  local rc=0
  echo "--- yamllint";     yamllint --strict . || rc=1
  echo "--- ruff";         ruff check . && ruff format --check . || rc=1
  echo "--- ansible-lint"; ansible-lint --profile production || rc=1
  return $rc
}

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
# Unit tests are independent (each in its own tmp_path): one worker per core.
tier_unit() { pytest -q -n auto tests/unit; }
tier_training() { pytest -q tests/training; }
# The virtual cluster on QEMU VMs (-s: the phases print their wall times).
tier_e2e() {
  wait_vm_image
  pytest -q -s tests/e2e
}

# The e2e tier's provisioning image (debootstrap, apt, the preloaded DL stack: ~4.5 min when it is
# not cached): when both tiers run, it is built in the background while the molecule tier runs,
# and the e2e tier waits for it; its log and time are printed there. This keeps the image out of
# the e2e tier's time, not out of the total: on 2 cores the molecule tier slows by most of it.
vm_image_pid='' vm_image_log='' vm_image_t0=0
start_vm_image() {
  vm_image_log=$(mktemp "${TMPDIR:-/tmp}/dlperf-vm-image.XXXXXX.log")
  vm_image_t0=$SECONDS
  echo "--- VM image: building in the background (log: $vm_image_log)"
  ansible-playbook -i inventory/virtual playbooks/virtual_cluster.yml -e state=image \
    >"$vm_image_log" 2>&1 &
  vm_image_pid=$!
}
wait_vm_image() {
  [[ -n $vm_image_pid ]] || return 0
  local t0=$SECONDS
  if wait "$vm_image_pid"; then
    echo "--- VM image: ready, $((SECONDS - vm_image_t0)) s after it started (e2e waited $((SECONDS - t0)) s)"
  else
    # The e2e tier builds it again itself and reports what fails.
    tail -n 30 "$vm_image_log"
    echo "--- VM image: the background build failed (log above); the e2e tier tries again"
  fi
  vm_image_pid=''
}

# Scenarios give their containers static addresses (198.18.0.0/15, the range reserved for
# network benchmarking, never a workplace network): create each scenario's podman network with
# the /24 of its first platform's address before molecule does, since the driver's schema has
# no subnet option. The driver's destroy removes the network again.
# Prints "NETWORK SUBNET" (or an empty line) and then the scenario's instance names.
scenario_info() {
  python3 - "$1" <<'PY'
import ipaddress, sys, yaml
platforms = yaml.safe_load(open(sys.argv[1]))["platforms"]
first = next((p for p in platforms if p.get("ip")), None)
print(f'{first["network"]} {ipaddress.ip_network(first["ip"] + "/24", strict=False)}' if first else "")
print(" ".join(p["name"] for p in platforms))
PY
}

# What an earlier, interrupted run left of a scenario: containers of its instance names, or
# molecule's own record of instances it created. (A destroy with nothing to destroy still
# costs an ansible-playbook run, ~10 s: it runs only when something is left.)
scenario_leftovers() {
  local scenario=$1 name
  shift
  for name in "$@"; do
    if podman container exists "$name"; then echo "$name"; fi
  done
  molecule list -s "$scenario" --format plain 2>/dev/null | awk '$5 == "true" { print $1 }'
}

tier_molecule() {
  local image rc=0 scenario t0 net subnet names
  image=$(scripts/build-test-image.sh) || return 1
  export DLPERF_TEST_IMAGE=$image
  local scenarios=(${MOLECULE_SCENARIOS:-})
  if ((${#scenarios[@]} == 0)); then
    for dir in molecule/*/molecule.yml; do scenarios+=("$(basename "$(dirname "$dir")")"); done
  fi
  for scenario in "${scenarios[@]}"; do
    t0=$SECONDS
    echo "--- molecule scenario $scenario"
    { read -r net subnet; read -r -a names; } < <(scenario_info "molecule/$scenario/molecule.yml") || true
    if [[ -n "$(scenario_leftovers "$scenario" "${names[@]}")" ]]; then
      echo "--- molecule scenario $scenario: destroying what an earlier run left"
      timeout 300 molecule destroy -s "$scenario" >/dev/null 2>&1 || true
    fi
    # Named volumes (shared storage between a scenario's containers) start empty.
    podman volume ls -q --filter "name=^dlperf-mol-$scenario-" | xargs -r podman volume rm -f >/dev/null
    if [[ -n "${net:-}" ]] && ! podman network exists "$net"; then
      podman network create --subnet "$subnet" "$net" >/dev/null || { rc=1; continue; }
    fi
    # The podman driver was once seen hanging in destroy: bound every scenario.
    if timeout --kill-after=30 1200 molecule test -s "$scenario"; then
      echo "--- molecule scenario $scenario: PASS $((SECONDS - t0)) s"
    else
      rc=1
      echo "--- molecule scenario $scenario: FAIL $((SECONDS - t0)) s"
      timeout 300 molecule destroy -s "$scenario" >/dev/null 2>&1 || true
    fi
  done
  return $rc
}

run_tier bootstrap tier_bootstrap
if ((failed)); then
  echo "bootstrap failed: no tier can run" >&2
  exit 1
fi
for tier in "${tiers[@]}"; do
  if [[ $tier == molecule && " ${tiers[*]} " == *" e2e "* ]]; then
    start_vm_image
  fi
  case $tier in
    lint | unit | training | molecule | e2e) run_tier "$tier" "tier_$tier" ;;
    *) echo "unknown tier '$tier' (known: lint unit training molecule e2e)" >&2; exit 2 ;;
  esac
done

echo "=== summary (total $((SECONDS - start_all)) s)"
printf '  %s\n' "${summary[@]}"
exit $failed
