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


def gpu_build(run_playbook, tmp_path: Path, have: set[str]):
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
    extra = {
        "__dl_stack_build_flavor": "gpu",
        "__dl_stack_nvcc_paths": [str(nvcc)],
        "dl_stack_horovod_build_env": {"HOROVOD_NCCL_HOME": str(nccl)},
    }
    run = run_playbook(plays, INVENTORY, extra)
    results = {name: res for name, _, res in run.task_results()}
    return run, results, nvcc, nccl


@pytest.mark.parametrize(
    ("have", "lacks"),
    [
        (set(), "the CUDA toolkit (nvcc in {nvcc}) and NCCL (its header {nccl}/include/nccl.h)"),
        ({"nvcc"}, "NCCL (its header {nccl}/include/nccl.h)"),  # Debian's CUDA: no NCCL
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
    _run, results, _nvcc, _nccl = gpu_build(run_playbook, tmp_path, {"nvcc", "nccl"})
    assert not results[REFUSE].get("failed"), results[REFUSE]
    assert "dl_stack : Create the Horovod directory of the wheelhouse (gpu)" in results
