#!/usr/bin/python
# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Report NVIDIA GPUs, driver, topology and PCIe layout of a node
description:
  - Runs C(nvidia-smi) (query CSV, C(-q) and C(topo -m)) and returns every GPU's index, name,
    UUID, memory, PCI bus id and persistence mode, the driver and CUDA versions, the topology
    matrix with CPU/NUMA affinity, NVLink presence, and a classification of the PCIe layout.
  - Layouts - C(single_switch_one_cpu) (all GPUs behind a PCIe switch on one CPU; PowerEdge
    C4140 configuration K), C(direct_both_cpus) (GPUs attached directly to both CPUs; C4140
    configuration M), C(switched_both_cpus) (GPU groups behind switches on both CPUs; DGX-1),
    C(direct_one_cpu), C(single_gpu), C(unknown) (GPUs whose C(topo -m) printed no matrix), C(none).
  - A node without GPUs or without a working driver is not a failure - C(gpu_present=false).
version_added: "0.1.0"
author: dlperf-cluster maintainers (@dlperf-cluster)
options:
  nvidia_smi:
    description: Path or name of the nvidia-smi binary.
    type: str
    default: nvidia-smi
  timeout:
    description:
      - Seconds to wait for each nvidia-smi call (at least 1).
      - One that does not answer in time (a GPU fallen off the bus, a hung driver) is ended, and
        the node is reported without a GPU, with the reason in C(message).
    type: int
    default: 30
  sysfs_pci_root:
    description: Where PCI devices are listed in sysfs (tests point it at a copy).
    type: path
    default: /sys/bus/pci/devices
attributes:
  check_mode:
    support: full
    description: Only reads; the same in check mode.
notes:
  - Only reads; safe in check mode.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpu_facts:
  register: gpus

- name: Require the C4140 configuration M layout
  ansible.builtin.assert:
    that: gpus.pcie_layout == 'direct_both_cpus'
  when: gpus.gpu_present
"""

RETURN = r"""
gpu_present:
  description: Whether at least one GPU answered.
  type: bool
  returned: always
driver_loaded:
  description: Whether nvidia-smi could talk to the driver.
  type: bool
  returned: always
gpus:
  description:
    - One entry per GPU (index, name, uuid, memory_total_mib, pci_bus_id, persistence_mode, driver_version, cpu_affinity, numa_affinity).
    - memory_total_mib is null where a sick GPU reports none.
  type: list
  elements: dict
  returned: always
driver_version:
  description: NVIDIA driver version.
  type: str
  returned: when a GPU is present
cuda_version:
  description: Highest CUDA version the driver supports.
  type: str
  returned: when a GPU is present
topology:
  description:
    - Device-to-device link matrix from C(nvidia-smi topo -m) (X, NV#, PIX, PXB, PHB, NODE, SYS).
    - NICs are named by their device (C(mlx5_0)), also where the driver prints C(NIC0) and a NIC legend.
  type: dict
  returned: when a GPU is present
nvlink:
  description: Whether any two GPUs are connected by NVLink.
  type: bool
  returned: always
pcie_layout:
  description: Layout classification (see description).
  type: str
  returned: always
pcie_layout_description:
  description: The layout in words, with its reference configuration.
  type: str
  returned: always
sockets:
  description: Number of CPU sockets the GPUs hang off.
  type: int
  returned: always
pci_devices:
  description: PCI addresses of NVIDIA GPUs seen in sysfs (vendor 0x10de, display class), with or without a driver.
  type: list
  elements: str
  returned: always
message:
  description: Why no GPU was reported, when none was.
  type: str
  returned: when gpu_present is false
"""

import shutil  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.dlperf.cluster.plugins.module_utils.dlperf_gpu import (  # noqa: E402
    LAYOUTS,
    QUERY_ARGS,
    classify,
    nvidia_pci_devices,
    parse_cuda_version,
    parse_query,
    parse_topology,
)

# nvidia-smi's exit status when the driver answers but finds no GPU ("No devices were found").
NO_DEVICES = 6


def absent(module: AnsibleModule, message: str, driver_loaded: bool = False) -> None:
    module.exit_json(
        changed=False,
        pci_devices=nvidia_pci_devices(module.params["sysfs_pci_root"]),
        gpu_present=False,
        driver_loaded=driver_loaded,
        gpus=[],
        nvlink=False,
        pcie_layout="none",
        pcie_layout_description=LAYOUTS["none"],
        sockets=0,
        message=message,
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "timeout": {"type": "int", "default": 30},
            "sysfs_pci_root": {"type": "path", "default": "/sys/bus/pci/devices"},
        },
        supports_check_mode=True,
    )
    timeout = module.params["timeout"]
    if timeout < 1:
        module.fail_json(msg=f"timeout {timeout}: must be >= 1 (seconds for each nvidia-smi call)")
    binary = shutil.which(module.params["nvidia_smi"])
    if binary is None:
        absent(module, f"{module.params['nvidia_smi']} not found: no NVIDIA driver installed")

    def smi(*args: str) -> tuple[int, str, str]:
        """(rc, stdout, why it failed or ''). coreutils' timeout ends the call (TERM, then KILL
        5 s later): 124 or 137 when it had to."""
        rc, out, err = module.run_command(
            ["timeout", "--kill-after=5", str(timeout), binary, *args]
        )
        if rc in (124, 137):
            why = (
                f"nvidia-smi {' '.join(args)} did not answer within {timeout} s: a GPU fallen "
                "off the bus or a hung driver (look for Xid errors in the kernel log)"
            )
        elif rc != 0:
            why = f"nvidia-smi {' '.join(args)} failed (rc={rc}): {(err or out).strip()[:300]}"
        else:
            why = ""
        return rc, out, why

    rc, out, why = smi(*QUERY_ARGS)
    if rc == NO_DEVICES:  # the driver answered and found no GPU ("No devices were found")
        absent(module, why, driver_loaded=True)
    if why:
        absent(module, why)
    notes: list = []
    try:
        gpus = parse_query(out, notes)
    except ValueError as exc:
        module.fail_json(msg=f"nvidia-smi's GPU query could not be read: {exc}")
    for note in notes:
        module.warn(f"nvidia-smi: {note}")
    if not gpus:
        absent(module, "nvidia-smi reports no GPU", driver_loaded=True)
    # The GPUs answered the query: a detail call that fails leaves its facts empty, with a
    # warning, rather than the node without its GPUs.
    _rc, details, why = smi("-q")
    if why:
        module.warn(f"{why}: no CUDA version")
    cuda = parse_cuda_version(details) if not why else None
    _rc, matrix, why = smi("topo", "-m")
    if why:
        module.warn(f"{why}: no topology")
    topology = parse_topology(matrix if not why else "")
    for gpu in gpus:
        key = f"GPU{gpu['index']}"
        gpu["cpu_affinity"] = topology["cpu_affinity"].get(key)
        gpu["numa_affinity"] = topology["numa_affinity"].get(key)
    layout = classify(topology, gpu_count=len(gpus))
    module.exit_json(
        changed=False,
        gpu_present=True,
        driver_loaded=True,
        pci_devices=nvidia_pci_devices(module.params["sysfs_pci_root"]),
        gpus=gpus,
        driver_version=gpus[0]["driver_version"],
        cuda_version=cuda,
        topology=topology["matrix"],
        nvlink=layout["nvlink"],
        pcie_layout=layout["layout"],
        pcie_layout_description=layout["description"],
        sockets=layout["sockets"],
    )


if __name__ == "__main__":
    main()
