"""CPU dry runs: make Triton 3.6's interpreter index with numpy >= 2 scalars.

The interpreter keeps kernel scalars as 1-element arrays and converts them with ``int()``,
which numpy 2 refuses for arrays of shape (1,). ``patch()`` swaps that one conversion; it is
called only by test helpers and dry runs under TRITON_INTERPRET=1, never at import.
"""

from __future__ import annotations


def patch() -> None:
    import triton.runtime.interpreter as ip

    if getattr(ip, "_fixbits_index_patch", False):
        return
    orig = ip._patch_lang_tensor

    def patched(tensor, scope):  # type: ignore[no-untyped-def]
        orig(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    ip._patch_lang_tensor = patched
    ip._fixbits_index_patch = True
