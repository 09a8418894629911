#!/usr/bin/python
# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ib_facts
short_description: Report RDMA devices, ports, counters and IPoIB interfaces from sysfs
description:
  - Reads C(/sys/class/infiniband) (InfiniBand HCAs such as mlx5, RoCE, and soft-RoCE C(rxe))
    and returns each device's firmware, node type and GUID, and per port the state, physical
    state, rate, link layer, LID, GIDs and data counters in bytes (C(port_xmit_data) and
    C(port_rcv_data) count 4-byte words; this module multiplies by 4).
  - A counter at 2^32-1 is a 32-bit one that has stopped at its maximum (an HCA without extended
    counters); it is returned as null and named in C(counters.saturated), never as a count.
  - Soft-RoCE (C(rxe)) devices have no such port counters, only C(hw_counters) (packets); their
    byte counts come from the parent Ethernet device's statistics (C(counters.source) says so).
  - Reads C(/sys/class/net) for IPoIB interfaces (type 32) with their mode and MTU.
  - No RDMA device is not a failure - C(ib_present=false).
version_added: "0.1.0"
author: dlperf-cluster maintainers (@dlperf-cluster)
options:
  sysfs_root:
    description: Directory under which C(sys/class/...) is read (tests point it at a captured tree).
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Only reads; the same in check mode.
"""

EXAMPLES = r"""
- name: Gather RDMA facts
  ib_facts:
  register: ib

- name: Require an active port at EDR rate
  ansible.builtin.assert:
    that: ib.devices | map(attribute='ports') | map('dict2items') | flatten
          | selectattr('value.state', 'eq', 'ACTIVE') | selectattr('value.rate_gbps', 'ge', 100) | list | length > 0
"""

RETURN = r"""
ib_present:
  description: Whether any RDMA device exists.
  type: bool
  returned: always
devices:
  description:
    - RDMA devices with name, firmware, node_type, node_guid, board_id, parent_netdev, soft_roce
      and ports.
    - Each port has state, phys_state, rate, rate_gbps, link_layer, lid, gids and counters with
      port_xmit_bytes, port_rcv_bytes and the packet counts (null where saturated, listed in
      saturated).
  type: list
  elements: dict
  returned: always
active:
  description:
    - Every ACTIVE port as device, port, link_layer, rate and soft_roce; host channel adapters
      first, then soft-RoCE devices, each in name and port order.
    - The first is the port a fabric check should use (C(ib_write_bw -d DEVICE -i PORT)).
  type: list
  elements: dict
  returned: always
ipoib:
  description: IPoIB interfaces with name, mode (datagram or connected), mtu, operstate, address.
  type: list
  elements: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.dlperf.cluster.plugins.module_utils.dlperf_ib import (  # noqa: E402
    active_ports,
    read_devices,
    read_ipoib,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={"sysfs_root": {"type": "path", "default": "/"}}, supports_check_mode=True
    )
    root = module.params["sysfs_root"]
    devices = read_devices(root)
    module.exit_json(
        changed=False,
        ib_present=bool(devices),
        devices=devices,
        active=active_ports(devices),
        ipoib=read_ipoib(root),
    )


if __name__ == "__main__":
    main()
