"""cuBLASLt from Python: library discovery (lib), the binding (lt), the GemmBackend (backend) and
launch profiling with the kernel-family classifier (profile). Nothing here imports torch at import."""
