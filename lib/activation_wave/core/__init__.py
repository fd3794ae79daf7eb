"""Shared plumbing every stage uses: config, the layer-index convention, statistics, results files, progress."""
