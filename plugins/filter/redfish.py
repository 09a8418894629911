# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""One system's data out of what community.general.redfish_info reports for every system."""

from __future__ import annotations

from collections.abc import Sequence

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: dlperf_redfish_system
short_description: The entry of one ComputerSystem in redfish_info's per-system results
description:
  - C(community.general.redfish_info) reports a C(Systems) command for every ComputerSystem a
    BMC manages, as C(entries), pairs of the system's URI and its data. Unlike C(redfish_config) and
    C(redfish_command) it takes no C(resource_id). This returns the data of the system whose
    C(Id) is I(resource_id), as those modules choose it.
  - A system matches by the C(Id) in its data or, where the data has none (BIOS attributes), by
    the last segment of its URI, which Redfish names after the C(Id).
  - With no I(resource_id), a BMC must manage exactly one system (iDRAC does), as for
    C(redfish_command). Otherwise, or when no system matches, the error names the systems.
options:
  _input:
    description: The C(entries) of a C(redfish_facts) section, e.g. C(redfish_facts.system.entries).
    type: list
    elements: list
    required: true
  resource_id:
    description: The C(Id) of the system (C(bmc_resource_id)); empty for the only one.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Keep the node's system out of every system the BMC reported
  ansible.builtin.set_fact:
    system: >-
      {{ info.redfish_facts.system.entries
         | dlperf.cluster.dlperf_redfish_system(bmc_resource_id) }}
"""

RETURN = r"""
_value:
  description: The data of the chosen system's entry.
  type: dict
"""


def _uri(reference) -> str:
    uri = next(iter(reference.values()), "") if isinstance(reference, dict) else ""
    return str(uri).rstrip("/")


def redfish_system(entries, resource_id: str = "") -> dict:
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        raise AnsibleFilterError(
            "dlperf_redfish_system: give redfish_info's entries (a list), "
            f"not {type(entries).__name__}"
        )
    pairs = []
    for entry in entries:
        if not isinstance(entry, Sequence) or len(entry) != 2:
            raise AnsibleFilterError(
                f"dlperf_redfish_system: {entry!r} is not a [{{system_uri: URI}}, data] entry"
            )
        pairs.append((_uri(entry[0]), entry[1]))
    names = ", ".join(
        str(data.get("Id") or uri.rsplit("/", 1)[-1]) if isinstance(data, dict) else uri
        for uri, data in pairs
    )
    if not resource_id:
        if len(pairs) == 1:
            return pairs[0][1]
        raise AnsibleFilterError(
            f"the BMC manages {len(pairs)} systems ({names or 'none'}): set bmc_resource_id "
            "to the Id of this node's system"
        )
    for uri, data in pairs:
        if isinstance(data, dict) and data.get("Id") == resource_id:
            return data
        if uri.rsplit("/", 1)[-1] == resource_id:
            return data
    raise AnsibleFilterError(
        f"bmc_resource_id {resource_id!r}: the BMC has no such system "
        f"(its systems: {names or 'none'})"
    )


class FilterModule:
    def filters(self):
        return {"dlperf_redfish_system": redfish_system}
