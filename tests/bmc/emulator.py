"""One node's BMC for the tests: sushy-tools' Redfish emulator, over HTTPS with basic auth.

    python emulator.py NAME PORT CERT KEY HTPASSWD [--bios JSON] [--also OTHER] [--fake]

libvirt backend (default): the system is a domain of libvirt's built-in test driver
(test:///default, in this process, no daemon), named NAME, running, whose BIOS starts with the
attributes of --bios (a 14th-generation PowerEdge's factory settings in the tests); --also adds
a second system OTHER with the same BIOS (a BMC that manages several). Each domain's UUID, the
Id of its Redfish system, is system_id(its name). Power,
reboot, boot override and BIOS attributes go through sushy's libvirt driver as they would for a
QEMU guest. The test driver keeps its state only while a connection is open, so this process
holds one for its lifetime. It has no volume upload, so virtual media needs the other backend:

--fake: sushy's fake driver (one system NAME, powered off), which has no BIOS but takes virtual
media: it downloads the image from the URL it is given, as a BMC does.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path
from xml.sax.saxutils import quoteattr

SUSHY_NS = "http://openstack.org/xmlns/libvirt/sushy"


# The Id of the fake backend's one system.
FAKE_SYSTEM_ID = "8e8f1e7c-1f6f-4c54-9a7d-6b7f0d1c0a01"


def system_id(name: str) -> str:
    """The UUID of the domain NAME: sushy's Id of its Redfish system."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.bmc.test"))


def domain_xml(name: str, bios: dict[str, str]) -> str:
    attributes = "".join(
        f"<sushy:attribute name={quoteattr(k)} value={quoteattr(str(v))}/>"
        for k, v in sorted(bios.items())
    )
    return f"""<domain type='test'>
  <name>{name}</name>
  <uuid>{system_id(name)}</uuid>
  <memory unit='GiB'>8</memory>
  <vcpu>4</vcpu>
  <metadata><sushy:bios xmlns:sushy='{SUSHY_NS}'><sushy:attributes>{attributes}</sushy:attributes>
  </sushy:bios></metadata>
  <os><type arch='x86_64'>hvm</type><boot dev='hd'/></os>
  <devices>
    <disk type='file' device='disk'>
      <source file='/dev/null'/><target dev='vda' bus='virtio'/>
    </disk>
    <interface type='network'><source network='default'/></interface>
  </devices>
</domain>"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("port", type=int)
    parser.add_argument("cert")
    parser.add_argument("key")
    parser.add_argument("htpasswd")
    parser.add_argument("--bios", default="{}", help="initial BIOS attributes (JSON object)")
    parser.add_argument("--also", help="a second system's name (libvirt backend)")
    parser.add_argument("--fake", action="store_true")
    args = parser.parse_args()

    from sushy_tools.emulator import main as emulator

    config = Path(tempfile.gettempdir()) / "emulator.conf"
    settings = {"SUSHY_EMULATOR_AUTH_FILE": args.htpasswd}
    backend = ["--fake"]
    if args.fake:
        settings["SUSHY_EMULATOR_FAKE_SYSTEMS"] = [
            {
                "uuid": FAKE_SYSTEM_ID,
                "name": args.name,
                "power_state": "Off",
                "nics": [],
            }
        ]
    else:
        import libvirt

        conn = libvirt.open("test:///default")  # held open: the driver's state lives with it
        for domain in conn.listAllDomains():
            if domain.isActive():
                domain.destroy()
            domain.undefine()
        for name in filter(None, (args.name, args.also)):
            conn.defineXML(domain_xml(name, json.loads(args.bios))).create()
        main.conn = conn
        backend = ["--libvirt-uri", "test:///default"]
    config.write_text("".join(f"{k} = {v!r}\n" for k, v in settings.items()))

    sys.argv = [
        "sushy-emulator",
        "--config",
        str(config),
        "-i",
        "127.0.0.1",
        "-p",
        str(args.port),
        "--ssl-certificate",
        args.cert,
        "--ssl-key",
        args.key,
        *backend,
    ]
    return emulator.main()


if __name__ == "__main__":
    sys.exit(main())
