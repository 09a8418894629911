# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""Role options written the way the native tools write them, and options of the wrong shape.

Ansible's role argument validation turns a list or a mapping given for a `str` option into its
text, and passes a comma-joined string for a `list` option; neither changes the variable the
role then reads. These filters give the roles what validation alone cannot: a clear refusal of
the first, and the native comma form of the second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError

# Each filter's documentation: dlperf_listify.yml and dlperf_shape_errors.yml beside this file.


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, Sequence):
        return list(value)
    return [value]


def listify(value, fields=None) -> list:
    if fields is None:
        return _as_list(value)
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise AnsibleFilterError(f"dlperf_listify expects a list of dicts, got {value!r}")
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            raise AnsibleFilterError(f"dlperf_listify expects a list of dicts, got item {item!r}")
        fixed = dict(item)
        for field in fields:
            if field in fixed:
                fixed[field] = _as_list(fixed[field])
        out.append(fixed)
    return out


def shape_errors(options, values, comma_lists=()) -> list[str]:
    """Messages for the text options (type str or path) that hold a list or a mapping, and the
    list options given as text, except those the role reads in comma form (`comma_lists`).

    `options` is a role's argument_specs options; `values` their current values, in the same
    order (a vars lookup of every option name).
    """
    if not isinstance(options, Mapping) or not isinstance(values, Sequence):
        raise AnsibleFilterError("dlperf_shape_errors expects the options and their values")
    errors = []
    for (name, spec), value in zip(options.items(), values, strict=True):
        kind = (spec or {}).get("type", "str")
        if kind not in ("str", "path"):
            continue
        is_list = isinstance(value, Sequence) and not isinstance(value, str)
        if isinstance(value, Mapping) or is_list:
            shape = "a mapping" if isinstance(value, Mapping) else "a list"
            shown = "" if (spec or {}).get("no_log") else f": {value!r}"  # a secret stays out
            errors.append(f"{name} must be a single value ({kind}), not {shape}{shown}.")
    for (name, spec), value in zip(options.items(), values, strict=True):
        kind = (spec or {}).get("type")
        if kind == "list" and isinstance(value, str) and name not in comma_lists:
            if (spec or {}).get("no_log"):
                errors.append(f"{name} must be a list, not text.")
                continue
            items = ", ".join(part.strip() for part in value.split(",") if part.strip())
            errors.append(f"{name} must be a list, e.g. [{items}], not the text {value!r}.")
    return errors


class FilterModule:
    def filters(self):
        return {"dlperf_listify": listify, "dlperf_shape_errors": shape_errors}
