"""A boolean option given on a command line (`-e ofed_mlnx_update_firmware=false`) or in an INI
inventory arrives as the text 'false', which role argument validation accepts as a bool without
changing the variable the role then reads, and which Jinja takes as true. Every use of a
boolean option therefore goes through `| bool`: read in every role, playbook and template, and
behaviour checked with the text forms on real roles."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .test_role_gating import messages, no_ipoib
from .test_role_input_validation import LOCAL, apply_role, inventory

REPO = Path(__file__).resolve().parents[2]
# Keys whose values Ansible evaluates as expressions without {{ }}.
EXPRESSION_KEYS = {"when", "that", "failed_when", "changed_when", "until"}
SPAN = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
AS_BOOL = r"\s*(?:\|\s*default\([^()]*\)\s*)?\|\s*bool\b"


def boolean_options() -> tuple[set[str], set[str]]:
    """Every role's boolean options, and the boolean sub-options (read as item.NAME)."""
    top: set[str] = set()
    sub: set[str] = set()

    def walk(options: dict, into: set[str]) -> None:
        for name, spec in (options or {}).items():
            if spec.get("type") == "bool":
                into.add(name)
            walk(spec.get("options"), sub)

    for path in REPO.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(path.read_text())["argument_specs"].values():
            walk(entry.get("options"), top)
    return top, sub


def expressions(node, key: str | None = None):
    """The Jinja expressions in a parsed YAML file: the values of EXPRESSION_KEYS whole, and
    what is inside {{ }} and {% %} in every other string."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from expressions(v, k)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item, key)
    elif isinstance(node, str):
        if key in EXPRESSION_KEYS and "{{" not in node:
            yield node
        else:
            yield from ("".join(m.groups("")) for m in SPAN.finditer(node))


def sources() -> list[tuple[Path, list[str]]]:
    out = []
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "roles/*/vars/*.yml",
                    "roles/*/defaults/*.yml", "playbooks/*.yml", "site.yml"):  # fmt: skip
        for path in sorted(REPO.glob(pattern)):
            out.append((path, list(expressions(yaml.safe_load(path.read_text())))))
    for path in sorted(REPO.glob("roles/*/templates/*.j2")):
        out.append((path, ["".join(m.groups("")) for m in SPAN.finditer(path.read_text())]))
    return out


def unconverted(expression: str, top: set[str], sub: set[str]) -> list[str]:
    code = QUOTED.sub("''", expression)  # names inside messages are text
    found = []
    for name in top:
        for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\b", code):
            if not re.match(AS_BOOL, code[m.end() :]):
                found.append(name)
    for name in sub:
        for m in re.finditer(rf"\.{re.escape(name)}\b", code):
            if not re.match(AS_BOOL, code[m.end() :]):
                found.append(f"item.{name}")
    return found


def test_the_scan_sees_a_bare_boolean_and_passes_a_converted_one():
    top, sub = {"ofed_required"}, {"rdma"}
    assert unconverted("not ofed_required", top, sub) == ["ofed_required"]
    assert unconverted("[] if ofed_required else ['x']", top, sub) == ["ofed_required"]
    assert unconverted("item.rdma | default(false)", top, sub) == ["item.rdma"]
    assert unconverted("not ofed_required | bool", top, sub) == []
    assert unconverted("item.rdma | default(false) | bool", top, sub) == []
    assert unconverted("'ofed_required is true'", top, sub) == []  # a message's text
    assert list(expressions({"when": ["a", "b"], "msg": "x {{ c }} y", "name": "d"})) == [
        "a", "b", " c "]  # fmt: skip


def test_every_boolean_option_is_read_through_the_bool_filter():
    top, sub = boolean_options()
    assert {"ofed_mlnx_update_firmware", "nfs_server_rdma", "isilon_readonly"} <= top
    assert "rdma" in sub  # nfs_client's mounts
    bare = [
        f"{path.relative_to(REPO)}: {name} in {expr.strip()[:90]!r}"
        for path, exprs in sources()
        for expr in exprs
        for name in unconverted(expr, top, sub)
    ]
    assert not bare, "\n".join(bare)


# The text forms on real roles, on localhost in check mode.


@pytest.mark.parametrize("required", ["false", "False", "no", "0"])
def test_ipoib_required_given_as_text_false_skips_without_the_device(
    run_playbook, tmp_path, required
):
    run = run_playbook(
        apply_role("ipoib"), inventory(), {"ipoib_required": required, **no_ipoib(tmp_path)}
    )
    assert run.rc == 0, run.failed_tasks()
    assert [m for m in messages(run) if m.startswith("SKIP:")], messages(run)


@pytest.mark.parametrize("required", ["true", "yes"])
def test_ipoib_required_given_as_text_true_fails_naming_the_setting(
    run_playbook, tmp_path, required
):
    run = run_playbook(
        apply_role("ipoib"), inventory(), {"ipoib_required": required, **no_ipoib(tmp_path)}
    )
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "ipoib_required is true" in message, message


def test_text_false_turns_off_what_the_roles_own_variables_derive_from_it(run_playbook):
    # Each role's vars/main.yml as the role sees it, given 'false' as text.
    roles = REPO / "roles"
    show = {"isilon": "{{ __isilon_options }}", "ofed": "{{ __ofed_mlnx_installer }}"}
    play = {
        "name": "Derived variables",
        "hosts": "localhost",
        "gather_facts": False,
        "vars_files": [str(roles / "isilon/vars/main.yml"), str(roles / "ofed/vars/Debian.yml")],
        "vars": {
            "isilon_mount_options": ["vers=3"],
            "isilon_readonly": "false",
            "ofed_mlnx_update_firmware": "false",
        },
        "tasks": [{"name": "Show", "ansible.builtin.debug": {"msg": show}}],
    }
    run = run_playbook([play], {"all": {"hosts": {"localhost": LOCAL}}})
    assert run.rc == 0, run.failed_tasks()
    [shown] = [res["msg"] for name, _, res in run.task_results() if name == "Show"]
    assert "ro" not in shown["isilon"], shown  # not remounted read-only
    assert "--without-fw-update" in shown["ofed"], shown  # no firmware flashed
