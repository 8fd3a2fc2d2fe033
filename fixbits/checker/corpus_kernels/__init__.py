"""Kernels the checker's soundness gate compiles besides the enforcement corpus (imports triton)."""
