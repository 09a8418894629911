# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""Inventory hosts -> the host list Horovod and MPI take (``node1:4,node2:4``)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: dlperf_hostlist
short_description: Horovod/MPI host list with slots from inventory hosts
description:
  - Turns a list of inventory hosts into C(host:slots) entries joined by commas, as
    C(horovodrun -H) and C(mpirun --host) take them. Slots per host come from a host variable
    (GPUs per node, or processes per node on CPU) or a default.
options:
  _input:
    description: Inventory host names, in launch order.
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) mapping.
    type: dict
    required: true
  slots_var:
    description: Host variable with the slot count.
    type: str
    default: dlperf_slots
  default_slots:
    description: Slots for hosts without that variable.
    type: int
    default: 1
  address_var:
    description:
      - Host variable with the address to launch on (e.g. the IPoIB address).
      - The host name when unset.
    type: str
"""

EXAMPLES = r"""
- name: Launch over the first two compute nodes, 4 GPUs each
  ansible.builtin.debug:
    msg: >-
      {{ groups['compute'][:2]
         | dlperf.cluster.dlperf_hostlist(hostvars, slots_var='dlperf_gpus_per_node') }}
  # -> c4140-01:4,c4140-02:4
"""

RETURN = r"""
_value:
  description: The host list, for example C(node1:4,node2:4).
  type: str
"""


def hostlist(hosts, hostvars, slots_var="dlperf_slots", default_slots=1, address_var=None) -> str:
    if isinstance(hosts, str):
        raise AnsibleFilterError("dlperf_hostlist expects a list of host names, not a string")
    if not hosts:
        raise AnsibleFilterError("dlperf_hostlist: the host list is empty")
    entries = []
    for host in hosts:
        # (ansible-core 2.19's hostvars answers get() of an unknown host with an undefined
        # value, not None: ask whether it has the host)
        if host not in hostvars:
            raise AnsibleFilterError(f"dlperf_hostlist: {host!r} is not an inventory host")
        hv = hostvars[host]
        slots = hv.get(slots_var, default_slots)
        try:
            slots = int(slots)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError(
                f"dlperf_hostlist: {host}: {slots_var}={slots!r} is not a number"
            ) from exc
        if slots < 1:
            raise AnsibleFilterError(f"dlperf_hostlist: {host}: {slots_var}={slots} must be >= 1")
        name = hv.get(address_var, host) if address_var else host
        entries.append(f"{name}:{slots}")
    return ",".join(entries)


class FilterModule:
    def filters(self):
        return {"dlperf_hostlist": hostlist}
