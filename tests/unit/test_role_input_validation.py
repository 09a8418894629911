"""Bad role input fails before any change, with a message that names the variable.

Each case applies a real role to localhost in check mode (so a validation bug can never
touch the test machine) and proves three things: the role fails, the failing task is a
validation step (argument_specs or the role's validate.yml), and no task before it would
have changed anything.

The cases of one role run as the plays of one ansible-playbook process (one process per case
spent most of the unit tier's time starting Ansible): each play includes the role with the
case's variables in a block whose rescue lets the next play run, and each case is judged on
its own play's tasks. A role's cases go to one xdist worker (xdist_group), which runs them once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ..conftest import run_ansible_playbook

REPO = Path(__file__).resolve().parents[2]

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}


def inventory(cluster_ip="198.18.0.10"):
    host = dict(LOCAL, cluster_ip=cluster_ip) if cluster_ip else dict(LOCAL)
    return {
        "all": {
            "vars": {"cluster_subnets": ["198.18.0.0/24"]},
            "children": {
                "cluster": {"children": {"head": {"hosts": {"localhost": host}}}},
                "compute": {"hosts": {}},
            },
        }
    }


def apply_role(role: str) -> list:
    return [
        {
            "name": f"Apply {role} with bad input",
            "hosts": "localhost",
            "gather_facts": True,
            "gather_subset": ["min"],
            "roles": [{"role": role}],
        }
    ]


GOOD_EXPORT = {"path": "/srv/nfs/shared", "clients": ["198.18.0.0/24"]}
GOOD_MOUNT = {"src": "head01:/srv/nfs/shared", "path": "/shared"}

CASES = [
    # (id, role, extra vars, text the message must contain)
    (
        "malformed-cidr",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=["198.18.0.0/33"])]},
        "198.18.0.0/33",
    ),
    (
        "world-export-without-opt-in",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=["*"])]},
        "nfs_server_allow_world_exports",
    ),
    (
        "relative-export-path",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, path="srv/nfs")]},
        "path 'srv/nfs'",
    ),
    (
        "empty-clients",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=[])]},
        "nfs_server_default_clients",
    ),
    (
        "no-root-squash-without-opt-in",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, options=["rw", "no_root_squash"])]},
        "nfs_server_allow_no_root_squash",
    ),
    (
        "comma-joined-export-options",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, options=["rw,sync"])]},
        "option 'rw,sync'",
    ),
    (
        "exports-not-a-list",
        "nfs_server",
        {"nfs_server_exports": {"path": "/srv"}},
        "nfs_server_exports",
    ),
    ("threads-not-a-number", "nfs_server", {"nfs_server_threads": "many"}, "nfs_server_threads"),
    (
        "unquoted-octal-mode",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, mode=493)]},
        "quoted octal string",
    ),
    (
        "mount-option-dev-without-opt-in",
        "nfs_client",
        {"nfs_client_mounts": [dict(GOOD_MOUNT, options=["dev"])]},
        "nfs_client_allow_dev_suid",
    ),
    (
        "mount-src-without-export-path",
        "nfs_client",
        {"nfs_client_mounts": [dict(GOOD_MOUNT, src="head01")]},
        "src 'head01'",
    ),
    (
        "mount-options-as-mapping",
        "nfs_client",
        {"nfs_client_mounts": [dict(GOOD_MOUNT, options={"rsize": 1048576})]},
        "options",
    ),
    (
        "unknown-nfs-version",
        "nfs_client",
        {"nfs_client_mounts": [dict(GOOD_MOUNT, version="5")]},
        "version",
    ),
    (
        "nconnect-out-of-range",
        "nfs_client",
        {"nfs_client_mounts": [dict(GOOD_MOUNT, nconnect=64)]},
        "nconnect 64",
    ),
    (
        "isilon-zone-and-ips",
        "isilon",
        {"isilon_smartconnect_zone": "nas.example", "isilon_node_ips": ["198.18.0.201"]},
        "isilon_smartconnect_zone",
    ),
    (
        "isilon-path-outside-ifs",
        "isilon",
        {"isilon_smartconnect_zone": "nas.example", "isilon_export_path": "/data"},
        "isilon_export_path '/data'",
    ),
    ("isilon-bad-address", "isilon", {"isilon_node_ips": ["198.18.0.300"]}, "198.18.0.300"),
    ("mlnx-ofed-without-bundle", "ofed", {"ofed_source": "mlnx_ofed"}, "ofed_mlnx_bundle"),
    (
        "mlnx-ofed-bundle-missing",
        "ofed",
        {
            "ofed_source": "mlnx_ofed",
            "ofed_mlnx_version": "5.8-3.0.7.0",
            "ofed_mlnx_bundle": "/nonexistent/MLNX_OFED_LINUX-5.8-3.0.7.0-debian12.1-x86_64.tgz",
        },
        "does not exist",
    ),
    (
        "mlnx-ofed-version-mismatch",
        "ofed",
        {
            "ofed_source": "mlnx_ofed",
            "ofed_mlnx_version": "23.10-1.1.9.0",
            "ofed_mlnx_bundle": "/etc/hostname",
        },
        "is not version 23.10-1.1.9.0",
    ),
    ("unknown-fabric", "ofed", {"ofed_fabric": "omnipath"}, "ofed_fabric"),
    (
        "bad-softroce-netdev",
        "ofed",
        {"ofed_fabric": "softroce", "ofed_softroce_netdev": "eth0; rm -rf /"},
        "ofed_softroce_netdev",
    ),
    (
        "ipoib-datagram-mtu-too-large",
        "ipoib",
        {"ipoib_mode": "datagram", "ipoib_mtu": 65520},
        "ipoib_mtu 65520 is not valid for ipoib_mode=datagram",
    ),
    ("ipoib-unknown-mode", "ipoib", {"ipoib_mode": "enhanced"}, "ipoib_mode"),
    (
        "cuda-version-not-in-nvidias-repo-for-this-release",
        "cuda",
        {"cuda_version": "11.8", "cuda_source": "nvidia"},
        "cuda_version 11.8 is not in NVIDIA's debian12 repository (pinned there: 12.9)",
    ),
    (
        "cuda-driver-branch-too-old",
        "cuda",
        {"cuda_driver_branch": "470"},
        "cuda_driver_branch '470' is not a driver branch that runs CUDA 12.9",
    ),
    (
        "cuda-driver-branch-not-a-branch",
        "cuda",
        {"cuda_driver_branch": "r580"},
        "cuda_driver_branch 'r580'",
    ),
    ("cuda-reboot-throttle-zero", "cuda", {"cuda_reboot_throttle": 0}, "cuda_reboot_throttle=0"),
    (
        "ipoib-datagram-mtu-over-the-partition",
        "ipoib",
        {"ipoib_mtu": 4092},
        "ipoib_mtu 4092 is not valid for ipoib_mode=datagram",
    ),
    ("ipoib-pkey-not-hex", "ipoib", {"ipoib_pkey": "8001g"}, "ipoib_pkey '8001g' is not a P"),
    ("ipoib-pkey-default-partition", "ipoib", {"ipoib_pkey": "0x7fff"}, "ipoib_pkey '0x7fff'"),
    ("ipoib-pkey-zero", "ipoib", {"ipoib_pkey": "0x8000"}, "ipoib_pkey '0x8000'"),
    ("ipoib-pkey-bool", "ipoib", {"ipoib_pkey": True}, "ipoib_pkey 'True' is not a P_Key"),
    ("ipoib-partition-mtu", "ipoib", {"ipoib_partition_mtu": 1500}, "ipoib_partition_mtu"),
    (
        "ipoib-pkey-child-name-too-long",
        "ipoib",
        {"ipoib_interface": "ibp59s0f0np0", "ipoib_pkey": "0x8001"},
        "ibp59s0f0np0.8001, longer than",
    ),
    ("ipoib-address-without-prefix", "ipoib", {"ipoib_address": "198.18.0.10"}, "ipoib_address"),
    ("ipoib-unknown-backend", "ipoib", {"ipoib_backend": "netplan"}, "ipoib_backend"),
    ("cuda-version-not-in-table", "cuda", {"cuda_version": "10.2"}, "cuda_version '10.2'"),
    (
        "cuda-cudnn-from-debian",
        "cuda",
        {"cuda_source": "debian"},
        "cuda_install_cudnn is true but cuda_source=debian",
    ),
    (
        "cuda-mirror-url-without-scheme",
        "cuda",
        {"cuda_source": "mirror", "cuda_repo_url": "mirror.cluster.local/cuda/"},
        "cuda_repo_url",
    ),
    ("cuda-unknown-source", "cuda", {"cuda_source": "conda"}, "cuda_source"),
    ("dl-stack-root-user", "dl_stack", {"dl_stack_user": "root"}, "dl_stack_user 'root'"),
    ("dl-stack-relative-venv", "dl_stack", {"dl_stack_venv": "venv"}, "dl_stack_venv 'venv'"),
    (
        "dl-stack-unknown-build-host",
        "dl_stack",
        {"dl_stack_build_host": "head99"},
        "dl_stack_build_host 'head99'",
    ),
    (
        "dl-stack-horovod-wheel-wrong-version",
        "dl_stack",
        {"dl_stack_horovod_wheel": "/etc/hostname"},
        "dl_stack_horovod_wheel '/etc/hostname'",
    ),
    ("dl-stack-unknown-flavor", "dl_stack", {"dl_stack_flavor": "rocm"}, "dl_stack_flavor"),
    (
        "dl-stack-relative-find-links",
        "dl_stack",
        {"dl_stack_pip_find_links": ["wheels"]},
        "dl_stack_pip_find_links ['wheels']",
    ),
    (
        "dl-stack-no-index-without-wheels",
        "dl_stack",
        {"dl_stack_pip_no_index": True},
        "dl_stack_pip_no_index needs",
    ),
    (
        "opensm-priority-out-of-range",
        "opensm",
        {"opensm_enabled": True, "opensm_priority": 16},
        "opensm_priority 16",
    ),
    (
        "opensm-port-not-a-guid",
        "opensm",
        {"opensm_enabled": True, "opensm_ports": ["mlx5_0"]},
        "opensm_ports",
    ),
    (
        "bench-user-root",
        "common",
        {"common_bench_user": "root", "common_bench_uid": 0},
        "common_bench_user=root",
    ),
    ("unknown-chrony-mode", "common", {"common_chrony_mode": "peer"}, "common_chrony_mode"),
    (
        "slurm-cluster-name-upper-case",
        "slurm",
        {"slurm_cluster_name": "DL"},
        "slurm_cluster_name 'DL'",
    ),
    (
        "slurm-max-time-not-a-time",
        "slurm",
        {"slurm_partition_max_time": "2 days"},
        "slurm_partition_max_time '2 days'",
    ),
    ("slurm-munge-key-too-short", "slurm", {"slurm_munge_key": "c2hvcnQ="}, "slurm_munge_key"),
    ("slurm-no-compute-nodes", "slurm", {}, "(slurm_compute_group) must exist and hold hosts"),
    (
        "slurm-extra-config-bad-key",
        "slurm",
        {"slurm_extra_config": {"Node Name": "x"}},
        "slurm_extra_config keys ['Node Name']",
    ),
    ("slurm-unknown-mpi", "slurm", {"slurm_mpi_default": "openmpi"}, "slurm_mpi_default"),
    (
        "slurm-accounting-without-password",
        "slurm",
        {"slurm_accounting": True},
        "slurm_accounting needs slurm_accounting_db_password",
    ),
    ("bmc-no-password", "bmc", {"bmc_address": "198.19.1.101"}, "a bmc_password (it is empty"),
    (
        "bmc-url-as-address",
        "bmc",
        {"bmc_address": "https://idrac-01", "bmc_password": "x"},
        "give bmc_address as host or host:port (now 'https://idrac-01')",
    ),
    (
        "bmc-virtual-media-without-url",
        "bmc",
        {"bmc_one_time_boot": "virtual_media"},
        "needs bmc_virtual_media_url",
    ),
    ("bmc-missing-ca", "bmc", {"bmc_ca_path": "/nonexistent/ca.pem"}, "'/nonexistent/ca.pem'"),
]


def is_validation_task(name: str) -> bool:
    name = name.split(" : ", 1)[-1]  # drop the "role : " prefix
    return name.startswith(("Validating arguments against arg spec", "Check ", "Refuse "))


def case_plays(role: str, cases: list[tuple[str, dict]]) -> list:
    """Facts once, then one play per (case id, variables): the role included with them."""
    plays = [{"name": "Facts", "hosts": "localhost", "gather_subset": ["min"], "tasks": []}]
    for case_id, variables in cases:
        block = [{"name": f"Apply {role}", "ansible.builtin.include_role": {"name": role}}]
        block[0]["vars"] = variables
        rescue = [{"name": "Go on to the next case", "ansible.builtin.meta": "noop"}]
        plays.append(
            {
                "name": case_id,
                "hosts": "localhost",
                "gather_facts": False,
                "tasks": [{"name": case_id, "block": block, "rescue": rescue}],
            }
        )
    return plays


@pytest.fixture(scope="session")
def role_cases(tmp_path_factory):
    """ROLE -> its cases' run, each role's cases run once (by the first test that asks)."""
    runs: dict = {}

    def run(role: str):
        if role not in runs:
            cases = [(c[0], c[2]) for c in CASES if c[1] == role]
            cases += [
                (f"{name}-wrong-type", {name: bad}) for r, name, bad in wrong_types() if r == role
            ]
            workdir = tmp_path_factory.mktemp(f"validate-{role}")
            runs[role] = run_ansible_playbook(workdir, case_plays(role, cases), inventory())
        return runs[role]

    return run


def judge(run, case_id: str, needle: str) -> None:
    """One case's play: exactly one failed task, a validation step whose message has NEEDLE,
    and no change before it."""
    play = run.play(case_id)
    failed = play.failed_tasks()
    assert len(failed) == 1, failed or f"{case_id}: the role accepted bad input"
    name, message = failed[0]
    assert is_validation_task(name), f"failed in a non-validation task: {name}"
    assert needle in message, message
    assert play.changed() == 0


@pytest.mark.parametrize(
    ("role", "case_id", "needle"),
    [pytest.param(c[1], c[0], c[3], id=c[0], marks=pytest.mark.xdist_group(c[1])) for c in CASES],
)
def test_bad_input_fails_before_any_change_naming_the_variable(role_cases, role, case_id, needle):
    judge(role_cases(role), case_id, needle)


def test_missing_cluster_address_is_named(run_playbook):
    run = run_playbook(apply_role("common"), inventory(cluster_ip=None), {})
    assert run.rc != 0
    ((name, message),) = run.failed_tasks()
    assert is_validation_task(name)
    assert "'cluster_ip'" in message and "localhost" in message


def test_opt_ins_let_world_export_and_no_root_squash_through_validation(run_playbook):
    extra = {
        "nfs_server_exports": [dict(GOOD_EXPORT, clients=["*"], options=["rw", "no_root_squash"])],
        "nfs_server_allow_world_exports": True,
        "nfs_server_allow_no_root_squash": True,
    }
    plays = apply_role("nfs_server")
    plays[0]["roles"] = []
    plays[0]["tasks"] = [
        {
            "name": "Run only the validation",
            "ansible.builtin.include_role": {"name": "nfs_server", "tasks_from": "validate"},
        }
    ]
    run = run_playbook(plays, inventory(), extra)
    assert run.rc == 0, run.failed_tasks()


# A value of the wrong type for every option of every role's meta/argument_specs.yml: argument
# validation, or for text options each role's first check (Ansible's validation turns a list or
# a mapping into text and lets the variable through unchanged), must refuse it, naming the
# variable, before the role does anything.
WRONG = {
    "bool": "maybe",
    "int": "many",
    "list": {"not": "a list"},
    "dict": "not a dict",
    "str": {"a": "mapping"},
    "path": ["a", "list"],
}


def wrong_types():
    """(role, option, a value of the wrong type) for every typed option of every role."""
    for spec in sorted((REPO / "roles").glob("*/meta/argument_specs.yml")):
        role = spec.parent.parent.name
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        for name, option in options.items():
            kind = option.get("type", "str")
            if "choices" in option:
                yield role, name, ["not-a-choice"] if kind == "list" else "not-a-choice"
            elif kind in WRONG:
                yield role, name, WRONG[kind]


def wrong_type_kind(role: str, name: str) -> str:
    spec = REPO / "roles" / role / "meta" / "argument_specs.yml"
    option = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"][name]
    return "choice" if "choices" in option else option.get("type", "str")


@pytest.mark.parametrize(
    ("role", "name"),
    [
        pytest.param(
            role,
            name,
            id=f"{name}-{wrong_type_kind(role, name)}",
            marks=pytest.mark.xdist_group(role),
        )
        for role, name, _ in wrong_types()
    ],
)
def test_a_wrong_type_for_any_typed_option_is_refused_naming_it(role_cases, role, name):
    judge(role_cases(role), f"{name}-wrong-type", name)


def test_there_are_at_least_eighty_bad_input_cases():
    assert len(CASES) + len(list(wrong_types())) >= 80
