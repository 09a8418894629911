#!/usr/bin/python
# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: dlperf_job
short_description: Run one distributed dlperf train job and return its result
description:
  - From the launch node, starts C(dlperf train) over a host list with C(horovodrun) (Gloo or
    MPI controller), C(mpirun) or Slurm's C(srun), waits for it with a timeout, and returns the
    parsed C(result.json) (status, throughput, time to accuracy, epochs, world size) and its log
    paths.
  - Run it as the benchmark user (C(become_user)), whose SSH trust MPI needs between nodes.
  - On failure the message carries the tail of the job's log. In check mode the command it
    would run is returned and nothing is started.
  - Stopped by SIGTERM or SIGHUP (the controller going away), it stops its launcher and, for
    C(horovodrun) and C(mpirun), the ranks on every host. Ansible's C(async) time limit ends a
    module with SIGKILL, which nothing can catch, so give O(timeout) below that limit.
version_added: "0.1.0"
author: dlperf-cluster maintainers (@dlperf-cluster)
options:
  hosts:
    description: Host list with slots, C(node1:4,node2:4) (see the C(dlperf_hostlist) filter).
    type: str
    required: true
  np:
    description: Number of processes; defaults to the sum of the slots.
    type: int
  launcher:
    description:
      - C(horovodrun) and C(mpirun) start the ranks over SSH.
      - C(srun) runs the job through Slurm on exactly the hosts given, the same number of tasks
        on each (their slots). Horovod (the mxnet engine) joins over PMIx, PyTorch ranks read
        C(SLURM_PROCID). Outside an allocation srun makes a job of its own (give a partition,
        time or C(--gres) in O(launcher_args)); a timeout ends it.
    type: str
    choices: [horovodrun, mpirun, srun]
    default: horovodrun
  controller:
    description: Horovod controller for C(horovodrun).
    type: str
    choices: [gloo, mpi]
    default: gloo
  network_interface:
    description:
      - Interface for Horovod/MPI traffic (e.g. C(ib0), or C(eth1) on the virtual cluster).
      - With C(srun), given to Open MPI's TCP transport through C(OMPI_MCA_btl_tcp_if_include).
    type: str
  train_args:
    description: Arguments of C(dlperf train), without C(--output).
    type: list
    elements: str
    default: []
  output:
    description: Directory for result.json, mllog.txt and job.log (on the launch node; shared storage for multi-node).
    type: path
    required: true
  dlperf:
    description: Path of the dlperf command on every node.
    type: str
    default: dlperf
  timeout:
    description:
      - Seconds after which the job is stopped (SIGTERM to the launcher and its ranks, SIGKILL
        40 s later with C(srun), after its own wait of KillWait + 2 s for the step to end, and
        15 s later with C(horovodrun) or C(mpirun), which pass SIGTERM on to the ranks at once)
        and reported failed. With C(horovodrun) or C(mpirun), ranks of a failed or stopped job
        still running on any of O(hosts) are then stopped (over SSH). A module that Ansible
        ends with SIGTERM stops its job the same way.
    type: int
    default: 3600
  start_timeout:
    description: Seconds horovodrun waits for all workers to start.
    type: int
    default: 300
  launcher_args:
    description: Extra arguments for the launcher.
    type: list
    elements: str
    default: []
  environment:
    description:
      - Extra environment variables for the job.
      - C(MASTER_ADDR) (the first host of O(hosts)) and C(MASTER_PORT) (29500), where the
        PyTorch engine's ranks meet, are set unless given here or in the environment; with
        O(network_interface), so are C(GLOO_SOCKET_IFNAME) and C(NCCL_SOCKET_IFNAME).
      - With O(launcher=mpirun) every variable named here and the ones above are exported to the
        ranks on every host (C(-x)); mpirun passes the others only to ranks on its own host.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: >-
      In check mode the launch command is worked out and returned, reported as a change (a job
      would run); nothing is started.
"""

EXAMPLES = r"""
- name: Train over the first two compute nodes
  dlperf_job:
    hosts: "{{ groups['compute'][:2] | dlperf_hostlist(hostvars, slots_var='gpus_per_node') }}"
    network_interface: ib0
    train_args: [--mode, throughput, --iterations, "200"]
    output: /shared/results/run1/2nodes
  become: true
  become_user: dlperf
  register: job
"""

RETURN = r"""
cmd:
  description: The command line run (or that would run, in check mode).
  type: list
  elements: str
  returned: always
result:
  description: status, mode, world_size, nodes, throughput_img_per_s, throughput_img_per_s_per_worker, time_to_accuracy_s, epochs, top1, reached_target.
  type: dict
  returned: when the job wrote a result
rc:
  description: Exit status of the launcher; -9 when it ran past I(timeout) and was stopped.
  type: int
  returned: when the job ran
log:
  description: Path of the job's combined stdout/stderr log.
  type: str
  returned: always
result_file:
  description: Path of result.json.
  type: str
  returned: always
elapsed_s:
  description: Wall time of the job.
  type: float
  returned: when the job ran (also when it was stopped at its timeout)
stray_ranks_stopped_on:
  description:
    - Hosts on which ranks of a failed or timed-out job outlived the launcher (ranks started
      over SSH get no signal when their SSH client is killed) and were stopped, SIGTERM then
      SIGKILL.
  type: list
  elements: str
  returned: when the launcher (not srun) failed or ran past its timeout
"""

import os  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.dlperf.cluster.plugins.module_utils.dlperf_job import (  # noqa: E402
    GLOO_TIMEOUT_DEFAULT,
    host_names,
    job_environment,
    launch_command,
    log_tail,
    raise_on_termination,
    read_result,
    rendezvous_environment,
    run_logged,
    stop_grace,
    stop_stray_ranks,
    summarise,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "str", "required": True},
            "np": {"type": "int"},
            "launcher": {
                "type": "str",
                "choices": ["horovodrun", "mpirun", "srun"],
                "default": "horovodrun",
            },
            "controller": {"type": "str", "choices": ["gloo", "mpi"], "default": "gloo"},
            "network_interface": {"type": "str"},
            "train_args": {"type": "list", "elements": "str", "default": []},
            "output": {"type": "path", "required": True},
            "dlperf": {"type": "str", "default": "dlperf"},
            "timeout": {"type": "int", "default": 3600},
            "start_timeout": {"type": "int", "default": 300},
            "launcher_args": {"type": "list", "elements": "str", "default": []},
            "environment": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    if "--output" in p["train_args"]:
        module.fail_json(msg="train_args must not contain --output; use the output option")
    for name in ("timeout", "start_timeout"):
        if p[name] < 1:
            module.fail_json(msg=f"{name} {p[name]}: must be >= 1 (seconds)")
    if p["np"] is not None and p["np"] < 1:
        module.fail_json(msg=f"np {p['np']}: must be >= 1 (ranks; leave it out for one per slot)")
    output = p["output"]
    log = os.path.join(output, "job.log")
    result_file = os.path.join(output, "result.json")
    try:
        defaults = rendezvous_environment(p["hosts"], p["network_interface"])
        cmd = launch_command(
            p["launcher"],
            p["hosts"],
            p["np"],
            [*p["train_args"], "--output", output],
            dlperf=p["dlperf"],
            controller=p["controller"],
            network_interface=p["network_interface"],
            start_timeout=p["start_timeout"],
            extra_launcher_args=p["launcher_args"],
            # What the job's environment sets reaches the ranks on every host.
            forward_env=[*GLOO_TIMEOUT_DEFAULT, *defaults, *p["environment"]],
        )
    except ValueError as exc:
        module.fail_json(msg=f"hosts/np: {exc}")
    if module.check_mode:  # a job would run: a check run reports it as a change
        module.exit_json(changed=True, cmd=cmd, log=log, result_file=result_file)

    os.makedirs(output, exist_ok=True)
    if os.path.exists(result_file):  # never report a previous job's numbers as this one's
        os.unlink(result_file)
    if p["launcher"] == "srun" and p["network_interface"]:
        defaults["OMPI_MCA_btl_tcp_if_include"] = p["network_interface"]
    env = job_environment(dict(os.environ), p["environment"], defaults=defaults)
    start = time.monotonic()
    raise_on_termination()
    try:
        rc = run_logged(cmd, log, env, output, p["timeout"], grace=stop_grace(p["launcher"]))
    except BaseException:  # stopped (SIGTERM, SIGHUP): its launcher is; its ranks must be too
        if p["launcher"] != "srun":
            stop_stray_ranks(host_names(p["hosts"]), output, p["dlperf"])
        raise
    # Ranks that horovodrun or mpirun started over SSH can outlive a launcher that failed or
    # was stopped (srun's steps end with their job).
    stray = {}
    if rc != 0 and p["launcher"] != "srun":
        stray["stray_ranks_stopped_on"] = stop_stray_ranks(
            host_names(p["hosts"]), output, p["dlperf"]
        )
    if rc is None:
        module.fail_json(
            msg=f"job exceeded timeout={p['timeout']}s and was stopped; log tail:\n{log_tail(log)}",
            cmd=cmd,
            log=log,
            result_file=result_file,
            rc=-9,
            elapsed_s=time.monotonic() - start,
            **stray,
        )
    elapsed = time.monotonic() - start
    data = read_result(output)
    common = {"cmd": cmd, "log": log, "result_file": result_file, "rc": rc, "elapsed_s": elapsed}
    common.update(stray)
    if data is not None:
        common["result"] = summarise(data)
    if rc != 0 or data is None or data.get("status") != "ok":
        why = "no result.json written" if data is None else f"status={data.get('status')}"
        module.fail_json(
            msg=f"dlperf job failed (rc={rc}, {why}); log tail:\n{log_tail(log)}", **common
        )
    module.exit_json(changed=True, **common)


if __name__ == "__main__":
    main()
