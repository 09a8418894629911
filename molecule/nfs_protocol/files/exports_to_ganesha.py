#!/usr/bin/env python3
"""Translate an exports(5) file into an nfs-ganesha configuration (test stand-in only).

Only the options the nfs_server role renders matter here: rw/ro become the client's
Access_Type, root_squash/no_root_squash/all_squash the client's Squash; sync, async and
no_subtree_check have no ganesha counterpart and are ignored. Every export denies access to
anyone not listed. Prints "changed" when it rewrote the target file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SQUASH = {"root_squash": "Root_Squash", "no_root_squash": "No_Root_Squash", "all_squash": "All"}


def parse_exports(text: str) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    exports = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        path, *specs = line.split()
        clients = []
        for spec in specs:
            match = re.fullmatch(r"([^()]+)\(([^)]*)\)", spec)
            if not match:
                raise SystemExit(f"unparsable client spec {spec!r} in line {raw!r}")
            clients.append((match.group(1), match.group(2).split(",")))
        exports.append((path, clients))
    return exports


def render(exports) -> str:
    out = ["NFS_CORE_PARAM { Protocols = 4; }", "NFSV4 { Graceless = true; }"]
    for export_id, (path, clients) in enumerate(exports, start=1):
        out += [
            "EXPORT {",
            f"  Export_Id = {export_id};",
            f"  Path = {path};",
            f"  Pseudo = {path};",
            "  Protocols = 4;",
            "  Transports = TCP;",
            "  SecType = sys;",
            "  Access_Type = None;",
            "  FSAL { Name = VFS; }",
        ]
        for client, options in clients:
            access = "RO" if "ro" in options else "RW"
            squash = next((SQUASH[o] for o in options if o in SQUASH), "Root_Squash")
            out += [
                "  CLIENT {",
                f"    Clients = {client};",
                f"    Access_Type = {access};",
                f"    Squash = {squash};",
                "  }",
            ]
        out.append("}")
    return "\n".join(out) + "\n"


def main(source: str, target: str) -> None:
    content = render(parse_exports(Path(source).read_text()))
    dest = Path(target)
    if dest.exists() and dest.read_text() == content:
        print("unchanged")
        return
    dest.write_text(content)
    print("changed")


if __name__ == "__main__":
    main(*sys.argv[1:3])
