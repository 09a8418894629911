"""The dl_stack role's GPU build of Horovod looks for what it compiles with and against (nvcc,
NCCL's header) before it makes anything, and names what is missing: Horovod's own CMake would
stop deep inside pip's output. Real ansible-playbook runs of the role's horovod.yml in check
mode on this machine, the paths it looks at pointed at a tree of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_role_input_validation import LOCAL

INVENTORY = {"all": {"hosts": {"localhost": LOCAL}}}
REFUSE = "dl_stack : Refuse a GPU build without nvcc or NCCL"


def gpu_build(run_playbook, tmp_path: Path, have: set[str], cuda_home: bool = False):
    """horovod.yml for the gpu flavor, with nvcc and NCCL's header in HAVE put in place; the
    toolkit found where the role looks (CUDA_HOME: where HOROVOD_CUDA_HOME says)."""
    root = tmp_path / "host"
    nvcc, nccl = root / "cuda/bin/nvcc", root / "nccl"
    for name, path in (("nvcc", nvcc), ("nccl", nccl / "include/nccl.h")):
        if name in have:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    plays = [
        {
            "name": "Build Horovod for the GPU nodes",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Build",
                    "ansible.builtin.include_role": {
                        "name": "dl_stack",
                        "tasks_from": "horovod.yml",
                    },
                }
            ],
        }
    ]
    env = {"HOROVOD_NCCL_HOME": str(nccl)}
    extra = {"__dl_stack_build_flavor": "gpu", "dl_stack_horovod_build_env": env}
    if cuda_home:
        env["HOROVOD_CUDA_HOME"] = str(nvcc.parents[1])
    else:
        extra["__dl_stack_nvcc_paths"] = [str(nvcc)]
    run = run_playbook(plays, INVENTORY, extra)
    results = {name: res for name, _, res in run.task_results()}
    return run, results, nvcc, nccl


@pytest.mark.parametrize(
    ("have", "lacks"),
    [
        (set(), "the CUDA toolkit (nvcc in {nvcc}) and NCCL (nccl.h in {nccl}/include)"),
        ({"nvcc"}, "NCCL (nccl.h in {nccl}/include)"),  # Debian's CUDA: no NCCL
    ],
    ids=["neither", "no-nccl"],
)
def test_a_gpu_build_without_nvcc_or_nccl_is_refused_naming_what_it_lacks(
    run_playbook, tmp_path, have, lacks
):
    run, results, nvcc, nccl = gpu_build(run_playbook, tmp_path, have)
    assert run.rc != 0
    [(name, message)] = run.failed_tasks()
    assert name == REFUSE, name
    assert f"lacks {lacks.format(nvcc=nvcc, nccl=nccl)}:" in message, message
    assert "HOROVOD_NCCL_HOME" in message
    assert list(results)[-1] == REFUSE  # nothing made for the build before it


def test_a_gpu_build_with_both_goes_on_to_build(run_playbook, tmp_path):
    # the toolkit where the site's HOROVOD_CUDA_HOME says, NCCL where its HOROVOD_NCCL_HOME does
    _run, results, _nvcc, _nccl = gpu_build(run_playbook, tmp_path, {"nvcc", "nccl"}, True)
    assert not results[REFUSE].get("failed"), results[REFUSE]
    assert "dl_stack : Create the Horovod directory of the wheelhouse (gpu)" in results
