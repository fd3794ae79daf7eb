"""Measuring layers: matrix entropy, CKA, token filtering, streaming statistics."""
