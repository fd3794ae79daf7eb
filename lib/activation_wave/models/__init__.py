"""Targets and their data: loading models, prompts and responses, the hidden-state capture cache, the draft model."""
