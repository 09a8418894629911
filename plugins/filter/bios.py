# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""Declared BIOS attributes against what a BMC reports: the ones still to write."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: dlperf_bios_diff
short_description: The declared BIOS attributes a BMC does not report as set
description:
  - Returns the entries of C(_input) (attribute name to value, as C(bmc_bios_attributes)
    declares them) whose value differs from the one in I(current) (the attributes a BMC's
    Redfish Bios resource reports), or which I(current) lacks. An empty mapping means the BIOS
    runs as declared.
  - A number and its decimal text count as the same value (C(1) and C("1")), since inventories
    and BMCs do not always agree on an Integer attribute's type; anything else compares exactly
    (enumeration values are case-sensitive in Redfish).
options:
  _input:
    description: The declared attributes.
    type: dict
    required: true
  current:
    description: The attributes as the BMC reports them.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Write only the attributes that differ
  community.general.redfish_config:
    category: Systems
    command: SetBiosAttributes
    bios_attributes: "{{ bmc_bios_attributes | dlperf.cluster.dlperf_bios_diff(bmc_bios) }}"
"""

RETURN = r"""
_value:
  description: The declared attributes still to write, with their declared values.
  type: dict
"""


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "text" if isinstance(value, str) else "other"


def _same(declared, current) -> bool:
    kinds = (_kind(declared), _kind(current))
    if kinds[0] == kinds[1]:
        return declared == current
    if sorted(kinds) == ["number", "text"]:
        number, text = (declared, current) if kinds[0] == "number" else (current, declared)
        return str(number) == text.strip()
    return False


def bios_diff(declared, current) -> dict:
    for name, value in (("the declared attributes", declared), ("current", current)):
        if not isinstance(value, Mapping):
            raise AnsibleFilterError(
                f"dlperf_bios_diff: {name} must be a mapping of attribute names to values, "
                f"not {type(value).__name__}"
            )
    return {
        name: value
        for name, value in declared.items()
        if name not in current or not _same(value, current[name])
    }


class FilterModule:
    def filters(self):
        return {"dlperf_bios_diff": bios_diff}
