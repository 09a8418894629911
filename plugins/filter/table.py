# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""Rows of dicts -> aligned text lines, for tables printed by playbooks (validate.yml)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: dlperf_table
short_description: Aligned text table from a list of dicts
description:
  - Formats rows (dicts) as a header line and one line per row, each column padded to its
    widest cell; the last column is not padded. Missing keys print as C(-).
  - Status-like columns read better upper-cased; name them in I(upper).
options:
  _input:
    description: The rows.
    type: list
    elements: dict
    required: true
  columns:
    description: Keys to show, in order.
    type: list
    elements: str
    required: true
  upper:
    description: Columns whose values are upper-cased.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Show the validation table
  ansible.builtin.debug:
    msg: >-
      {{ rows | dlperf.cluster.dlperf_table(['status', 'check', 'node', 'detail'],
                                            upper=['status']) }}
"""

RETURN = r"""
_value:
  description: The header line, then one line per row.
  type: list
  elements: str
"""


def table(rows, columns, upper=()) -> list[str]:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise AnsibleFilterError("dlperf_table expects a list of dicts")
    if not columns:
        raise AnsibleFilterError("dlperf_table: no columns given")
    cells = [list(columns)]
    for row in rows:
        line = []
        for col in columns:
            value = row.get(col)
            text = "-" if value is None else " ".join(str(value).split())
            line.append(text.upper() if col in upper else text)
        cells.append(line)
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]]).rstrip()
        for line in cells
    ]


class FilterModule:
    def filters(self):
        return {"dlperf_table": table}
