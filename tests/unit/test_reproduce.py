"""`dlperf reproduce`: input checks, and which playbooks it runs for which inventory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dlperf.playbooks import PlaybookStopped
from dlperf.reproduce import (
    ReproduceConfig,
    ReproduceError,
    _phases,
    phase_table,
    run_command,
    run_reproduce,
)
from dlperf.reproduce_command import parse_extra_vars, role_booleans

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--project", "/"], "--project /: no site.yml"),
        (["--inventory", "inventory/nowhere"], "--inventory inventory/nowhere: no such inventory"),
        (["--run-id", "a b"], "--run-id 'a b'"),
        (["--run-id", "_a"], "--run-id '_a'"),
        (["-e", "serial"], "--extra-vars 'serial': give KEY=VALUE or @FILE"),
        (
            ["-e", "@/nonexistent/rollout.yml"],
            "--extra-vars @/nonexistent/rollout.yml: cannot read",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_value_before_anything_runs(tmp_path, args, needle):
    proc = subprocess.run(
        [str(BIN / "dlperf"), "reproduce", "--project", str(REPO), "--results", str(tmp_path),
         "--quiet", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run directory, no record


def test_a_real_inventory_gets_no_vms_and_no_prebuilt_wheel(tmp_path):
    cfg = ReproduceConfig(REPO, Path("inventory/reference"), "r1", tmp_path)
    assert not cfg.virtual
    phases = _phases(cfg)
    assert [(name, playbook) for name, playbook, _ in phases] == [
        ("site", "site.yml"),
        ("validate", "playbooks/validate.yml"),
        ("benchmark", "playbooks/benchmark.yml"),
    ]
    assert phases[0][2] == {}  # the head node builds Horovod itself
    assert phases[1][2] == {"dlperf_validate_report": str(tmp_path.resolve() / "r1/validate.json")}
    assert phases[2][2] == {"dlperf_run_id": "r1", "dlperf_results_dir": str(tmp_path.resolve())}
    no_deploy = ReproduceConfig(REPO, Path("inventory/reference"), "r1", tmp_path, deploy=False)
    assert [name for name, _, _ in _phases(no_deploy)] == ["validate", "benchmark"]


def test_extra_vars_reach_every_phase_but_never_replace_the_phases_own(tmp_path):
    rollout = tmp_path / "rollout.yml"
    rollout.write_text(
        "dlperf_serial_base: 2\ndlperf_max_fail_percentage_base: 0\ncuda_reboot: true\n"
    )
    given = parse_extra_vars([f"@{rollout}", "cuda_reboot_throttle=2", "dlperf_run_id=mine"])
    assert given == {
        "dlperf_serial_base": 2,
        "dlperf_max_fail_percentage_base": 0,
        "cuda_reboot": True,
        "cuda_reboot_throttle": "2",
        "dlperf_run_id": "mine",
    }
    cfg = ReproduceConfig(REPO, Path("inventory/reference"), "r1", tmp_path, extra_vars=given)
    phases = {name: extra for name, _, extra in _phases(cfg)}
    assert phases["site"]["dlperf_serial_base"] == 2 and phases["validate"]["cuda_reboot"] is True
    # the run id is the command's own: a stray -e cannot split the results
    assert phases["benchmark"]["dlperf_run_id"] == "r1"
    not_a_mapping = tmp_path / "list.yml"
    not_a_mapping.write_text("- a\n- b\n")
    with pytest.raises(ReproduceError, match="not a mapping"):
        parse_extra_vars([f"@{not_a_mapping}"])


def test_extra_vars_are_split_and_unquoted_as_ansible_playbook_does():
    # one -e with several pairs and a quoted value, and a JSON one: as ansible-playbook -e; the
    # roles' booleans given as KEY=VALUE become booleans
    booleans = role_booleans(REPO)
    assert {"cuda_reboot", "cuda_required", "isilon_readonly", "slurm_enabled"} <= booleans
    assert "cuda_reboot_throttle" not in booleans and "cuda_version" not in booleans
    given = parse_extra_vars(
        [
            'dlperf_serial_base=2 cuda_reboot=true cuda_required=False note="two words" '
            'raw={"a":1} cuda_version=11.8',
            '{"cuda_reboot_throttle": 3}',
            "{flow: yaml}",
        ],
        booleans,
    )
    assert given == {
        "dlperf_serial_base": "2",
        "cuda_reboot": True,
        "cuda_required": False,
        "cuda_version": "11.8",  # a string still
        "note": "two words",
        "raw": '{"a":1}',  # kept as written, as ansible-playbook keeps it
        "cuda_reboot_throttle": 3,
        "flow": "yaml",
    }
    for bad, needle in (
        ("a=1 b", "give KEY=VALUE"),
        ('a="open', "unbalanced"),
        ("{not: [closed", "not JSON or YAML"),
        ("cuda_reboot=maybe", "cuda_reboot=maybe: cuda_reboot is a boolean"),
    ):
        with pytest.raises(ReproduceError, match=needle):
            parse_extra_vars([bad], booleans)


def test_the_virtual_inventory_is_recognised_by_path():
    for inventory in ("inventory/virtual", "inventory/virtual/hosts.yml", "./inventory/virtual"):
        assert ReproduceConfig(REPO, Path(inventory), "x", REPO / "results").virtual
    assert not ReproduceConfig(REPO, Path("inventory/reference"), "x", REPO / "results").virtual


def test_the_phase_table_shows_status_wall_time_and_changes():
    record = {"phases": {
        "site": {"status": "ok", "duration_s": 1020.4, "changed": 86, "resumed": True},
        "validate": {"status": "failed", "duration_s": 128.0, "changed": 2},
    }}  # fmt: skip
    assert phase_table(record) == [
        "phase      status       wall  changed",
        "site       resumed     1020s  86",
        "validate   failed       128s  2",
    ]


# A stand-in benchmark.yml: it "fetches" one result per point, with the statuses it is given.
BENCHMARK = """- hosts: localhost
  gather_facts: false
  vars:
    statuses: STATUSES
  tasks:
    - ansible.builtin.file:
        path: "{{ dlperf_results_dir }}/{{ dlperf_run_id }}/tta/{{ item.key }}"
        state: directory
        mode: "0755"
      loop: "{{ statuses | dict2items }}"
    - ansible.builtin.copy:
        content: '{"status": "{{ item.value }}"}'
        dest: "{{ dlperf_results_dir }}/{{ dlperf_run_id }}/tta/{{ item.key }}/result.json"
        mode: "0644"
      loop: "{{ statuses | dict2items }}"
"""


# Stands in for the sweeps' stop: records that it ran, for which run id, and says what
# `dlperf sweep --stop` says when it stopped one.
STOP = """- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.copy:
        content: "{{ dlperf_run_id }}"
        dest: "{{ dlperf_results_dir }}/{{ dlperf_run_id }}/stop-ran"
        mode: "0644"
    - ansible.builtin.debug:
        msg: "--run-id tta: stopped its sweep (pid 4242) and what its running point had started"
"""


ALIVE = f"    alive: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n"


def local_project(
    tmp_path: Path, statuses: dict, run_id: str = "pts", more_hosts: str = ""
) -> ReproduceConfig:
    """A project whose site.yml and validate.yml ping every host and whose benchmark.yml
    writes one result per point with the given statuses; the controller is host `alive`."""
    project = tmp_path / "project"
    (project / "playbooks").mkdir(parents=True)
    (project / "ansible.cfg").write_text("[defaults]\nhost_key_checking = False\n")
    play = "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n"
    for name in ("site.yml", "playbooks/validate.yml"):
        (project / name).write_text(play)
    (project / "playbooks/stop.yml").write_text(STOP)
    (project / "playbooks/benchmark.yml").write_text(
        BENCHMARK.replace("STATUSES", json.dumps(statuses))
    )
    (project / "hosts.yml").write_text("all:\n  hosts:\n" + ALIVE + more_hosts)
    return ReproduceConfig(project, Path("hosts.yml"), run_id, tmp_path / "results")


def test_a_benchmark_whose_every_point_failed_fails_naming_the_points(tmp_path):
    cfg = local_project(tmp_path, {"1nodes": "failed", "2nodes": "failed"})
    with pytest.raises(ReproduceError, match=r"no sweep point succeeded \(tta/1nodes, tta/2nodes"):
        run_reproduce(cfg)
    record = json.loads((cfg.run_dir / "reproduce.json").read_text())
    assert record["phases"]["benchmark"]["status"] == "failed"


def test_a_benchmark_with_some_failed_points_is_partial(tmp_path):
    cfg = local_project(tmp_path, {"1nodes": "ok", "2nodes": "failed"})
    record = run_reproduce(cfg)
    bench = record["phases"]["benchmark"]
    assert bench["status"] == "partial" and bench["failed_points"] == ["tta/2nodes"]
    assert bench["points"] == {"tta/1nodes": "ok", "tta/2nodes": "failed"}


def test_a_lost_host_stops_the_run_naming_it_and_a_rerun_keeps_the_finished_phases(tmp_path):
    """Real ansible-runner against a project whose site.yml reaches one live host (the
    controller, local connection) and one that is gone (nothing listens on its port)."""
    gone = (
        "    gone: {ansible_host: 127.0.0.1, ansible_port: 9, ansible_user: nobody,"
        " ansible_ssh_common_args: '-o ConnectTimeout=5 -o BatchMode=yes'}\n"
    )
    cfg = local_project(tmp_path, {"1nodes": "ok"}, run_id="lost", more_hosts=gone)
    inventory = cfg.project / cfg.inventory
    with pytest.raises(ReproduceError) as err:
        run_reproduce(cfg)
    message = str(err.value)
    assert "phase site (site.yml) failed" in message
    assert "failed hosts: none; unreachable: gone" in message
    assert "Bring gone back" in message and "--run-id lost --inventory hosts.yml" in message
    record = json.loads((cfg.run_dir / "reproduce.json").read_text())
    assert record["phases"]["site"]["unreachable"] == ["gone"]
    assert record["phases"]["site"]["status"] == "failed"
    assert record["phases"]["site"]["changed_by_host"] == {"alive": 0, "gone": 0}
    assert "validate" not in record["phases"]  # nothing ran past the failed phase

    # The host is back (here: dropped from the inventory): the same run id goes on to the end.
    inventory.write_text(inventory.read_text().split("    gone:")[0])
    record = run_reproduce(cfg)
    assert [(p, v["status"]) for p, v in record["phases"].items()] == [
        ("site", "ok"), ("validate", "ok"), ("benchmark", "ok")]  # fmt: skip


CLUSTER = {
    "unchanged": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
    "    - ansible.builtin.ping:\n",
    "changed": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
    "    - ansible.builtin.command: 'true'\n",
    "failed": "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
    "    - ansible.builtin.fail: {msg: a VM did not boot}\n",
}


def test_a_deployment_is_kept_while_its_machines_stand_and_redone_when_they_may_not(
    tmp_path, monkeypatch
):
    """Real ansible-runner; the virtual cluster's phase is a stand-in playbook that reports its
    VMs unchanged, re-created, or failed before changing anything."""
    import dlperf.reproduce as reproduce

    cfg = local_project(tmp_path, {"1nodes": "ok"}, run_id="keep")
    cluster = cfg.project / "playbooks/cluster.yml"
    real_phases = reproduce._phases
    monkeypatch.setattr(reproduce, "_phases", lambda c: [
        ("cluster", "playbooks/cluster.yml", {}), *real_phases(c)])  # fmt: skip

    def run(state: str) -> dict:
        cluster.write_text(CLUSTER[state])
        return run_reproduce(cfg)

    def site_ran(record: dict) -> bool:
        return not record["phases"]["site"].get("resumed")

    assert site_ran(run("unchanged"))
    cluster.write_text(CLUSTER["failed"])
    with pytest.raises(ReproduceError, match="phase cluster"):
        run_reproduce(cfg)
    assert not site_ran(run("unchanged"))  # the failed phase changed nothing: still deployed
    assert site_ran(run("changed"))  # new VMs: deployed again

    # Stopped inside the cluster phase (a real Ctrl-C while the VMs are being made): what it
    # did is unknown, so the next run deploys again although its own cluster phase changes
    # nothing. ansible-runner kills the stopped playbook (no recap: no change counted) and
    # must not be taken for a finished one.
    started = tmp_path / "cluster-started"
    cluster.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f"    - ansible.builtin.command: touch {started}\n"
        "    - ansible.builtin.command: sleep 60\n"
    )

    sent: list[float] = []

    def interrupt_once_started():
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if started.exists():  # never into a later test: only while this playbook runs
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt, match=r"cluster\.yml stopped by SIGINT"):
        run_reproduce(cfg)
    assert sent and time.monotonic() - sent[0] < 30  # stopped, not its 60 s sleep waited out
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Ctrl-C works again
    assert site_ran(run("unchanged"))


def test_stopped_in_the_benchmark_phase_it_stops_the_sweeps_on_the_launch_node(tmp_path):
    # The sweep benchmark.yml started over SSH outlives the stopped ansible-playbook: reproduce
    # runs playbooks/stop.yml then, and says so. Stopped in another phase, it does not.
    cfg = local_project(tmp_path, {"1nodes": "ok"}, run_id="halt")
    started = tmp_path / "benchmark-started"
    (cfg.project / "playbooks/benchmark.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f"    - ansible.builtin.command: touch {started}\n"
        "    - ansible.builtin.command: sleep 60\n"
    )

    def interrupt_once_started():
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if started.exists():
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(PlaybookStopped, match=r"benchmark\.yml stopped by SIGINT") as stopped:
        run_reproduce(cfg)
    assert (cfg.run_dir / "stop-ran").read_text() == "halt"
    assert stopped.value.cleanup == "its sweep on the launch node was stopped (playbooks/stop.yml)"

    # a stop that fails says how to stop them by hand
    (cfg.project / "playbooks/stop.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.fail:\n        msg: no launch node\n"
    )
    started.unlink()
    threading.Thread(target=interrupt_once_started, daemon=True).start()
    with pytest.raises(PlaybookStopped) as stopped:
        run_reproduce(cfg)
    assert stopped.value.cleanup.startswith("its sweeps could not be stopped (log: ")
    assert stopped.value.cleanup.endswith(
        "they run on until `ansible-playbook -i hosts.yml playbooks/stop.yml "
        "-e dlperf_run_id=halt` stops them"
    )


def test_a_run_id_stays_with_its_inventory(tmp_path):
    cfg = local_project(tmp_path, {"1nodes": "ok"}, run_id="one")
    run_reproduce(cfg)
    (cfg.project / "other.yml").write_text((cfg.project / cfg.inventory).read_text())
    other = ReproduceConfig(cfg.project, Path("other.yml"), "one", cfg.results)
    with pytest.raises(
        ReproduceError,
        match=r"--run-id one: its results came from --inventory "
        r"hosts.yml; give that inventory again, or a new --run-id for other.yml",
    ):
        run_reproduce(other)  # fmt: skip


def test_a_time_to_accuracy_point_that_ran_out_of_epochs_makes_the_benchmark_partial(
    tmp_path, capsys
):
    # The 2-node run used up its epochs below the target: it ended "ok", without a time.
    results = {n: {"status": "ok", "mode": "tta", "reached_target": n == "1nodes"}
               for n in ("1nodes", "2nodes")}  # fmt: skip
    cfg = local_project(tmp_path, results, run_id="tta")
    bench = cfg.project / "playbooks/benchmark.yml"
    bench.write_text(
        bench.read_text().replace(
            """content: '{"status": "{{ item.value }}"}'""", 'content: "{{ item.value | to_json }}"'
        )
    )
    assert run_command(cfg, quiet=True) == 1
    record = json.loads((cfg.run_dir / "reproduce.json").read_text())
    bench_entry = record["phases"]["benchmark"]
    assert bench_entry["status"] == "partial"
    assert bench_entry["points"] == {"tta/1nodes": "ok", "tta/2nodes": "target not reached"}
    out = capsys.readouterr().out
    # a rerun keeps it: the closing lines must not promise to repeat it
    assert "below the target (kept: a run again does not repeat them): tta/2nodes" in out
    assert "to repeat just those" not in out
