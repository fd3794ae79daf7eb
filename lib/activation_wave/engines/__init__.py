"""Serving engines: what each reads from a drafter and captures, and llama.cpp as an optional engine."""
