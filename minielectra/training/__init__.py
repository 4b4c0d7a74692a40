"""Layer 4, pre-training: device and precision, the official optimiser, one step without host
syncs, checkpoints and resume, held-out evaluation, the loop (lesson 5)."""
