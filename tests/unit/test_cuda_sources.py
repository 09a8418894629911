"""The cuda role's apt source file (templates/cuda.sources.j2) as each source writes it: NVIDIA's
repository, with Debian's contrib section beside it where the host's sources lack it (NVIDIA's
driver packages depend on nvidia-modprobe and glx-alternative-nvidia from there), or Debian's
own sections. Rendered by Ansible's template lookup against this host's facts."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .test_role_input_validation import LOCAL

TEMPLATE = Path(__file__).resolve().parents[2] / "roles/cuda/templates/cuda.sources.j2"
MIRROR = "http://deb.debian.org/debian"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"


RENDER = f"{{{{ lookup('ansible.builtin.template', '{TEMPLATE}') }}}}"


def rendered(run_playbook, **settings) -> str:
    plays = [
        {
            "name": "Render the source file",
            "hosts": "localhost",
            "gather_facts": True,
            "vars": {"cuda_version": "12.9", "__cuda_keyring": "/etc/apt/keyrings/dlperf-cuda.asc",
                     "__cuda_debian_uri": MIRROR, **settings},
            "tasks": [{"name": "Render", "ansible.builtin.debug": {"msg": RENDER}}],
        }
    ]  # fmt: skip
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, check=False)
    assert run.rc == 0, run.failed_tasks()
    return next(result for name, _, result in run.task_results() if name == "Render")["msg"]


def stanzas(run_playbook, **settings) -> list[dict[str, str]]:
    text = rendered(run_playbook, **settings)
    blocks = [b for b in text.split("\n\n") if "Types:" in b]
    return [
        dict(line.split(": ", 1) for line in b.splitlines() if line and not line.startswith("#"))
        for b in blocks
    ]


@pytest.mark.parametrize("source", ["nvidia", "mirror"])
def test_nvidia_packages_get_debians_contrib_where_the_host_lacks_it(run_playbook, source):
    nvidia, contrib = stanzas(
        run_playbook, cuda_source=source, __cuda_repo_uri=NVIDIA, __cuda_add_contrib=True
    )
    assert nvidia["URIs"] == NVIDIA and nvidia["Suites"] == "/" and "Components" not in nvidia
    assert nvidia["Signed-By"] == "/etc/apt/keyrings/dlperf-cuda.asc"
    assert contrib["URIs"] == MIRROR and contrib["Components"] == "contrib"
    assert contrib["Suites"] == "bookworm"  # this host's release (Debian 12)
    assert contrib["Signed-By"] == "/usr/share/keyrings/debian-archive-keyring.gpg"
    assert contrib["PDiffs"] == "no"  # marks it as the role's (vars/main.yml)


def test_a_host_whose_sources_have_contrib_gets_nvidias_repository_alone(run_playbook):
    (nvidia,) = stanzas(
        run_playbook, cuda_source="nvidia", __cuda_repo_uri=NVIDIA, __cuda_add_contrib=False
    )
    assert nvidia["URIs"] == NVIDIA


def test_debians_own_cuda_comes_from_its_sections(run_playbook):
    (debian,) = stanzas(
        run_playbook, cuda_source="debian", __cuda_repo_uri=MIRROR, __cuda_add_contrib=False
    )
    assert debian["Components"] == "contrib non-free non-free-firmware"
    assert debian["Suites"] == "bookworm"


VARS = Path(__file__).resolve().parents[2] / "roles/cuda/vars/main.yml"


def host_has_contrib(run_playbook, lines: list[str]) -> bool:
    plays = [
        {
            "name": "Decide",
            "hosts": "localhost",
            "gather_facts": True,
            "vars": {"cuda_apt_sites": {"stdout_lines": lines}},
            "tasks": [
                {"name": "Load", "ansible.builtin.include_vars": str(VARS)},
                {
                    "name": "Decide",
                    "ansible.builtin.debug": {"msg": "{{ __cuda_host_has_contrib }}"},
                },
            ],
        }
    ]
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, check=False)
    assert run.rc == 0, run.failed_tasks()
    return next(result for name, _, result in run.task_results() if name == "Decide")["msg"]


def test_the_roles_own_contrib_stanza_is_not_taken_for_the_hosts(run_playbook):
    # `apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT) $(PDIFFS)'` as apt 2.6
    # prints it: after the first run the role's stanza (PDiffs: no) serves contrib; the next
    # run must still see a host without contrib of its own, or it drops the stanza and the
    # file flips on every run.
    main = "http://deb.debian.org/debian bookworm main yes"
    ours = "http://deb.debian.org/debian bookworm contrib no"
    theirs = "http://deb.debian.org/debian bookworm contrib yes"
    security = "http://deb.debian.org/debian-security bookworm-security contrib yes"
    assert host_has_contrib(run_playbook, [main]) is False  # first run
    assert host_has_contrib(run_playbook, [main, ours]) is False  # every run after it
    assert host_has_contrib(run_playbook, [main, theirs]) is True
    assert host_has_contrib(run_playbook, [main, security]) is False  # another suite's


ARMORED = """-----BEGIN PGP PUBLIC KEY BLOCK-----
Comment: a site's own repository key

mQINBGJYmlEBEADRpBJ6cRRjQwC0Y7p4oB5vZm3UEm1YYP3nxIZb5KNKQ4dYWbQk
=Ab1c
-----END PGP PUBLIC KEY BLOCK-----
"""


def apt_reads(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    """apt's own parse of TEXT as the only source file."""
    parts = tmp_path / "parts"
    parts.mkdir(exist_ok=True)
    (parts / "dlperf-cuda.sources").write_text(text)
    return subprocess.run(
        ["apt-get", "-o", f"Dir::Etc::SourceParts={parts}", "-o",
         f"Dir::Etc::SourceList={tmp_path / 'none.list'}", "indextargets"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_an_armored_key_given_inline_is_a_field_apt_reads(run_playbook, tmp_path):
    text = rendered(run_playbook, cuda_source="mirror", __cuda_repo_uri=NVIDIA,
                    __cuda_add_contrib=False, __cuda_keyring=ARMORED)  # fmt: skip
    assert "Signed-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n" in text
    assert "\n .\n mQINB" in text  # the empty line after the armor headers
    read = apt_reads(tmp_path, text)
    assert read.returncode == 0 and "E:" not in read.stderr, read.stderr
    # the key written as it was given (unindented) is what apt refuses: the check can fail
    broken = text.replace("Signed-By:\n", "Signed-By: ").replace("\n ", "\n")
    assert apt_reads(tmp_path, broken).returncode != 0
