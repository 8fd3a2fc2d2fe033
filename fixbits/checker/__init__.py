"""Static bitwise-equivalence checker (paper §6): PTX and AMDGCN -> dependence trees -> signature.

Layout (only ``api`` is needed by callers; nothing here imports torch or triton at import time):

* ``api``        ``signature(text)``, ``compare(a, b)``, ``certified_equal(a, b)``
* ``forms``      exact integer forms of addresses (polynomials over launch symbols, opaque tokens)
* ``node``       hash-consed tree nodes, commutative canonical form, roots
* ``walk``       ISA-independent walk: control flow, loop summaries, shared-memory exchanges
* ``ptx/``, ``gcn/``  readers and transfer functions of each instruction set
* ``balanced``   collapse of a proven balanced tree to (combine, leaf, height, start)
* ``signature``  roots in the output's own coordinates, per-output and per-kernel digests
* ``explain``    where two kernels' trees part, in words
* ``cli``        ``fixbits check A B``
* ``compile``    ahead-of-time compilation with the JIT's own specialisation (imports triton)
* ``prune``      ``EquivalencePrune``: Triton autotuner ``early_config_prune``
* ``soundness``, ``partition``  the soundness gate's config spaces and partition arithmetic
* ``corpus_kernels/``  GEMM variants and flash-attention forward compiled by the gate

Soundness first: anything not modelled becomes an opaque node keyed on its own text (it can split
a class, never merge two); control flow the walk cannot follow falls back to the kernel's text.
"""
