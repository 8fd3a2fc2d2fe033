"""Source rewrite that pins the float sums of an unmodified @triton.jit kernel.

Why a source rewrite: Triton 3.6 offers no hook between a JITFunction and its AST codegen
(``knobs.runtime.add_stages_inspection_hook`` runs after the TTIR is built, and the TTIR
``tt.reduce`` carries no order attribute a pass could honour), and users run the Triton they
installed from PyPI. So the kernel's source is parsed, its float sums are replaced by
``tree_sum_like`` (same arguments, same result dtype as ``tl.sum``), and a new JITFunction is
built from the new source. The new function has its own cache key, so pinned and free binaries
never share a cache entry.

Pinned: ``tl.sum(x, ...)`` / ``triton.language.sum``, the tensor method ``x.sum(...)``, and
``tl.reduce(x, axis, f)`` where ``f`` is a @triton.jit function whose body is ``return a + b``;
also inside every non-Triton @triton.jit helper the kernel calls (rewritten the same way).
Left alone, by design: ``tl.max``/``tl.min``/argmax/argmin (they select one input and round
nothing: any order gives the same bits), integer sums (exact in any order; ``tree_sum_like``
hands them back to ``tl.sum``), ``tl.cumsum``/``associative_scan`` (a scan, not a tree),
``tl.reduce`` with any other combine (reported as left), and loops over chunks the kernel writes
itself (its own algorithm: a chunk loop that accumulates ``acc += x`` stays as written, only
the final ``tl.sum`` of ``acc`` is pinned).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import inspect
import linecache
import textwrap
import threading
from dataclasses import dataclass
from typing import Any

_LOCK = threading.RLock()
_PINNED: dict[int, tuple[Any, Any, PinReport]] = {}  # id(original) -> (original, pinned, report)
_MARK = "_fixbits_inner_tree"
_SUM = "__fixbits_tree_sum_like"


@dataclass(frozen=True)
class PinnedCall:
    """One reduction call site found in a kernel's source and what the rewrite did with it."""

    function: str
    line: int  # in the kernel's source file
    call: str
    action: str  # "pinned" or "left"
    reason: str


@dataclass(frozen=True)
class PinReport:
    """What ``pin`` did to one kernel (and the helpers it calls)."""

    function: str
    calls: tuple[PinnedCall, ...]

    @property
    def pinned(self) -> tuple[PinnedCall, ...]:
        return tuple(c for c in self.calls if c.action == "pinned")

    @property
    def left(self) -> tuple[PinnedCall, ...]:
        return tuple(c for c in self.calls if c.action == "left")


def _lang():
    import triton.language as tl

    return tl


def _is_jit(obj: Any) -> bool:
    from triton.runtime.jit import JITFunction

    if isinstance(obj, JITFunction):
        return True
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, InterpretedFunction)


def _resolve(node: ast.AST, scope: dict[str, Any]) -> Any:
    """Value of a Name / Attribute chain in ``scope``; None when it is not a global chain."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope)
        if base is None:
            return None
        return getattr(base, node.attr, None)
    return None


def _python_fn(obj: Any) -> Any:
    return obj.fn


def _source(obj: Any) -> str:
    src = getattr(obj, "src", None)
    if not isinstance(src, str):
        src = textwrap.dedent(inspect.getsource(_python_fn(obj)))
        import re

        m = re.search(r"^def\s+\w+\s*\(", src, re.MULTILINE)
        if m is None:
            raise ValueError(f"cannot find the def line of {obj!r}")
        src = src[m.start():]
    return src


def _is_add_combine(obj: Any) -> bool:
    """True for a @triton.jit combine whose whole body is ``return a + b`` over its two args."""
    if not _is_jit(obj):
        return False
    try:
        fdef = ast.parse(_source(obj)).body[0]
    except (OSError, TypeError, ValueError, SyntaxError):
        return False
    if not isinstance(fdef, ast.FunctionDef) or len(fdef.args.args) != 2:
        return False
    body = [s for s in fdef.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    v = body[0].value
    names = {a.arg for a in fdef.args.args}
    return (
        isinstance(v, ast.BinOp)
        and isinstance(v.op, ast.Add)
        and isinstance(v.left, ast.Name)
        and isinstance(v.right, ast.Name)
        and {v.left.id, v.right.id} == names
    )


_LEFT_ALONE = {
    "max": "max selects an input and rounds nothing: every order gives the same bits",
    "min": "min selects an input and rounds nothing: every order gives the same bits",
    "argmax": "argmax selects an index: no rounding",
    "argmin": "argmin selects an index: no rounding",
    "cumsum": "a scan, not a tree reduction: left as Triton lowers it",
    "cumprod": "a scan, not a tree reduction: left as Triton lowers it",
    "associative_scan": "a scan, not a tree reduction: left as Triton lowers it",
    "xor_sum": "integer xor is exact in any order",
    "reduce_or": "bitwise or is exact in any order",
}


class _Rewriter(ast.NodeTransformer):
    def __init__(self, name: str, scope: dict[str, Any], first_line: int = 1) -> None:
        self.name = name
        self.first_line = first_line
        self.scope = scope
        self.calls: list[PinnedCall] = []
        self.inject: dict[str, Any] = {}
        self.sub_reports: list[PinReport] = []

    def _note(self, node: ast.Call, action: str, reason: str) -> None:
        line = node.lineno + self.first_line - 1
        self.calls.append(PinnedCall(self.name, line, ast.unparse(node.func), action, reason))

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        tl = _lang()
        target = _resolve(node.func, self.scope)
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if target is not None and target is tl.sum:
            self._note(node, "pinned", "float tl.sum -> tree_sum_like (ints fall back to tl.sum)")
            return ast.copy_location(ast.Call(ast.Name(_SUM, ast.Load()), node.args, node.keywords), node)
        if target is not None and target is tl.reduce:
            combine = node.args[2] if len(node.args) > 2 else next(
                (k.value for k in node.keywords if k.arg == "combine_fn"), None)
            if combine is not None and _is_add_combine(_resolve(combine, self.scope)):
                if len(node.args) < 2 and not any(k.arg == "axis" for k in node.keywords):
                    self._note(node, "left", "tl.reduce without an axis argument")
                    return node
                axis = node.args[1] if len(node.args) > 1 else next(k.value for k in node.keywords if k.arg == "axis")
                kw = [k for k in node.keywords if k.arg == "keep_dims"]
                self._note(node, "pinned", "tl.reduce with an add combine -> tree_sum_like")
                return ast.copy_location(ast.Call(ast.Name(_SUM, ast.Load()), [node.args[0], axis], kw), node)
            self._note(node, "left", "tl.reduce with a combine that is not a plain add")
            return node
        if target is None and attr == "sum" and isinstance(node.func, ast.Attribute):
            # x.sum(...) on a local tensor
            self._note(node, "pinned", "tensor method .sum -> tree_sum_like")
            return ast.copy_location(
                ast.Call(ast.Name(_SUM, ast.Load()), [node.func.value, *node.args], node.keywords), node)
        if target is not None and attr in _LEFT_ALONE and getattr(tl, attr, None) is target:
            self._note(node, "left", _LEFT_ALONE[attr])
            return node
        if target is None and attr in _LEFT_ALONE:
            self._note(node, "left", _LEFT_ALONE[attr])
            return node
        if target is not None and _is_jit(target) and not _is_triton_internal(target):
            sub, rep = _pin_with_report(target)
            self.sub_reports.append(rep)
            if sub is not target:
                alias = f"__fixbits_dep_{len(self.inject)}_{_python_fn(target).__name__}"
                self.inject[alias] = sub
                return ast.copy_location(ast.Call(ast.Name(alias, ast.Load()), node.args, node.keywords), node)
        return node


def _is_triton_internal(obj: Any) -> bool:
    mod = getattr(_python_fn(obj), "__module__", "") or ""
    return mod == "triton" or mod.startswith("triton.") or mod.startswith("fixbits.enforce.")


def _jit_kwargs(obj: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for name in ("version", "do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline",
                 "launch_metadata"):
        if hasattr(obj, name):
            kw[name] = getattr(obj, name)
    if hasattr(obj, "_repr"):
        kw["repr"] = obj._repr
    ikw = getattr(obj, "kwargs", None)  # InterpretedFunction keeps the jit kwargs here
    if isinstance(ikw, dict):
        kw.update(ikw)
    return kw


def _pin_with_report(obj: Any) -> tuple[Any, PinReport]:
    import triton

    from fixbits.enforce.tree import tree_sum_like

    if getattr(obj, _MARK, False):
        return obj, PinReport(_python_fn(obj).__name__, ())
    with _LOCK:
        hit = _PINNED.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1], hit[2]
        pyfn = _python_fn(obj)
        scope: dict[str, Any] = dict(pyfn.__globals__)
        try:
            scope.update(inspect.getclosurevars(pyfn).nonlocals)
        except (TypeError, ValueError):
            pass
        src = _source(obj)
        tree = ast.parse(src)
        fdef = tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise ValueError(f"{pyfn.__qualname__}: source is not a single def")
        fdef.decorator_list = []
        try:
            first = inspect.getsourcelines(pyfn)[1]
            first += next(i for i, ln in enumerate(inspect.getsourcelines(pyfn)[0]) if ln.lstrip().startswith("def "))
        except (OSError, TypeError, StopIteration):
            first = 1
        rw = _Rewriter(pyfn.__qualname__, scope, first)
        tree = rw.visit(tree)
        ast.fix_missing_locations(tree)
        sub_calls = tuple(c for r in rw.sub_reports for c in r.calls)
        report = PinReport(pyfn.__qualname__, tuple(rw.calls) + sub_calls)
        if not any(c.action == "pinned" for c in rw.calls) and not rw.inject:
            _PINNED[id(obj)] = (obj, obj, report)
            return obj, report
        new_src = ast.unparse(tree) + "\n"
        digest = hashlib.sha256(new_src.encode()).hexdigest()[:16]
        filename = f"<fixbits-inner-tree {pyfn.__module__}.{pyfn.__qualname__} {digest}>"
        linecache.cache[filename] = (len(new_src), None, new_src.splitlines(True), filename)
        scope[_SUM] = tree_sum_like
        scope.update(rw.inject)
        ns: dict[str, Any] = {}
        exec(compile(new_src, filename, "exec"), scope, ns)  # noqa: S102 - our own rewritten source
        new_fn = ns[fdef.name]
        new_fn.__module__ = pyfn.__module__
        new_fn.__qualname__ = pyfn.__qualname__
        new_fn.__doc__ = pyfn.__doc__
        pinned = triton.jit(**_jit_kwargs(obj))(new_fn)
        setattr(pinned, _MARK, True)
        pinned.fixbits_original = obj  # type: ignore[attr-defined]
        pinned.fixbits_report = report  # type: ignore[attr-defined]
        _PINNED[id(obj)] = (obj, pinned, report)
        return pinned, report


def pin(kernel: Any) -> Any:
    """The pinned twin of a @triton.jit kernel (or of an autotune/heuristics wrapper around one).

    Idempotent and cached per kernel object. A kernel with nothing to pin comes back as itself.
    """
    inner = getattr(kernel, "fn", None)
    if _is_jit(kernel):
        return _pin_with_report(kernel)[0]
    if inner is not None and (hasattr(kernel, "configs") or hasattr(kernel, "values")):
        # triton.autotune / triton.heuristics wrapper: same wrapper around the pinned twin,
        # with its own autotune cache so pinned and free timings never mix.
        twin = copy.copy(kernel)
        twin.fn = pin(inner)
        if isinstance(getattr(twin, "cache", None), dict):
            twin.cache = {}
        return twin
    raise TypeError(f"inner_tree expects a @triton.jit function (or an autotune wrapper), got {type(kernel)!r}")


def report(kernel: Any) -> PinReport:
    """Which reduction calls ``pin`` rewrote and which it left, with reasons."""
    while not _is_jit(kernel) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    kernel = getattr(kernel, "fixbits_original", kernel)
    return _pin_with_report(kernel)[1]


def pinned_source(kernel: Any) -> str:
    """The rewritten source (for review and for the static checker)."""
    p = pin(kernel)
    while not _is_jit(p) and hasattr(p, "fn"):
        p = p.fn
    return _source(p)
