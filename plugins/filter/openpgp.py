# GNU General Public License v3.0+ compatible; part of dlperf-cluster.
"""OpenPGP key material -> the fingerprints of its primary keys (RFC 4880 v4, RFC 9580 v6)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: dlperf_openpgp_fingerprints
short_description: Fingerprints of the primary keys in OpenPGP key material
description:
  - Reads public keys as C(ansible.builtin.slurp) returns a file (base64 of a binary key or
    keyring, or of armored text with one or more blocks) and returns each primary key's
    fingerprint, upper-case hexadecimal without spaces, as C(gpg --with-colons) prints it in
    its C(fpr) records.
  - Version 4 keys (SHA-1 fingerprint, 40 digits) and version 6 keys (SHA-256, 64 digits).
    Subkeys are not listed. Signatures are not checked; this names the keys, it does not
    verify them.
options:
  _input:
    description: Base64 of the key material (C(slurp)'s C(content), or C(text | b64encode)).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check the repository key before apt trusts it
  ansible.builtin.assert:
    that: >-
      'EB693B3035CD5710E231E123A4B469963BF863CC' in (key.content | dlperf_openpgp_fingerprints)
"""

RETURN = r"""
_value:
  description: The primary keys' fingerprints, in the order they appear.
  type: list
  elements: str
"""

PUBLIC_KEY = 6  # packet tag; subkeys (14) are not listed


def _dearmor(text: str) -> bytes:
    """The data of every armored block in the text, one after the other (a file may hold
    several, and apt reads them all)."""
    data, body, state = b"", [], "outside"
    for line in text.split("\n"):  # not splitlines(): it also splits inside header values
        line = line.strip()
        if state == "outside":
            if line.startswith("-----BEGIN PGP"):
                state, body = "headers", []
            continue
        if line.startswith("-----END PGP"):
            data += base64.b64decode("".join(body), validate=True)
            state = "outside"
        elif state == "headers" and (not line or re.match(r"^[\x21-\x39\x3b-\x7e]+:( |$)", line)):
            state = "headers" if line else "body"  # "Key: value" lines, then an empty line
        elif not re.fullmatch(r"=[A-Za-z0-9+/]{4}", line):  # the CRC-24 line
            state = "body"  # also where a writer left out the empty line after no headers
            body.append(line)
    if state != "outside":
        raise ValueError("an armored block without its END line")
    if not data:
        raise ValueError("no armored block")
    return data


def _packets(data: bytes):
    """(tag, body) of each packet."""
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise ValueError(f"no packet header at byte {pos}")
        if head & 0x40:  # new format
            tag, pos = head & 0x3F, pos + 1
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 1 : pos + 5], "big"), pos + 5
            else:
                raise ValueError("partial body lengths do not occur in keys")
        else:  # old format
            tag, kind, pos = (head >> 2) & 0x0F, head & 0x03, pos + 1
            if kind == 3:
                raise ValueError("indeterminate lengths do not occur in keys")
            size = (1, 2, 4)[kind]
            length, pos = int.from_bytes(data[pos : pos + size], "big"), pos + size
        if pos + length > len(data):
            raise ValueError("a packet runs past the end of the data")
        yield tag, data[pos : pos + length]
        pos += length


def openpgp_fingerprints(content: str) -> list[str]:
    try:
        raw = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError, TypeError) as err:
        raise AnsibleFilterError(
            f"dlperf_openpgp_fingerprints: input is not base64: {err}"
        ) from err
    try:
        # binary key material starts with a packet header (bit 7 set); text is armor, whatever
        # comes before its first BEGIN line (a byte-order mark, a note)
        armored = raw.startswith(b"\xef\xbb\xbf") or (bool(raw) and not raw[0] & 0x80)
        data = _dearmor(raw.decode("utf-8-sig")) if armored else raw
        found = []
        for tag, body in _packets(data):
            if tag != PUBLIC_KEY or not body:
                continue
            if body[0] == 4:
                digest = hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body)
            elif body[0] == 6:
                digest = hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body)
            else:
                continue  # v3 (MD5 fingerprints) and v5 keys: not used by apt repositories
            found.append(digest.hexdigest().upper())
    except (ValueError, IndexError, OverflowError, binascii.Error) as err:
        raise AnsibleFilterError(
            f"dlperf_openpgp_fingerprints: not OpenPGP key material: {err}"
        ) from err
    return found


class FilterModule:
    def filters(self):
        return {"dlperf_openpgp_fingerprints": openpgp_fingerprints}
