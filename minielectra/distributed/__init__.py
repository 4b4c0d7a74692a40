"""Data-parallel pre-training: torchrun + DistributedDataParallel (:mod:`.ddp`)."""
