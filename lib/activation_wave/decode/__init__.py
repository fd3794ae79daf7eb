"""Speculative decoding: the loop, its kernels, offline replay, baselines, timing and the cost model."""
