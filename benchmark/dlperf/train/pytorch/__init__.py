"""The PyTorch engine (DistributedDataParallel on NCCL or Gloo)."""
