"""The written-out bad role inputs: (id, role, variables, text the refusal must contain).

test_role_input_validation runs them, together with a wrong type for every option of every
role's argument specs.
"""

from __future__ import annotations

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
        "world-export-as-a-netmask",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=["0.0.0.0/0.0.0.0"])]},
        "(everyone)",
    ),
    (
        "world-export-ipv6",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=["0::/0"])]},
        "nfs_server_allow_world_exports",
    ),
    (
        "export-beyond-the-cluster-subnets",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients=["198.18.0.0/24", "8.8.0.0/16"])]},
        "'8.8.0.0/16', which lies outside cluster_subnets (198.18.0.0/24)",
    ),
    (
        "anonuid-0-without-opt-in",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, options=["rw", "all_squash", "anonuid=0"])]},
        "nfs_server_allow_no_root_squash",
    ),
    (
        # exportfs reads 00 as 0: root all the same
        "anongid-00-without-opt-in",
        "nfs_server",
        {"nfs_server_exports": [dict(GOOD_EXPORT, options=["rw", "all_squash", "anongid=00"])]},
        "nfs_server_allow_no_root_squash",
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
    (
        "isilon-mount-options-with-suid",
        "isilon",
        {"isilon_smartconnect_zone": "nas.example", "isilon_mount_options": ["suid", "nodev"]},
        "needs nodev and nosuid, and neither dev nor suid",
    ),
    (
        "isilon-mount-options-without-nodev",
        "isilon",
        {"isilon_smartconnect_zone": "nas.example", "isilon_mount_options": ["nosuid", "hard"]},
        "needs nodev and nosuid",
    ),
    (
        "nfs-client-defaults-without-nosuid",
        "nfs_client",
        {"nfs_client_mounts": [GOOD_MOUNT], "nfs_client_default_options": ["nodev", "hard"]},
        "nfs_client_allow_dev_suid",
    ),
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
        "ofed-module-list-as-a-string",
        "ofed",
        {"ofed_modules": {"infiniband": "mlx5_ib"}},
        "ofed_modules has no valid module list for ofed_fabric=infiniband",
    ),
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
    # unquoted 8001: YAML's decimal number 8001 (0x1f41), not the P_Key 0x8001
    (
        "ipoib-pkey-decimal-digits",
        "ipoib",
        {"ipoib_pkey": 8001},
        'as a number it reads as decimal, 0x1f41: quote it as hex text (e.g. "0x8001")',
    ),
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
    (
        "cuda-key-fingerprint-short",
        "cuda",
        {"cuda_repo_key_fingerprint": "3BF863CC"},
        "cuda_repo_key_fingerprint of 40 or 64 hexadecimal digits (now '3BF863CC')",
    ),
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
        "dl-stack-build-env-bad-name",
        "dl_stack",
        {"dl_stack_horovod_build_env": {"CCACHE DIR": "/var/cache/ccache"}},
        "must map environment variable names",
    ),
    (
        "dl-stack-build-env-list-value",
        "dl_stack",
        {"dl_stack_horovod_build_env": {"MAKEFLAGS": ["-j2"]}},
        "must map environment variable names",
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
        # without the default partition's rule every other port is a limited member there
        "opensm-partitions-without-the-default",
        "opensm",
        {"opensm_enabled": True, "opensm_partitions": [{"name": "storage", "pkey": "0x8001"}]},
        "the default partition (0x7fff) must be among them",
    ),
    (
        # 0x8001 and 0x0001 are one partition to OpenSM (the low 15 bits)
        "opensm-partitions-one-pkey-twice",
        "opensm",
        {
            "opensm_enabled": True,
            "opensm_partitions": [
                {"name": "Default", "pkey": "0x7fff"},
                {"name": "a", "pkey": "0x8001"},
                {"name": "b", "pkey": "0x0001"},
            ],
        },
        "must differ in their low 15 bits",
    ),
    (
        # an unquoted 0x8001 in YAML is the number 32769: refused, asking for it quoted
        "opensm-partition-pkey-a-number",
        "opensm",
        {
            "opensm_enabled": True,
            "opensm_partitions": [
                {"name": "Default", "pkey": "0x7fff"},
                {"name": "storage", "pkey": 32769},
            ],
        },
        "a P_Key in hex, quoted",
    ),
    (
        "opensm-partition-mtu-not-an-ib-mtu",
        "opensm",
        {
            "opensm_enabled": True,
            "opensm_partitions": [dict({"name": "Default", "pkey": "0x7fff"}, mtu=4092)],
        },
        "an mtu of 256, 512, 1024, 2048, 4096",
    ),
    (
        "opensm-partition-name-with-a-colon",
        "opensm",
        {
            "opensm_enabled": True,
            "opensm_partitions": [dict({"name": "Default", "pkey": "0x7fff"}, name="Default:x")],
        },
        "opensm_partitions:",
    ),
    (
        "opensm-partition-members-end-the-rule",
        "opensm",
        {
            "opensm_enabled": True,
            "opensm_partitions": [
                dict({"name": "Default", "pkey": "0x7fff"}, members="ALL=full ; Evil=0x1 : ALL")
            ],
        },
        "without ':', ';' or '#'",
    ),
    (
        # the role locks the benchmark user's password and rewrites its authorized_keys
        "bench-user-is-the-ansible-login",
        "common",
        {"common_bench_user": "admin", "ansible_user": "admin"},
        "is the account Ansible logs in to localhost as (ansible_user)",
    ),
    (
        "password-logins-off-under-a-password-login",
        "common",
        {"ansible_password": "not-shown-0451", "common_ssh_password_authentication": False},
        "Ansible logs in to localhost with a password (ansible_password)",
    ),
    (
        "bench-user-root",
        "common",
        {"common_bench_user": "root", "common_bench_uid": 0},
        "common_bench_user=root",
    ),
    ("unknown-chrony-mode", "common", {"common_chrony_mode": "peer"}, "common_chrony_mode"),
    (
        "time-server-without-networks",
        "common",
        {"common_chrony_mode": "server", "common_cluster_subnets": []},
        "chrony would answer no node",
    ),
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
    (
        "slurm-extra-config-value-of-two-lines",
        "slurm",
        {"slurm_extra_config": {"MaxJobCount": "100\nSlurmUser=root"}},
        "its values one line each",
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
