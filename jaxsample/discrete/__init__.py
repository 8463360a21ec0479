"""Samplers for uniform-noise discrete diffusion and flow models."""
