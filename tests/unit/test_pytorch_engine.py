"""The PyTorch engine's parts: architecture, launcher environments, sharding, RecordIO reading."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dlperf.data.recordio import RecordFile, write_records
from dlperf.train.architecture import parameter_count
from dlperf.train.pytorch.data import RecordData, RecordDataset, ShardSampler, classes_in
from dlperf.train.pytorch.dist import LaunchError, placement
from dlperf.train.pytorch.model import Bottleneck, build_model, decay_groups
from dlperf_module_utils.dlperf_job import launch_command, rendezvous_environment
from PIL import Image


def trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize(
    ("name", "count"),
    # The published counts of ResNet-50 and ResNet-18 with 1000 classes.
    [("resnet50_v1.5", 25_557_032), ("resnet18_v1.5", 11_689_512)],
)
def test_models_have_the_published_parameter_counts(name, count):
    assert trainable(build_model(name, 1000, 1.0)) == count


@pytest.mark.parametrize(
    ("name", "classes", "width"),
    [
        ("resnet50_v1.5", 1000, 1.0),
        ("resnet18_v1.5", 10, 0.125),
        ("resnet34_v1.5", 7, 0.3),
        ("resnet101_v1.5", 100, 0.25),
        ("resnet50_v1.5", 10, 0.05),
    ],
)
def test_the_framework_free_parameter_count_is_the_engines(name, classes, width):
    # what `dlperf model` takes as the gradients one allreduce moves
    assert parameter_count(name, classes, width) == trainable(build_model(name, classes, width))


def test_downsampling_bottleneck_strides_on_the_3x3_convolution():
    block = Bottleneck(256, 512, stride=2, downsample=True)
    convs = [m for m in block.body if isinstance(m, torch.nn.Conv2d)]
    assert [c.stride for c in convs] == [(1, 1), (2, 2), (1, 1)]
    assert [c.kernel_size for c in convs] == [(1, 1), (3, 3), (1, 1)]
    assert torch.all(block.body[-1].weight == 0)  # the branch starts as the identity


def test_weight_decay_skips_batch_norm_and_biases():
    model = build_model("resnet18_v1.5", 10, 0.25)
    decay, no_decay = decay_groups(model, 1e-4)
    assert decay["weight_decay"] == 1e-4 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim in (2, 4) for p in decay["params"])
    assert all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ("none", 0, 1, 0, 1, "127.0.0.1", 29500)),
        (
            {
                "RANK": "3",
                "WORLD_SIZE": "8",
                "LOCAL_RANK": "3",
                "LOCAL_WORLD_SIZE": "4",
                "MASTER_ADDR": "compute01",
                "MASTER_PORT": "29400",
            },
            ("torchrun", 3, 8, 3, 4, "compute01", 29400),
        ),
        (
            {
                "HOROVOD_RANK": "1",
                "HOROVOD_SIZE": "2",
                "HOROVOD_LOCAL_RANK": "1",
                "HOROVOD_LOCAL_SIZE": "2",
            },
            ("horovodrun", 1, 2, 1, 2, "127.0.0.1", 29500),
        ),
        (
            {
                "OMPI_COMM_WORLD_RANK": "5",
                "OMPI_COMM_WORLD_SIZE": "8",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                "MASTER_ADDR": "10.0.0.1",
            },
            ("mpirun", 5, 8, 1, 4, "10.0.0.1", 29500),
        ),
        (
            {
                "SLURM_PROCID": "6",
                "SLURM_NTASKS": "8",
                "SLURM_LOCALID": "2",
                "SLURM_NTASKS_PER_NODE": "4(x2)",
                "MASTER_ADDR": "compute01",
            },
            ("srun", 6, 8, 2, 4, "compute01", 29500),
        ),
    ],
)
def test_placement_is_read_from_each_launchers_environment(env, expected):
    p = placement(env)
    assert (p.launcher, p.rank, p.size, p.local_rank, p.local_size) == expected[:5]
    assert (p.master_addr, p.master_port) == expected[5:]


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"RANK": "0", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "4"}, "MASTER_ADDR is not set"),
        ({"RANK": "4", "WORLD_SIZE": "4"}, "rank 4 outside a world of 4"),
        ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK='x': not an integer"),
        ({"MASTER_PORT": "http"}, "MASTER_PORT='http': not an integer"),
    ],
)
def test_unusable_launcher_environments_are_refused_naming_the_variable(env, needle):
    with pytest.raises(LaunchError, match=needle.replace("(", r"\(")):
        placement(env)


@pytest.mark.parametrize(("n", "world"), [(1438, 3), (100, 4), (10, 4), (96, 3)])
def test_every_rank_takes_the_same_steps_and_validation_counts_every_image_once(n, world):
    batch = 8
    train = [ShardSampler(n, batch, r, world, True, seed=1) for r in range(world)]
    assert len({len(s) for s in train}) == 1 and len({s.steps for s in train}) == 1
    assert len(train[0]) == train[0].steps * batch
    drawn = [i for s in train for i, _, _ in s]
    assert len(set(drawn)) == min(n, len(drawn))  # no image twice in an epoch unless n < need
    val = [ShardSampler(n, batch, r, world, False, seed=1) for r in range(world)]
    assert len({len(s) for s in val}) == 1
    valid = sorted(i for s in val for i, ok, _ in s if ok)
    assert valid == list(range(n))


def test_the_training_order_changes_every_epoch_and_repeats_with_the_seed():
    a, b = ShardSampler(64, 4, 0, 2, True, seed=7), ShardSampler(64, 4, 0, 2, True, seed=7)
    first = list(a)
    assert first == list(b)
    a.epoch += 1
    assert list(a) != first


def test_records_written_without_mxnet_read_back_with_their_labels(tmp_path):
    images = [(Image.new("RGB", (20 + i, 16), (10 * i, 0, 0)), i % 3) for i in range(7)]
    path = tmp_path / "set.rec"
    assert write_records(path, images) == 7
    records = RecordFile(path)
    assert len(records) == 7
    assert [records.label(i) for i in range(7)] == [i % 3 for i in range(7)]
    assert classes_in(path) == 3
    data = RecordDataset(path, image_size=12, train=False, seed=0)
    image, label, valid = data[(4, True, 0)]
    assert image.shape == (12, 12, 3) and image.dtype == torch.uint8
    assert label == 1 and valid is True
    assert abs(int(image[6, 6, 0]) - 40) <= 2  # the pixel colour survives JPEG
    train = RecordDataset(path, image_size=12, train=True, seed=0)
    assert train[(4, True, 0)][0].shape == (12, 12, 3)


def test_loader_workers_live_across_epochs_and_each_epoch_crops_anew(tmp_path):
    """The DataLoader's workers are kept between epochs (no fork per epoch), and the epoch still
    reaches them with every item: one record, drawn a batch at a time, is cropped differently
    in the second epoch than in the first."""
    path = tmp_path / "one.rec"
    rng = np.random.default_rng(0)
    write_records(path, [(Image.fromarray(rng.integers(0, 255, (48, 64, 3), np.uint8)), 0)])
    data = RecordData(path, 4, 16, True, 0, 1, 2, 0, torch.device("cpu"), torch.contiguous_format)
    first = [x.clone() for x, _, _ in data]
    workers = data.loader._iterator._workers
    second = [x.clone() for x, _, _ in data]
    assert data.loader._iterator._workers is workers  # the same processes served epoch 2
    assert all(w.is_alive() for w in workers)
    assert len(first) == len(second) == 1
    assert not torch.equal(first[0], second[0])


def test_a_record_file_without_its_index_is_refused(tmp_path):
    (tmp_path / "x.rec").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="no index beside"):
        RecordFile(tmp_path / "x.rec")


def test_rendezvous_is_rank_0s_host_and_the_launch_network():
    assert rendezvous_environment("compute01:4,compute02:4", "ib0") == {
        "MASTER_ADDR": "compute01",
        "MASTER_PORT": "29500",
        "GLOO_SOCKET_IFNAME": "ib0",
        "NCCL_SOCKET_IFNAME": "ib0",
    }
    assert rendezvous_environment("localhost:2", None, 4242) == {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "4242",
    }
    cmd = launch_command("mpirun", "a:1,b:1", None, ["--backend", "pytorch"])
    assert "MASTER_ADDR" in cmd and "MASTER_PORT" in cmd


@pytest.mark.parametrize(
    ("capability", "gpu", "dtype"),
    [((7, 0), "V100", "float16"), ((8, 0), "A100", "bfloat16"), ((9, 0), "H100", "bfloat16")],
)
def test_auto_precision_is_bf16_only_where_the_gpu_has_bf16_tensor_cores(
    monkeypatch, tmp_path, capability, gpu, dtype
):
    """--dtype auto on a GPU: bf16 from Ampere on; fp16 (with the scaler) on a V100, where
    torch.cuda.is_bf16_supported() says yes but bf16 is only emulated. The GPU's answer is
    stood in for: there is none here."""
    from dlperf.train.config import TrainConfig
    from dlperf.train.pytorch.engine import _dtype

    asked = []
    monkeypatch.setattr(
        torch.cuda, "get_device_capability", lambda d=None: asked.append(d) or capability
    )
    cfg = TrainConfig(output=tmp_path, backend="pytorch")
    assert _dtype(cfg, torch.device("cuda", 1)) == dtype, gpu
    assert asked == [torch.device("cuda", 1)]  # the rank's own GPU
    assert _dtype(cfg, torch.device("cpu")) == "float32"
    assert _dtype(TrainConfig(output=tmp_path, dtype="float16"), torch.device("cuda", 1)) == (
        "float16"
    )


def test_a_gpu_the_torch_build_has_no_code_for_is_refused(monkeypatch, tmp_path):
    """A CUDA 13 build of torch on a V100 (compute capability 7.0): torch only warns, then fails
    at the first kernel; the engine refuses before anything runs, naming GPU and build. The
    GPU's answers are stood in for: there is none here."""
    from dlperf.train.config import TrainConfig
    from dlperf.train.pytorch.comm import select_device
    from dlperf.usage import UsageError

    cuda = torch.cuda
    monkeypatch.setattr(cuda, "device_count", lambda: 4)
    monkeypatch.setattr(cuda, "get_device_capability", lambda d=None: (7, 0))
    monkeypatch.setattr(cuda, "get_device_name", lambda d=None: "Tesla V100-SXM2-32GB")
    monkeypatch.setattr(cuda, "get_arch_list", lambda: ["sm_75", "sm_80", "sm_90", "sm_120"])
    selected = []
    monkeypatch.setattr(cuda, "set_device", selected.append)
    cfg = TrainConfig(output=tmp_path, backend="pytorch", device="gpu")
    with pytest.raises(UsageError) as refused:
        select_device(cfg.device, local_rank=1)
    message = str(refused.value)
    assert "Tesla V100-SXM2-32GB, compute capability 7.0" in message
    assert "sm_75 sm_80 sm_90 sm_120" in message and "--backend mxnet" in message
    assert selected == []  # refused before the GPU was taken
    # the same node with a build that has Volta's code takes the rank's GPU
    monkeypatch.setattr(cuda, "get_arch_list", lambda: ["sm_70", "sm_80", "sm_90"])
    assert select_device(cfg.device, local_rank=5) == torch.device("cuda", 1)
    assert selected == [torch.device("cuda", 1)]


def test_a_cuda_build_that_sees_no_gpu_names_its_cuda_and_the_driver(monkeypatch):
    """A torch built for CUDA 13.0 under an R570 driver (CUDA 12.8) sees no GPU: the refusal
    names the build's CUDA and the driver, not 'a CPU build'. The build is stood in for."""
    from dlperf.train.pytorch.comm import select_device
    from dlperf.usage import UsageError

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with pytest.raises(UsageError) as refused:
        select_device("gpu", local_rank=0)
    message = str(refused.value)
    assert f"torch {torch.__version__} is built for CUDA 13.0" in message, message
    assert "nvidia-smi's 'CUDA Version' at least that" in message and "CPU build" not in message
    assert select_device("auto", local_rank=0) == torch.device("cpu")
