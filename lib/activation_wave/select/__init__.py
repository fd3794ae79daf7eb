"""Choosing layers: selection rules, their stability, the probe, the report of `wave select`."""
