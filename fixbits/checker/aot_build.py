"""CPU pre-step of the soundness gate: compile the planned configs for sm_90 into an AOT store.

Resumable (a case already in the store's cases.jsonl is skipped) and bounded by a time budget,
with worker processes. Each kernel's checker signature is computed here from its PTX and kept
with its key (kernels.jsonl), so the device neither compiles nor walks PTX; the PTX itself can
be kept outside the store (ptx_dir) for re-checking with a later checker against the device's bytes.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

_W: dict[str, Any] = {}


def _init(store: str, ptx_dir: str | None) -> None:
    os.environ.setdefault("TRITON_CACHE_DIR", str(Path(store).parent / ".aot_triton_cache"))
    _W["store"] = Path(store)
    _W["ptx_dir"] = Path(ptx_dir) if ptx_dir else None
    _W["checker"] = checker_version()


def _one(task: dict[str, Any]) -> dict[str, Any]:
    import importlib

    from fixbits.checker import aot_store
    from fixbits.checker.api import signature
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config, to_device

    out: dict[str, Any] = {k: task[k] for k in ("id", "kernel", "dtype", "label")}
    t0 = time.time()
    try:
        mod = importlib.import_module(task["module"])
        shape = dict(task["shape"])
        host = mod.make_inputs(shape, task["dtype"], "ordinary", 0)
        inputs = {k: to_device(v, "cpu") for k, v in host.items()}
        cfg = Config(tuple(tuple(b) for b in task["blocks"]), task["num_warps"], task["num_stages"])
        with aot_store.recording(_W["store"]) as keys, capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, cfg, task["pinned"], **dict(task["launch_kwargs"]))
        kernels = []
        for key, c in zip(keys, got, strict=True):
            sha = hashlib.sha256(c.asm.encode()).hexdigest()[:16]
            if _W["ptx_dir"] is not None:
                _W["ptx_dir"].mkdir(parents=True, exist_ok=True)
                (_W["ptx_dir"] / f"{sha}.ptx").write_text(c.asm)
            s = signature(c.asm, c.isa)
            kernels.append(
                {
                    "key": key,
                    "ptx_sha": sha,
                    "digest": s.digest if s.deterministic else None,
                    "fallback": s.fallback,
                    "physical": s.physical,
                    "checker": _W["checker"],
                }
            )
        out["kernels"] = kernels
    except Exception as e:  # noqa: BLE001 - a config that does not compile is reported, the rest go on
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    out["wall_s"] = round(time.time() - t0, 3)
    return out


def build(tasks: list[dict[str, Any]], store: str, ptx_dir: str | None, budget_s: float, workers: int) -> int:
    root = Path(store)
    root.mkdir(parents=True, exist_ok=True)
    cases_path = root / "cases.jsonl"
    kern_path = root / "kernels.jsonl"
    done = set()
    if cases_path.exists():
        for line in cases_path.read_text().splitlines():
            r = json.loads(line)
            if "error" not in r:
                done.add((r["kernel"], r["dtype"], r["label"]))
    todo = [t for t in tasks if (t["kernel"], t["dtype"], t["label"]) not in done]
    print(f"aot build: {len(tasks)} planned, {len(done)} in store, {len(todo)} to compile", flush=True)
    t_start = time.time()
    deadline = t_start + budget_s
    n = 0
    ctx = mp.get_context("spawn")
    with open(cases_path, "a") as cf, open(kern_path, "a") as kf:
        pool = ctx.Pool(workers, initializer=_init, initargs=(store, ptx_dir))
        try:
            it = pool.imap_unordered(_one, todo, chunksize=1)
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    break
                try:
                    r = it.next(timeout=remaining)
                except (StopIteration, mp.TimeoutError):
                    break
                cf.write(
                    json.dumps(
                        {k: v for k, v in r.items() if k != "kernels"}
                        | {"keys": [k["key"] for k in r.get("kernels", [])]}
                    )
                    + "\n"
                )
                for k in r.get("kernels", []):
                    kf.write(json.dumps(k) + "\n")
                cf.flush()
                kf.flush()
                n += 1
                if n % 100 == 0:
                    print(f"  {n}/{len(todo)} compiled, {time.time() - t_start:.0f}s", flush=True)
        finally:
            pool.terminate()
            pool.join()
    print(f"aot build: {n} compiled in {time.time() - t_start:.0f}s", flush=True)
    return 0


def signing_sources() -> list[Path]:
    """The checker's modules that ``api.signature`` reaches (its static import closure inside
    fixbits.checker): the ones whose edit can change a signature. The store, build, prune and
    gate modules are not among them, so editing those keeps a store's signatures current."""
    import ast

    root = Path(__file__).resolve().parent

    def files_of(module: str) -> list[Path]:
        base = root.joinpath(*module.split(".")[2:])  # fixbits.checker.<a>.<b> -> <a>/<b>
        return [f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()]

    todo, seen = [root / "api.py"], set()
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        for node in ast.walk(ast.parse(f.read_text())):
            mods: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for m in mods:
                if m == "fixbits.checker" or m.startswith("fixbits.checker."):
                    todo.extend(files_of(m))
    return sorted(seen)


def checker_version() -> str:
    """A digest of the sources that make a signature (``signing_sources``): a signature stored
    in the AOT store is only this checker's verdict when the version it was made with matches."""
    root = Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=8)
    for f in signing_sources():
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


ARCHIVE_SUFFIXES = (".tar.xz", ".tar.gz", ".tar")  # a packed store (tar cJf store.tar.xz store)


def stale_signatures(store: str | Path) -> tuple[int, int]:
    """(kernels whose stored signature another checker made, kernels) in a store's manifest. A
    packed store (ARCHIVE_SUFFIXES) is read without unpacking it: the check to run here before a
    device call carries the archive, since the device refuses a store another checker signed."""
    if str(store).endswith(ARCHIVE_SUFFIXES):
        import tarfile

        with tarfile.open(store) as tf:
            member = next((x for x in tf if x.isfile() and Path(x.name).name == "kernels.jsonl"), None)
            fh = tf.extractfile(member) if member is not None else None
            text = fh.read().decode() if fh is not None else ""
    else:
        path = Path(store) / "kernels.jsonl"
        text = path.read_text() if path.exists() else ""
    rows = [json.loads(x) for x in text.splitlines() if x.strip()]
    mine = checker_version()
    return sum(r.get("checker") != mine for r in rows), len(rows)


def resign(store: str, ptx_dir: str) -> int:
    """Recompute every stored kernel's signature from its kept PTX with this checkout's checker
    (after a checker change, so the device's table reflects the checker being shipped)."""
    from fixbits.checker.api import signature

    path = Path(store) / "kernels.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    seen: dict[str, dict[str, Any]] = {}
    changed = 0
    version = checker_version()
    for r in rows:
        got = seen.get(r["ptx_sha"])
        if got is None:
            s = signature((Path(ptx_dir) / f"{r['ptx_sha']}.ptx").read_text(), "ptx")
            got = {
                "digest": s.digest if s.deterministic else None,
                "fallback": s.fallback,
                "physical": s.physical,
                "checker": version,
            }
            seen[r["ptx_sha"]] = got
        changed += got["digest"] != r["digest"]
        r.update(got)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)
    print(f"resigned {len(seen)} kernels, {changed} signatures changed", flush=True)
    return 0
