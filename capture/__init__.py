"""Decode rounds captured into CUDA graphs, and every node counted (next issue)."""
