"""containers.podman's podman connection with Ansible's pipelining, for the molecule scenarios.

The collection's plugin runs every module as five `podman exec`s (the home directory, a
temporary directory, chmod, the module, rm): `has_pipelining` is off there because its
`podman exec` never attaches stdin. With `-i` when Ansible sends data, a module is piped into
the container's Python in one `podman exec`, as pipelining does over SSH on a real cluster
(ansible.cfg's `pipelining = True`). Modules that transfer files (copy, template) still make a
temporary directory; put_file and fetch_file are the collection's. Chosen for every scenario by
.config/molecule/config.yml (connection_options, ANSIBLE_PIPELINING).
"""

from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.containers.podman.plugins.connection import podman

# The collection's options (podman_executable, podman_extra_args, remote_user), under this name.
DOCUMENTATION = podman.DOCUMENTATION.replace("name: podman", "name: podman_pipelined", 1)


class Connection(podman.Connection):
    """A podman exec connection that can pipeline modules through stdin."""

    transport = "podman_pipelined"
    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if not self._connected:
            self._connect()
        args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            args += ["--user", self.user]
        argv = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        return self._podman(args, argv, in_data)
