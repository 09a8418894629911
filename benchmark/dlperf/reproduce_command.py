"""`dlperf reproduce` on the command line: its flags, their checks, and `-e` taken as
ansible-playbook takes it. The phases themselves are dlperf.reproduce."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from dlperf.reproduce import ReproduceConfig, ReproduceError, check


def role_booleans(project: Path) -> set[str]:
    """The roles' options of type bool (their meta/argument_specs.yml)."""
    names: set[str] = set()
    for spec in sorted(project.glob("roles/*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(spec.read_text()) or {}).get("argument_specs", {}).values():
            names |= {k for k, v in (entry.get("options") or {}).items() if v.get("type") == "bool"}
    return names


def parse_extra_vars(items: list[str], booleans: frozenset[str] | set[str] = frozenset()) -> dict:
    """-e 'KEY=VALUE KEY2="A B"', -e @FILE (YAML or JSON mapping) or -e '{"KEY": ...}' (JSON),
    merged left to right as ansible-playbook does. KEY=VALUE values stay strings, as there,
    except for the BOOLEANS (the roles' bool options): `cuda_required=false` as a string would
    be true in the roles' expressions, and ansible-core refuses it in their conditions."""
    from ansible.module_utils.parsing.convert_bool import boolean

    merged: dict = {}
    for item in items:
        if item.startswith("@"):
            path = Path(item[1:])
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as exc:
                raise ReproduceError(f"--extra-vars {item}: cannot read it ({exc})") from None
            if not isinstance(data, dict):
                raise ReproduceError(f"--extra-vars {item}: not a mapping of variables")
            merged.update(data)
            continue
        if item.lstrip().startswith(("{", "[")):  # JSON, or YAML flow style, as Ansible takes
            try:
                data = yaml.safe_load(item)
            except yaml.YAMLError as exc:
                raise ReproduceError(f"--extra-vars {item!r}: not JSON or YAML ({exc})") from None
            if not isinstance(data, dict):
                raise ReproduceError(f"--extra-vars {item!r}: not a mapping of variables")
            merged.update(data)
            continue
        # KEY=VALUE pairs split and unquoted by Ansible's own parser (values stay strings)
        from ansible.errors import AnsibleError
        from ansible.parsing.splitter import parse_kv

        try:
            pairs = parse_kv(item)
        except AnsibleError as exc:  # an unclosed quote
            raise ReproduceError(f"--extra-vars {item!r}: {exc.message}") from None
        if not pairs or "_raw_params" in pairs or not all(k.isidentifier() for k in pairs):
            raise ReproduceError(f"--extra-vars {item!r}: give KEY=VALUE or @FILE")
        for key in pairs.keys() & booleans:
            try:
                pairs[key] = boolean(pairs[key], strict=True)
            except TypeError:
                raise ReproduceError(
                    f"--extra-vars {key}={pairs[key]}: {key} is a boolean (true or false)"
                ) from None
        merged.update(pairs)
    return merged


def config_from_args(args) -> ReproduceConfig:
    """The checked configuration of `dlperf reproduce` (ReproduceError names a bad value)."""
    project = args.project.resolve()
    cfg = ReproduceConfig(
        project=project,
        inventory=args.inventory,
        run_id=args.run_id or time.strftime("%Y%m%d-%H%M%S"),
        results=args.results if args.results.is_absolute() else project / args.results,
        deploy=not args.no_deploy,
        extra_vars=parse_extra_vars(args.extra_vars, role_booleans(project)),
    )
    check(cfg)
    return cfg


def add_parser(sub) -> None:
    """`dlperf reproduce`'s flags (the CLI's subcommand)."""
    p = sub.add_parser(
        "reproduce",
        help="deploy, validate, sweep and report in one command (the virtual cluster by default)",
        description="Runs the repository's playbooks through ansible-runner: virtual cluster up "
        "(inventory/virtual only), site.yml, validate.yml, benchmark.yml (sweep, fetch, report).",
    )
    p.add_argument(
        "--inventory",
        type=Path,
        default=Path("inventory/virtual"),
        help="inventory, relative to --project (inventory/reference: the seed's cluster)",
    )
    p.add_argument("--project", type=Path, default=Path("."), help="the dlperf-cluster repository")
    p.add_argument("--results", type=Path, default=Path("results"), help="results root")
    p.add_argument(
        "--run-id", default=None, help="run id (default: a timestamp); reuse it to resume"
    )
    p.add_argument(
        "--no-deploy", action="store_true", help="skip site.yml (the cluster is deployed already)"
    )
    p.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="KEY=VALUE|@FILE",
        help="variables for every playbook, as ansible-playbook -e takes them (repeatable), "
        "e.g. the rollout knobs: -e dlperf_serial_base=2",
    )
    p.add_argument("--quiet", action="store_true", help="plain lines instead of a live display")
