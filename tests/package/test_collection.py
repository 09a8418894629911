"""The dlperf.cluster collection: what the tarball holds, a play outside the checkout that calls
its modules, filters and a role by FQCN from an installed copy, and ansible-test sanity."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from tests.package.conftest import BIN, REPO, clean_env, version

SANITY_TESTS = [
    "action-plugin-docs",
    "ansible-doc",
    "compile",
    "empty-init",
    "import",
    "line-endings",
    "no-assert",
    "no-get-exception",
    "no-illegal-filenames",
    "no-smart-quotes",
    "pep8",
    "pylint",
    "replace-urlopen",
    "runtime-metadata",
    "shebang",
    "symlinks",
    "use-argspec-type-path",
    "use-compat-six",
    "validate-modules",
    "yamllint",
]


def test_one_version_for_the_wheel_the_collection_and_the_changelog():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert galaxy["version"] == version()
    assert re.search(r"^## (\S+)", changelog, re.M).group(1) == version()


def test_the_tarball_holds_the_roles_plugins_and_nothing_of_the_checkout(collection_tarball):
    with tarfile.open(collection_tarball) as tar:
        names = set(tar.getnames())
    roles = {p.name for p in (REPO / "roles").iterdir() if p.is_dir()}
    assert {f"roles/{r}/tasks/main.yml" for r in roles} <= names
    assert {
        "meta/runtime.yml",
        "plugins/modules/gpu_facts.py",
        "plugins/modules/ib_facts.py",
        "plugins/modules/dlperf_job.py",
        "plugins/module_utils/dlperf_gpu.py",
        "plugins/filter/table.py",
        "README.md",
        "MANIFEST.json",
    } <= names
    shipped = ("plugins/modules", "plugins/module_utils", "plugins/filter", "plugins/README.md")
    outside = {
        ".venv",
        ".git",
        "benchmark",
        "collections",
        "molecule",
        "tests",
        "results",
        "inventory",
        "scripts",
        "docs",
        "playbooks",
    }
    leaked = {n for n in names if n.split("/")[0] in outside}
    leaked |= {n for n in names if n.startswith("plugins/") and not n.startswith(shipped)}
    assert not (leaked - {"plugins"}), sorted(leaked)[:10]


def test_an_installed_copy_runs_modules_filters_and_a_role_by_fqcn(installed_collection, tmp_path):
    sysfs = tmp_path / "sysfs"  # an rxe device captured in a VM (tests/fixtures/rxe)
    with tarfile.open(REPO / "tests/fixtures/rxe/sysfs.tar.gz") as tar:
        tar.extractall(sysfs, filter="data")
    play = [
        {
            "name": "Use dlperf.cluster from a site's own playbook",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "RDMA devices",
                    "register": "ib",
                    "dlperf.cluster.ib_facts": {"sysfs_root": str(sysfs)},
                },
                {  # a node without a driver, whatever this machine has
                    "name": "GPUs",
                    "register": "gpu",
                    "dlperf.cluster.gpu_facts": {"nvidia_smi": str(tmp_path / "no-nvidia-smi")},
                },
                {
                    "name": "A host list",
                    "ansible.builtin.set_fact": {
                        "hostlist": "{{ ['localhost']"
                        " | dlperf.cluster.dlperf_hostlist(hostvars, default_slots=4) }}"
                    },
                },
                {"name": "A role", "ansible.builtin.include_role": {"name": "dlperf.cluster.bmc"}},
                {
                    "name": "Report",
                    "ansible.builtin.debug": {
                        "msg": "{{ {'ib': ib.ib_present, 'gpu': gpu.gpu_present,"
                        " 'hosts': hostlist} }}"
                    },
                },
            ],
        }
    ]
    (tmp_path / "site.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp_path / "ansible.cfg").write_text(
        f"[defaults]\nstdout_callback = ansible.posix.json\ninterpreter_python = {sys.executable}\n"
    )
    env = clean_env() | {
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(installed_collection),
    }
    proc = subprocess.run(
        [BIN / "ansible-playbook", "-i", "localhost,", "-c", "local", "site.yml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = {
        t["task"]["name"]: t["hosts"]["localhost"]
        for t in json.loads(proc.stdout)["plays"][0]["tasks"]
    }
    assert results["Report"]["msg"] == {"ib": True, "gpu": False, "hosts": "localhost:4"}
    said = [r.get("msg", "") for r in results.values()]
    assert any("NO BMC: localhost has no bmc_address" in str(m) for m in said), said


def test_every_filter_and_module_has_its_own_documentation(installed_collection):
    """ansible-doc of each plugin of the installed copy describes that plugin (a file holding
    two filters documents them in YAML files of their names, not in its own DOCUMENTATION)."""
    import importlib.util

    filters = []
    for path in sorted((REPO / "plugins" / "filter").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"filter_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        filters += module.FilterModule().filters()
    modules = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))
    env = dict(clean_env(), ANSIBLE_COLLECTIONS_PATH=str(installed_collection))
    for kind, names in (("filter", filters), ("module", modules)):
        proc = subprocess.run(
            [BIN / "ansible-doc", "--json", "-t", kind, *(f"dlperf.cluster.{n}" for n in names)],
            capture_output=True, text=True, env=env, cwd=installed_collection,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        docs = json.loads(proc.stdout)
        assert sorted(docs) == sorted(f"dlperf.cluster.{n}" for n in names), proc.stderr
        for fqcn, doc in docs.items():
            name = doc["doc"].get("name") or doc["doc"].get("module")
            assert name == fqcn.rsplit(".", 1)[1], (fqcn, doc["doc"].get("short_description"))
            assert doc["examples"] and doc["return"], fqcn


def test_ansible_test_sanity_passes(installed_collection, tmp_path):
    """ansible-test makes one venv per sanity test and seeds pip in each from a bootstrap script
    it downloads from its own CI file server, not from a package index. A stand-in for that
    script (pip from the interpreter's ensurepip, then the requested pip from the index) is put
    where ansible-test caches it, under a HOME of its own in .cache/ (its venvs stay there)."""
    home = REPO / ".cache" / "ansible-test-home"
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    for pip_version in ("24_2",):
        (cache / f"get_pip_{pip_version}.py").write_text(
            "import subprocess, sys\n"
            "subprocess.check_call([sys.executable, '-m', 'ensurepip'],"
            " stdout=subprocess.DEVNULL)\n"
            "args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]\n"
            "subprocess.check_call([sys.executable, '-m', 'pip', 'install', '-q', *args])\n"
        )
    root = Path(installed_collection) / "ansible_collections" / "dlperf" / "cluster"
    tests = [arg for name in SANITY_TESTS for arg in ("--test", name)]
    env = dict(clean_env(), HOME=str(home), PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"))
    proc = subprocess.run(
        [BIN / "ansible-test", "sanity", "--local", "--python", "3.11", *tests],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.stdout.count('Running sanity test "') == len(SANITY_TESTS)
