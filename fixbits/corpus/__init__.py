"""A corpus of Triton reduction kernels, one module per kernel, for the enforcement suite.

Each module holds plain @triton.jit kernels (constexpr BLOCK sizes, ``tl.sum`` left as users
write it), a host ``launch(inputs, shape, cfg, pinned, aux)``, ``make_inputs`` and ``reference``
(the CPU tree model of the outputs it can reproduce). ``pinned=True`` runs the kernel through the
automatic rewrite (fixbits.enforce.inner_tree), so the corpus tests the rewrite on unmodified
code. The registry (fixbits.corpus.registry) reads matrices/enforcement/corpus.yaml. Importing
this package does not import triton; the kernel modules do.
"""

from __future__ import annotations
