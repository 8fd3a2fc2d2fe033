"""ArchProfile: one table per (SM, library version, dtype pair), heuristic answer -> GEMMDesc.

A descriptor depends on the shape only through the cost model's answer for it (paper §4), so
a finite table of answers is the whole function (SM, shape) -> GEMMDesc for one library
generation. ``lookup`` never guesses: an answer that is not in the table raises NotInProfile
naming it, so a caller falls back or reports instead of emulating the wrong arithmetic.

File: matrices/profiles/<arch>_cublaslt<version>_<in>_<out>.yaml
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fixbits.desc import DescError, GEMMDesc

PROFILE_DIR = Path(__file__).resolve().parents[2] / "matrices" / "profiles"
KEY_FIELDS = ("algo_id", "tile_id", "splitk_num", "reduction_scheme", "cta_swizzling", "custom_option", "stages_id")


# A failed-table reason that starts so records an entry withdrawn on the GPU's evidence
# (benchmarks/reconstruction/withdraw_entries.py): reconstruct does not predict it again.
WITHDRAWN = "withdrawn: "
# One that starts so records an entry shown wrong whose cause is fixed in the prober: a resumed run
# probes it again like any failed answer.
TO_PROBE_AGAIN = "wrong, to probe again: "


def is_withdrawn(why: Any) -> bool:
    """Whether a failed-table reason records an entry withdrawn on the GPU's evidence."""
    return isinstance(why, str) and why.startswith(WITHDRAWN)


class ProfileError(ValueError):
    """A profile file is malformed; the message names the file and the key."""


class NotInProfile(LookupError):
    """The heuristic answer has no entry in the profile (never guessed)."""


def answer_key(answer: Any) -> str:
    """'a66-t10-s9-r2-w0-c0-g0' from a HeuristicAnswer, a mapping, or a key tuple."""
    if isinstance(answer, str):
        return answer
    if hasattr(answer, "key_str"):
        return str(answer.key_str())
    if isinstance(answer, dict):
        vals = tuple(int(answer[f]) for f in KEY_FIELDS)
    else:
        vals = tuple(int(v) for v in answer)
    if len(vals) != len(KEY_FIELDS):
        raise ValueError(f"an answer key has {len(KEY_FIELDS)} fields ({', '.join(KEY_FIELDS)}), got {vals}")
    return "a{}-t{}-s{}-r{}-w{}-c{}-g{}".format(*vals)


def key_selector(patterns: list[str]) -> Callable[[str], bool]:
    """A test on answer keys: true when every dash-separated part of one pattern occurs in the
    key (an item may hold several patterns, comma-separated; 'a14' selects the whole algo,
    'a13-c10' one custom option of it). Used to restrict a run to some answers."""
    wanted = [frozenset(a.split("-")) for x in patterns for a in x.split(",") if a]
    if not wanted:
        raise ValueError("no answer-key pattern given (e.g. 'a14' or 'a13-t0-s1-c10')")

    def selects(key: str) -> bool:
        parts = set(key.split("-"))
        return any(w <= parts for w in wanted)

    return selects


@dataclass(frozen=True)
class KVariant:
    """One answer whose arithmetic changes with K: the descriptor for K in [k_min, k_max].

    ``n1`` (optional) also ties the variant to the GEMM's orientation: True holds only when
    N == 1, False only when N != 1 (the workspace GEMV loads K two at a time when N == 1 and
    one at a time when M == 1, under one answer key); None holds for both. A lookup that does
    not give N never takes an orientation variant."""

    k_min: int
    k_max: int | None  # None: no upper bound
    desc: GEMMDesc
    shape: tuple[int, int, int]  # where this descriptor was probed
    n1: bool | None = None

    def holds(self, k: int, n: int | None = None) -> bool:
        if self.n1 is not None and (n is None or (n == 1) != self.n1):
            return False
        return self.k_min <= k and (self.k_max is None or k <= self.k_max)


@dataclass(frozen=True)
class ProfileEntry:
    """One answer's descriptor, the shape it was probed at and how many shapes verified it.

    ``variants`` (optional) splits the answer by K where one descriptor does not hold for all
    of it; K outside every range is not in the profile (never guessed)."""

    key: str
    desc: GEMMDesc
    shape: tuple[int, int, int]
    verified_shapes: int
    shapes_seen: int = 0
    kernels: tuple[str, ...] = ()
    note: str = ""
    variants: tuple[KVariant, ...] = ()


@dataclass(frozen=True)
class ArchProfile:
    arch: str
    library: str
    library_version: str
    dtype: str
    out_dtype: str
    entries: dict[str, ProfileEntry] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # answer key -> why it was not probed

    @property
    def filename(self) -> str:
        return profile_filename(self.arch, self.library_version, self.dtype, self.out_dtype)

    def lookup(self, answer: Any, k: int | None = None, n: int | None = None) -> GEMMDesc:
        """The descriptor of ``answer``; with ``k`` (and ``n``), the variant for that K (and
        orientation) when the answer has them. An answer with orientation variants needs both."""
        key = answer_key(answer)
        entry = self.entries.get(key)
        if entry is None:
            why = f" (probing it failed: {self.failed[key]})" if key in self.failed else ""
            raise NotInProfile(
                f"heuristic answer {key} is not in the {self.arch} cuBLASLt {self.library_version} "
                f"{self.dtype}->{self.out_dtype} profile{why}; {len(self.entries)} answers are"
            )
        oriented = any(v.n1 is not None for v in entry.variants)
        if oriented and (k is None or n is None):
            raise NotInProfile(f"heuristic answer {key} changes its arithmetic with the orientation (N == 1 or "
                               "not): the lookup needs K and N")
        if entry.variants and k is not None:
            for v in entry.variants:
                if v.holds(int(k), n):
                    return v.desc.at_k(int(k))
            ranges = ", ".join(f"{'' if v.n1 is None else 'N == 1 ' if v.n1 else 'N != 1 '}[{v.k_min}, "
                               f"{v.k_max if v.k_max is not None else 'inf'}]" for v in entry.variants)
            what, at = ("the orientation and K", f"K={k} N={n}") if oriented else ("K", f"K={k}")
            raise NotInProfile(f"heuristic answer {key} changes its arithmetic with {what}; {at} is outside the "
                               f"probed ranges {ranges}")
        return entry.desc if k is None else entry.desc.at_k(int(k))

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "library": self.library,
            "library_version": self.library_version,
            "dtype": self.dtype,
            "out_dtype": self.out_dtype,
            "entries": {
                k: {
                    "desc": e.desc.to_dict(),
                    "shape": list(e.shape),
                    "verified_shapes": e.verified_shapes,
                    "shapes_seen": e.shapes_seen,
                    "kernels": list(e.kernels),
                    "note": e.note,
                    **({"variants": [{"k_min": v.k_min, "k_max": v.k_max, "desc": v.desc.to_dict(),
                                      "shape": list(v.shape), **({"n1": v.n1} if v.n1 is not None else {})}
                                     for v in e.variants]} if e.variants else {}),
                }
                for k, e in sorted(self.entries.items())
            },
            "failed": dict(sorted(self.failed.items())),
        }

    def save(self, directory: str | Path = PROFILE_DIR) -> Path:
        path = Path(directory) / self.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> ArchProfile:
        if not isinstance(data, dict):
            raise ProfileError(f"{where}: expected a mapping at the top level")
        for key in ("arch", "library", "library_version", "dtype", "out_dtype", "entries"):
            if key not in data:
                raise ProfileError(f"{where}: missing key '{key}'")
        entries_raw = data["entries"] or {}
        if not isinstance(entries_raw, dict):
            raise ProfileError(f"{where}: 'entries' must map answer keys to entries")
        entries: dict[str, ProfileEntry] = {}
        for key, e in entries_raw.items():
            here = f"{where}: entries.{key}"
            if not isinstance(e, dict):
                raise ProfileError(f"{here}: expected a mapping")
            for need in ("desc", "shape", "verified_shapes"):
                if need not in e:
                    raise ProfileError(f"{here}: missing key '{need}'")
            try:
                desc = GEMMDesc.from_dict(e["desc"], where=f"{here}.desc")
            except DescError as exc:
                raise ProfileError(str(exc)) from exc
            shape = e["shape"]
            if not (isinstance(shape, list) and len(shape) == 3 and all(isinstance(x, int) and x > 0 for x in shape)):
                raise ProfileError(f"{here}.shape: expected [m, n, k] positive integers, got {shape!r}")
            if not isinstance(e["verified_shapes"], int) or e["verified_shapes"] < 0:
                raise ProfileError(f"{here}.verified_shapes: expected a non-negative integer")
            if desc.in_dtype != data["dtype"] or desc.out_dtype != data["out_dtype"]:
                raise ProfileError(f"{here}.desc: dtypes {desc.in_dtype}->{desc.out_dtype} differ from the profile's "
                                   f"{data['dtype']}->{data['out_dtype']}")
            variants = []
            for i, v in enumerate(e.get("variants") or []):
                try:
                    vd = GEMMDesc.from_dict(v["desc"], where=f"{here}.variants[{i}].desc")
                    n1 = v.get("n1")
                    if n1 is not None and not isinstance(n1, bool):
                        raise TypeError(f"n1 must be true, false or absent, got {n1!r}")
                    variants.append(KVariant(int(v["k_min"]), None if v.get("k_max") is None else int(v["k_max"]),
                                             vd, tuple(int(x) for x in v.get("shape", shape)), n1))  # type: ignore[arg-type]
                except (KeyError, TypeError, ValueError, DescError) as exc:
                    raise ProfileError(f"{here}.variants[{i}]: {exc}") from exc
            entries[str(key)] = ProfileEntry(str(key), desc, (shape[0], shape[1], shape[2]), e["verified_shapes"],
                                             int(e.get("shapes_seen", 0)), tuple(e.get("kernels", ()) or ()),
                                             str(e.get("note", "")), tuple(variants))
        failed = data.get("failed") or {}
        if not isinstance(failed, dict):
            raise ProfileError(f"{where}: 'failed' must map answer keys to reasons")
        return cls(str(data["arch"]), str(data["library"]), str(data["library_version"]), str(data["dtype"]),
                   str(data["out_dtype"]), entries, {str(k): str(v) for k, v in failed.items()})


def profile_filename(arch: str, library_version: str, dtype: str, out_dtype: str) -> str:
    return f"{arch}_cublaslt{library_version}_{dtype}_{out_dtype}.yaml"


def load(path: str | Path) -> ArchProfile:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        # libyaml's parser where the wheel has it: the fp32 profiles are ~0.6 MB (K-range variants)
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not YAML ({exc})") from exc
    return ArchProfile.from_dict(data, where=str(path))


def find(arch: str, library_version: str, dtype: str, out_dtype: str = "fp32",
         directory: str | Path = PROFILE_DIR) -> ArchProfile:
    path = Path(directory) / profile_filename(arch, library_version, dtype, out_dtype)
    if not path.exists():
        have = sorted(p.name for p in Path(directory).glob("*.yaml"))
        raise FileNotFoundError(f"no profile {path.name} in {directory}; present: {', '.join(have) or 'none'}")
    return load(path)


def available(directory: str | Path = PROFILE_DIR) -> list[Path]:
    return sorted(Path(directory).glob("*.yaml"))
