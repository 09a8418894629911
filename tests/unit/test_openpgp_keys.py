"""OpenPGP keys: dlperf_openpgp_fingerprints, run through Ansible, against GnuPG's own
fingerprints of a key it generates and of Debian's archive keyring; and the cuda role's check of
its repository signing key with it (its block, read from the role, run against a file:// URL)."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from .test_hostlist_filter import LOCAL, render

ROLES = Path(__file__).resolve().parents[2] / "roles"
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


def gpg(home: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(
        ["gpg", "--batch", "--homedir", str(home), *args],
        input=data,
        capture_output=True,
        check=True,
    ).stdout


def primary_fingerprints(home: Path, key: bytes) -> list[str]:
    """GnuPG's answer: the first fpr record after each pub record."""
    out = gpg(home, "--with-colons", "--show-keys", data=key).decode().splitlines()
    found, after_pub = [], False
    for line in out:
        kind = line.split(":", 1)[0]
        if kind == "pub":
            after_pub = True
        elif kind == "fpr" and after_pub:
            found.append(line.split(":")[9])
            after_pub = False
    return found


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict:
    """Two keys GnuPG generates: the one a test names, and another (a mirror's own, say)."""
    made = {}
    for who in ("named", "other"):
        home = tmp_path_factory.mktemp("gnupg")
        os.chmod(home, 0o700)
        gpg(home, "--passphrase", "", "--quick-gen-key", f"{who} <t@example.invalid>", "ed25519")
        made[who] = {"armored": gpg(home, "--armor", "--export"), "binary": gpg(home, "--export")}
    made["home"] = home
    made["armored"], made["binary"] = made["named"]["armored"], made["named"]["binary"]
    return made


# RFC 9580's sample version 6 certificate (appendix A.3): its primary key packet's body
# (Ed25519, created 2022-11-30) and the fingerprint the RFC gives for it.
RFC9580_V6_BODY = "BmOHf+MbAAAAIPlNp7tI1gph5WdwamWH0DMZmbudiRoIJC6thFQ9+JWj"
RFC9580_V6_FINGERPRINT = "CB186C4F0609A697E4D52DFA6C722B0C1F1E27C18A56708F6525EC27BAD9ACC9"


def new_format(data: bytes, lengths: str) -> bytes:
    """Old-format packets (as GnuPG and Debian's keyring write them) written again with
    new-format headers: one- and two-octet lengths where they fit ("short"), or five-octet
    lengths throughout ("long")."""
    out, pos = b"", 0
    while pos < len(data):
        head = data[pos]
        assert head & 0xC0 == 0x80, "an old-format packet"
        size = (1, 2, 4)[head & 0x03]
        length = int.from_bytes(data[pos + 1 : pos + 1 + size], "big")
        body = data[pos + 1 + size : pos + 1 + size + length]
        if lengths == "long":
            encoded = b"\xff" + length.to_bytes(4, "big")
        elif length < 192:
            encoded = bytes([length])
        else:
            encoded = bytes([((length - 192) >> 8) + 192, (length - 192) & 0xFF])
        out += bytes([0xC0 | ((head >> 2) & 0x0F)]) + encoded + body
        pos += 1 + size + length
    return out


def fingerprints(run_playbook, *materials: bytes) -> tuple[int, list]:
    values = ", ".join(f"'{base64.b64encode(m).decode()}'" for m in materials)
    return render(
        run_playbook,
        f"{{{{ [{values}] | map('dlperf.cluster.dlperf_openpgp_fingerprints') | list }}}}",
        {},
    )


def test_fingerprints_are_gnupgs(run_playbook, keys):
    debian = DEBIAN_KEYRING.read_bytes()
    rc, found = fingerprints(run_playbook, keys["armored"], keys["binary"], debian)
    assert rc == 0, found
    generated = primary_fingerprints(keys["home"], keys["binary"])
    assert len(generated) == 1 and len(generated[0]) == 40
    assert found[0] == generated and found[1] == generated
    # a keyring of several keys: every primary key, in order, and no subkey
    expected = primary_fingerprints(keys["home"], debian)
    assert len(expected) > 1 and found[2] == expected


def test_every_header_and_armor_form_gives_the_same_fingerprints(run_playbook, keys):
    debian = DEBIAN_KEYRING.read_bytes()
    expected = primary_fingerprints(keys["home"], debian)
    v6 = base64.b64decode(RFC9580_V6_BODY)
    named, other = keys["named"]["armored"].decode(), keys["other"]["armored"].decode()
    armor_lines = named.splitlines()
    # no empty line after the BEGIN line (no headers); headers in UTF-8 and empty, and a note and
    # a byte-order mark before the armor
    assert armor_lines[1] == "", armor_lines[:2]
    bare = "\n".join([armor_lines[0], *armor_lines[2:]]).encode()
    note = ["\ufeffNVIDIA's key, as served", armor_lines[0], "Comment: clé du dépôt", "Comment:"]
    utf8 = "\n".join([*note, *armor_lines[1:]]).encode()
    rc, found = fingerprints(
        run_playbook,
        new_format(debian, "short"),
        new_format(debian, "long"),
        bytes([0xC6, len(v6)]) + v6,
        bare,
        utf8,
        (named + other).encode(),  # two armored blocks in one file
    )
    assert rc == 0, found
    assert found[0] == expected and found[1] == expected
    assert found[2] == [RFC9580_V6_FINGERPRINT]
    [first] = primary_fingerprints(keys["home"], keys["named"]["binary"])
    [second] = primary_fingerprints(keys["home"], keys["other"]["binary"])
    assert found[3] == [first] and found[4] == [first]
    assert found[5] == [first, second]


@pytest.mark.parametrize(
    ("material", "message"),
    [
        (
            b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64 at all\n",
            "not OpenPGP key material",
        ),
        (b"<html>404 Not Found</html>", "not OpenPGP key material: no armored block"),
    ],
)
def test_what_is_not_a_key_is_named(run_playbook, material, message):
    rc, msg = fingerprints(run_playbook, material)
    assert rc != 0
    assert message in str(msg)


def key_block() -> dict:
    """The cuda role's signing-key block (fetch, read, check, and its rescue), from the role."""
    import yaml

    main = yaml.safe_load((ROLES / "cuda/tasks/main.yml").read_text())
    [source] = [t for t in main if t.get("name") == "The package source"]
    [block] = [t for t in source["block"] if t.get("name") == "The repository's signing key"]
    if os.geteuid() != 0:  # ownership is not what these tests are about
        for task in block["block"]:
            for module in task.values():
                if isinstance(module, dict):
                    module.pop("owner", None)
                    module.pop("group", None)
    return block


def check_key(run_playbook, tmp_path, key: str, fingerprint: str, check: bool = False):
    keyring = tmp_path / "keyrings" / "dlperf-cuda.asc"
    keyring.parent.mkdir(exist_ok=True)
    inline = not key.startswith("file://")
    plays = [
        {
            "name": "The cuda role's signing key",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "cuda_source": "nvidia",
                "cuda_repo_key": key,
                "cuda_repo_key_fingerprint": fingerprint,
                "__cuda_keyring": key if inline else str(keyring),
            },
            "tasks": [key_block()],
        }
    ]
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, {}, check=check)
    return run, keyring


@pytest.fixture
def served(tmp_path, keys) -> tuple[str, str]:
    """The generated key at a file:// URL, and its fingerprint as GnuPG gives it."""
    (tmp_path / "3bf863cc.pub").write_bytes(keys["armored"])
    [fingerprint] = primary_fingerprints(keys["home"], keys["binary"])
    return f"file://{tmp_path}/3bf863cc.pub", fingerprint


def test_the_cuda_role_trusts_a_fetched_key_with_the_named_fingerprint(
    run_playbook, tmp_path, served
):
    url, fingerprint = served
    # spaced and lower-case, as people copy it
    spaced = " ".join(fingerprint[i : i + 4] for i in range(0, 40, 4)).lower()
    run, keyring = check_key(run_playbook, tmp_path, url, spaced)
    assert run.rc == 0, run.failed_tasks()
    assert keyring.read_bytes() == (tmp_path / "3bf863cc.pub").read_bytes()


def test_the_cuda_role_removes_a_fetched_key_of_another_fingerprint(run_playbook, tmp_path, served):
    url, fingerprint = served
    nvidia = "EB693B3035CD5710E231E123A4B469963BF863CC"
    run, keyring = check_key(run_playbook, tmp_path, url, nvidia)
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()[-1:]
    assert message == (
        f"The signing key {url} holds {fingerprint}, not {nvidia} alone "
        "(cuda_repo_key_fingerprint): "
        "apt is not given it. For a mirror signed with its own key, set cuda_repo_key_fingerprint "
        "to that key's; serve a file that holds that key alone."
    )
    assert not keyring.exists()  # fetched again, and checked again, by the next run
    # no check asked for: the key is taken as it is
    run, keyring = check_key(run_playbook, tmp_path, url, "")
    assert run.rc == 0 and keyring.exists()


def test_the_cuda_role_checks_a_key_given_inline(run_playbook, tmp_path, served, keys):
    _url, fingerprint = served
    armored = keys["armored"].decode()
    assert check_key(run_playbook, tmp_path, armored, fingerprint)[0].rc == 0
    run, _ = check_key(run_playbook, tmp_path, armored, "0" * 40)
    assert run.rc != 0
    assert f"The signing key (given inline) holds {fingerprint}, not {'0' * 40}" in str(
        run.failed_tasks()
    )


def test_the_cuda_role_refuses_the_named_key_with_another_beside_it(run_playbook, tmp_path, keys):
    # apt would trust both: a mirror serving NVIDIA's key and its own passes no check
    (tmp_path / "3bf863cc.pub").write_bytes(keys["named"]["armored"] + keys["other"]["armored"])
    [named] = primary_fingerprints(keys["home"], keys["named"]["binary"])
    [other] = primary_fingerprints(keys["home"], keys["other"]["binary"])
    run, keyring = check_key(run_playbook, tmp_path, f"file://{tmp_path}/3bf863cc.pub", named)
    assert run.rc != 0
    assert f"holds {named}, {other}, not {named} alone" in run.failed_tasks()[-1][1]
    assert not keyring.exists()


def test_the_cuda_role_stops_on_a_key_path_that_is_not_there(run_playbook, tmp_path, served):
    _url, fingerprint = served
    missing = str(tmp_path / "no-such-key.gpg")
    plays = [
        {
            "name": "A key path on the target",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "cuda_source": "mirror",
                "cuda_repo_key": missing,
                "cuda_repo_key_fingerprint": fingerprint,
                "__cuda_keyring": missing,
            },
            "tasks": [key_block()],
        }
    ]
    inventory = {"all": {"hosts": {"localhost": LOCAL}}}
    run = run_playbook(plays, inventory, {}, check=False)
    assert run.rc != 0
    assert f"File not found: {missing}" in run.failed_tasks()[-1][1]
    # a check run of a new host has not fetched NVIDIA's key yet: nothing to check, no failure
    url, _ = served
    run, keyring = check_key(run_playbook, tmp_path, url, fingerprint, check=True)
    assert run.rc == 0, run.failed_tasks()
    assert not keyring.exists()
