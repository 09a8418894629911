#!/usr/bin/env bash
# `make test`: bootstrap, then the test tiers in order (bmc beside package), each timed. Every
# tier runs even when an earlier one failed (so one run shows everything that is wrong); the
# summary at the end names what failed, and the exit status is non-zero when any tier failed.
#
# Usage: scripts/test.sh [TIER ...]      tiers: lint unit package bmc training molecule rehearsal e2e (default: all)
# Env:   MOLECULE_SCENARIOS="common nfs_server"   run only these scenarios
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

export PATH="$root/.venv/bin:$PATH"
export CONTAINERS_CONF="$root/molecule/containers.conf"
export ANSIBLE_CONFIG="$root/ansible.cfg"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

tiers=("$@")
((${#tiers[@]})) || tiers=(lint unit package bmc training molecule rehearsal e2e)

declare -a summary=()
failed=0
start_all=$SECONDS

# Each passing tier's wall time is kept on this machine (outside the checkout), so a tier's
# start line can say how long it took the last time it passed, and the run how long all of
# them took: the ETA.
times_file=${DLPERF_CACHE:-$HOME/.cache/dlperf-cluster}/test-tier-times
# A molecule tier limited by MOLECULE_SCENARIOS is timed under its own key.
time_key() {
  if [[ $1 == molecule && -n ${MOLECULE_SCENARIOS:-} ]]; then
    local list=(${MOLECULE_SCENARIOS})
    (IFS=,; echo "molecule:${list[*]}")
  else
    echo "$1"
  fi
}
last_time() { awk -v t="$1" '$1 == t { s = $2 } END { if (s != "") print s }' "$times_file" 2>/dev/null || true; }
record_time() {
  mkdir -p "$(dirname "$times_file")" && echo "$1 $2" >>"$times_file" \
    && tail -n 200 "$times_file" >"$times_file.new" && mv "$times_file.new" "$times_file"
} 2>/dev/null

# Each tier's output is also kept in a file, so that the summary at the end can name what failed
# in a failed tier (pytest's FAILED/ERROR lines, the failed molecule scenarios): a CI log is
# often read from its tail only.
tier_logs=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-test-tiers.XXXXXX")
declare -a failures=()
what_failed() {  # LOG: its lines naming a failure, else its last lines
  grep -E '^(FAILED|ERROR) |^--- molecule scenario .*: FAIL|^--- (yamllint|ruff|ansible-lint): FAIL' "$1" \
    | head -n 25 | grep . || tail -n 5 "$1"
}
run_tier() {
  local name=$1 last rc tee_pid
  shift
  local t0=$SECONDS log=$tier_logs/$name.log
  last=$(last_time "$(time_key "$name")")
  echo "=== tier $name: start $(date -u +%H:%M:%S)${last:+ (it took ${last} s when it last passed here)}"
  # Not a pipeline: the tier runs in this shell (it waits on background builds started here).
  "$@" > >(tee "$log") 2>&1
  rc=$?
  tee_pid=$!
  wait "$tee_pid" 2>/dev/null
  record_tier "$name" "$rc" $((SECONDS - t0)) ""
}
record_tier() {  # NAME RC SECONDS NOTE
  local name=$1 rc=$2 secs=$3 note=$4 log=$tier_logs/$1.log
  if ((rc == 0)); then
    summary+=("$(printf '%-9s PASS %5ds%s' "$name" "$secs" "$note")")
    record_time "$(time_key "$name")" "$secs" || true
  else
    failed=1
    summary+=("$(printf '%-9s FAIL %5ds%s' "$name" "$secs" "$note")")
    failures+=("$name (its whole output: $log):")
    mapfile -t -O "${#failures[@]}" failures < <(what_failed "$log" | sed 's/^/    /')
  fi
  echo "=== tier $name: $secs s$note"
}

# A tier that leaves most of a core idle runs beside another one: bmc (Redfish emulators,
# mostly waiting on HTTPS round trips) beside package (builds and installs, ~50 % idle on 2
# cores). Its output is kept and printed whole when it ends; its time is its own wall time.
declare -A BESIDE=([bmc]=package) tier_pid=() tier_started=()
start_tier_beside() {  # NAME OTHER
  local name=$1 log=$tier_logs/$1.log
  echo "=== tier $name: start $(date -u +%H:%M:%S), beside the $2 tier (its output follows when it ends)"
  (
    t0=$SECONDS
    "tier_$name" >"$log" 2>&1
    rc=$?
    echo $((SECONDS - t0)) >"$log.seconds"
    exit $rc
  ) &
  tier_pid[$name]=$!
}
join_tier() {  # NAME
  local name=$1 rc
  wait "${tier_pid[$name]}"
  rc=$?
  unset "tier_pid[$name]"
  cat "$tier_logs/$name.log"
  record_tier "$name" "$rc" "$(cat "$tier_logs/$name.log.seconds" 2>/dev/null || echo 0)" " (beside ${BESIDE[$name]})"
}

tier_bootstrap() { scripts/bootstrap.sh; }

tier_lint() {
  local rc=0
  echo "--- yamllint";     yamllint --strict . || { rc=1; echo "--- yamllint: FAIL"; }
  echo "--- ruff";         { ruff check . && ruff format --check .; } || { rc=1; echo "--- ruff: FAIL"; }
  echo "--- ansible-lint"; ansible-lint --profile production || { rc=1; echo "--- ansible-lint: FAIL"; }
  return $rc
}

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
# One worker per core. Unit tests are independent (each in its own tmp_path), except that one
# role's bad-input cases share one ansible-playbook run: loadgroup sends them to one worker.
# The pytest tiers end with their ten slowest tests, so a log shows where a slow day's time went.
tier_unit() { pytest -q -n auto --dist loadgroup --durations=10 tests/unit; }
# The dlperf.cluster collection built, installed and used by FQCN outside the checkout, with
# ansible-test sanity; the dlperf wheel alone in an empty venv.
tier_package() { pytest -q tests/package; }
# The bmc role and playbook against three Redfish emulators over HTTPS (sushy-tools).
tier_bmc() { pytest -q tests/bmc; }
# Two workers: the training tests mostly wait (on ranks, Slurm, SSH); each file stays on one
# worker (its module fixtures), each worker has its own one-node Slurm and dataset.
tier_training() { pytest -q -n 2 --dist loadfile --durations=10 tests/training; }
# The reference inventory's site.yml, validate.yml and benchmark.yml --check on nine systemd
# containers (-s: the runs print their wall times).
tier_rehearsal() {
  wait_bg test-image
  pytest -q -s tests/rehearsal
}
# The virtual cluster on QEMU VMs (-s: the phases print their wall times).
tier_e2e() {
  wait_bg vm-image
  pytest -q -s tests/e2e
}

# The images two tiers boot are built in the background while earlier tiers run (they wait on
# downloads as much as on the CPU): the molecule tier's systemd image (~2 min when not cached)
# from the start, during lint and unit; the e2e tier's provisioning image (debootstrap, apt, the
# preloaded DL stack: ~5 min) from the package tier on, where a third to a half of the CPU is
# idle (package, bmc and training wait on HTTPS, Slurm and process start-up), rather than
# beside the molecule tier, which keeps both cores busy. The tier that needs one waits
# for it and prints when it was ready; if a build failed, its log tail is printed and the tier
# builds the image again itself. Each runs in its own session, so an interrupted `make test`
# stops it too. (On 2 cores a background build slows the tier beside it by part of its time:
# it keeps the build out of the tier that needs it, not all of it out of the total.)
declare -A bg_pid=() bg_log=()
start_bg() {  # NAME COMMAND...
  local name=$1
  shift
  bg_log[$name]=$(mktemp "${TMPDIR:-/tmp}/dlperf-$name.XXXXXX.log")
  echo "--- $name: building in the background (log: ${bg_log[$name]})"
  # The build's own duration goes to LOG.seconds (when it ends may be long before it is waited on).
  setsid bash -c 't0=$SECONDS; "$@"; rc=$?; echo $((SECONDS - t0)) >"$0.seconds"; exit $rc' \
    "${bg_log[$name]}" "$@" >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
wait_bg() {  # NAME
  local name=$1 t0=$SECONDS pid=${bg_pid[$1]:-}
  [[ -n $pid ]] || return 0
  unset "bg_pid[$name]"
  if wait "$pid"; then
    echo "--- $name: ready; it took $(cat "${bg_log[$name]}.seconds" 2>/dev/null || echo '?') s, this tier waited $((SECONDS - t0)) s for it"
  else
    tail -n 30 "${bg_log[$name]}"
    echo "--- $name: the background build failed (log above); building it again here"
  fi
}
# On exit (an interrupt included) stop what still runs: the background builds, and the molecule
# scenarios running in parallel (their `timeout`, which stops molecule, in its own group).
declare -A mol_running=()
stop_bg() {
  local pid
  for pid in "${bg_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  for pid in "${!mol_running[@]}" "${tier_pid[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; done
}
trap stop_bg EXIT

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

# The check run after idempotence (the converged hosts in check mode, as `site.yml --check` on a
# running cluster) must report no change: a task that would change something there is either
# not idempotent or misreads check mode. Prints the offending recap lines.
converged_check_changes_nothing() {
  local scenario=$1 log=$2
  awk -v s="$scenario" '
    index($0, "[" s " > check] Executing") { n++; on = (n == 2) }
    index($0, "[" s " > check] Executed") { on = 0 }
    on && /: ok=[0-9]+ +changed=[1-9]/ { bad = bad $0 "\n" }
    END {
      if (n < 2) exit 0
      if (bad != "") { printf "--- molecule scenario %s: its check run on the converged hosts reports changes:\n%s", s, bad; exit 1 }
    }' "$log"
}

# One scenario, from a clean slate: what an earlier run left destroyed, its shared volumes empty,
# its network made; then `molecule test`, bounded (the podman driver was once seen hanging in
# destroy). Prints its PASS/FAIL line with its wall time last.
run_scenario() {
  local scenario=$1 t0=$SECONDS net subnet names
  { read -r net subnet; read -r -a names; } < <(scenario_info "molecule/$scenario/molecule.yml") || true
  if [[ -n "$(scenario_leftovers "$scenario" "${names[@]}")" ]]; then
    echo "--- molecule scenario $scenario: destroying what an earlier run left"
    timeout 300 molecule destroy -s "$scenario" >/dev/null 2>&1 || true
  fi
  # Named volumes (shared storage between a scenario's containers) start empty.
  podman volume ls -q --filter "name=^dlperf-mol-$scenario-" | xargs -r podman volume rm -f >/dev/null
  if [[ -n "${net:-}" ]] && ! podman network exists "$net"; then
    podman network create --subnet "$subnet" "$net" >/dev/null \
      || { echo "--- molecule scenario $scenario: FAIL (network $net $subnet)"; return 1; }
  fi
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/dlperf-molecule-$scenario.XXXXXX")
  if timeout --kill-after=30 1200 molecule test -s "$scenario" 2>&1 | tee "$log" \
    && converged_check_changes_nothing "$scenario" "$log"; then
    rm -f "$log"
    echo "--- molecule scenario $scenario: PASS $((SECONDS - t0)) s"
  else
    rm -f "$log"
    echo "--- molecule scenario $scenario: FAIL $((SECONDS - t0)) s"
    timeout 300 molecule destroy -s "$scenario" >/dev/null 2>&1 || true
    return 1
  fi
}

# Scenarios run MOLECULE_JOBS at a time (default 2): measured, the tier took 645-765 s two at a
# time against 1400-1602 s one after the other (both cores then stay busy; a third job would
# gain little). Every scenario has its own containers, network and subnet, so they cannot meet. With more than one job, each
# scenario's output is kept in a file and printed whole when it ends. The longest scenarios are
# started first (the order below), the rest in name order.
MOLECULE_FIRST=(dl_stack slurm common ipoib)
tier_molecule() {
  local image rc=0 scenario pid jobs=${MOLECULE_JOBS:-2} logs
  wait_bg test-image
  image=$(scripts/build-test-image.sh) || return 1
  export DLPERF_TEST_IMAGE=$image
  local scenarios=(${MOLECULE_SCENARIOS:-})
  if ((${#scenarios[@]} == 0)); then
    for scenario in "${MOLECULE_FIRST[@]}"; do
      [[ -e molecule/$scenario/molecule.yml ]] && scenarios+=("$scenario")
    done
    for dir in molecule/*/molecule.yml; do
      scenario=$(basename "$(dirname "$dir")")
      [[ " ${MOLECULE_FIRST[*]} " == *" $scenario "* ]] || scenarios+=("$scenario")
    done
  fi
  if ((jobs <= 1)); then
    for scenario in "${scenarios[@]}"; do
      echo "--- molecule scenario $scenario"
      run_scenario "$scenario" || rc=1
    done
    return $rc
  fi
  logs=$(mktemp -d "${TMPDIR:-/tmp}/dlperf-molecule.XXXXXX")
  for scenario in "${scenarios[@]}" ""; do
    # Wait for a free slot (for every running scenario after the last one).
    while ((${#mol_running[@]} >= jobs)) || [[ -z $scenario && ${#mol_running[@]} -gt 0 ]]; do
      wait -n -p pid "${!mol_running[@]}" || rc=1
      cat "$logs/${mol_running[$pid]}.log"
      unset "mol_running[$pid]"
    done
    [[ -n $scenario ]] || break
    echo "--- molecule scenario $scenario: started ($(date -u +%H:%M:%S))"
    run_scenario "$scenario" >"$logs/$scenario.log" 2>&1 &
    mol_running[$!]=$scenario
  done
  rm -rf "$logs"
  return $rc
}

expected=0
for tier in bootstrap "${tiers[@]}"; do
  # a tier run beside another adds nothing to the wall time
  [[ -n ${BESIDE[$tier]:-} && " ${tiers[*]} " == *" ${BESIDE[$tier]} "* ]] && continue
  t=$(last_time "$(time_key "$tier")")
  [[ -n $t ]] && expected=$((expected + t))
done
((expected == 0)) || echo "=== make test: these tiers took $((expected / 60)) min $((expected % 60)) s in all when they last passed here"
run_tier bootstrap tier_bootstrap
if ((failed)); then
  echo "bootstrap failed: no tier can run" >&2
  exit 1
fi
if [[ " ${tiers[*]} " == *" molecule "* || " ${tiers[*]} " == *" rehearsal "* ]]; then
  start_bg test-image scripts/build-test-image.sh
fi
for tier in "${tiers[@]}"; do
  if [[ $tier != lint && $tier != unit && -z ${vm_image_started:-} && " ${tiers[*]} " == *" e2e "* ]]; then
    vm_image_started=1
    start_bg vm-image ansible-playbook -i inventory/virtual playbooks/virtual_cluster.yml -e state=image
  fi
  case $tier in
    lint | unit | package | bmc | training | molecule | rehearsal | e2e) ;;
    *) echo "unknown tier '$tier' (known: lint unit package bmc training molecule rehearsal e2e)" >&2; exit 2 ;;
  esac
  [[ -z ${tier_started[$tier]:-} ]] || continue  # started beside an earlier tier
  tier_started[$tier]=1
  beside=()
  for other in "${!BESIDE[@]}"; do
    if [[ ${BESIDE[$other]} == "$tier" && " ${tiers[*]} " == *" $other "* && -z ${tier_started[$other]:-} ]]; then
      tier_started[$other]=1
      start_tier_beside "$other" "$tier"
      beside+=("$other")
    fi
  done
  run_tier "$tier" "tier_$tier"
  for other in "${beside[@]}"; do join_tier "$other"; done
done

echo "=== summary (total $((SECONDS - start_all)) s)"
printf '  %s\n' "${summary[@]}"
if ((${#failures[@]})); then
  echo "=== what failed"
  printf '  %s\n' "${failures[@]}"
else
  rm -rf "$tier_logs"  # kept only when a tier failed
fi
exit $failed
