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

from ansible_collections.containers.podman.plugins.connection import podman

# The collection's options (podman_executable, podman_extra_args, remote_user), under this name.
DOCUMENTATION = podman.DOCUMENTATION.replace("name: podman", "name: podman_pipelined", 1)


class Connection(podman.Connection):
    """The collection's connection, whose `podman exec` attaches stdin when Ansible pipes a
    module into it: everything else (exec_command, put_file, fetch_file) is the collection's."""

    transport = "podman_pipelined"
    has_pipelining = True

    def _podman(self, cmd, cmd_args=None, in_data=None, use_container_id=True):
        args = [cmd] if isinstance(cmd, str) else list(cmd)
        if in_data is not None and args[:1] == ["exec"]:
            cmd = ["exec", "-i", *args[1:]]
        return super()._podman(cmd, cmd_args, in_data, use_container_id)
