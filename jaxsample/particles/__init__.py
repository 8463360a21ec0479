"""Interacting-particle samplers (ETD, MM-SOLD and their baselines)."""
