"""Background work: compression, sorting, checksumming, a parallel C build, walking a large tree.

Each recipe loops one real tool over real input for the recording's length, under
`timeout`, launched by `procsift record -- ...`; only the tool's own processes are labelled
(the looping shell and `timeout` stay unlabelled).

The `-starved` recipes run a tool the way procsift's background profile leaves it on a busy
machine: SCHED_IDLE and the idle I/O class, while three unrecorded contenders (on two cores)
take the CPU in phases of 0-100 % duty, so the tool runs in whatever time is left and spends
the rest on the run queue. Background work must keep its label after procsift has placed it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
from pathlib import Path

from procsift.datasets.recipes._run import (
    CONTENDERS, Labeller, Recipe, by_comm, contenders, need, record_command, variants,
)

__all__ = ["RECIPES", "make_inputs"]

CORPUS_MB = 96
TEXT_MB = 120


def make_inputs(work: Path) -> dict[str, Path]:
    """A mixed binary/text corpus (a tar of installed Python and docs) and a large text file of lines."""
    corpus = work / "corpus.tar"
    if not corpus.exists():
        with open(corpus, "wb") as fh:
            tar = subprocess.Popen(["tar", "cf", "-", "--ignore-failed-read", "/usr/lib/python3",
                                    "/usr/share/doc", "/usr/share/perl"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
            assert tar.stdout is not None
            left = CORPUS_MB << 20
            while left > 0 and (chunk := tar.stdout.read(min(left, 1 << 20))):
                fh.write(chunk)
                left -= len(chunk)
            tar.kill()
            tar.wait()
    text = work / "lines.txt"
    if not text.exists():
        subprocess.run(f"base64 -w 60 /dev/urandom | head -c {TEXT_MB}M > {text}", shell=True, check=True)
    return {"corpus": corpus, "text": text}


def make_c_project(work: Path, files: int = 48) -> Path:
    """A generated C project (files x a few compute-heavy functions) with a Makefile."""
    src = work / "cproj"
    src.mkdir(exist_ok=True)
    for i in range(files):
        body = "\n".join(
            f"static double f{i}_{j}(double x) {{ double s = 0; for (int k = 0; k < 1000; k++) "
            f"{{ s += (x * k + {j}) / (k + 1.{i}); if (s > 1e9) s -= 1e9; }} return s; }}" for j in range(40))
        calls = " + ".join(f"f{i}_{j}(x)" for j in range(40))
        (src / f"unit{i}.c").write_text(f"#include <math.h>\n{body}\ndouble unit{i}(double x) {{ return {calls}; }}\n")
    decls = "\n".join(f"double unit{i}(double);" for i in range(files))
    total = " + ".join(f"unit{i}(1.0)" for i in range(files))
    (src / "main.c").write_text(f"#include <stdio.h>\n{decls}\nint main(void) {{ printf(\"%f\\n\", {total}); return 0; }}\n")
    objs = " ".join(f"unit{i}.o" for i in range(files)) + " main.o"
    (src / "Makefile").write_text(f"CFLAGS = -O2\nall: prog\nprog: {objs}\n\t$(CC) -o $@ $^ -lm\n"
                                  f"%.o: %.c\n\t$(CC) $(CFLAGS) -c $<\nclean:\n\trm -f *.o prog\n")
    return src


def _loop(recipe: Recipe, work: Path, out: Path, shell: str, label: Labeller, cwd: Path | None = None) -> Labeller:
    cmd = ["timeout", f"{recipe.duration_s:g}", "bash", "-c", f"while :; do {shell}; done"]
    starved = bool(recipe.extra.get("starved"))
    if starved:
        need("chrt", "ionice")
        cmd = ["ionice", "-c", "3", "chrt", "--idle", "0"] + cmd
    with contenders(recipe.duration_s + 5) if starved else contextlib.nullcontext():
        rc = record_command(out, cmd, recipe, work / f"{recipe.name}.record.log", cwd=cwd)
    if rc != 0:
        raise RuntimeError(f"procsift record exited with {rc}; see {work / (recipe.name + '.record.log')}")
    return label


def _tool(shell: str, comms: tuple[str, ...], programs: tuple[str, ...]) -> object:
    def run(recipe: Recipe, work: Path, out: Path) -> Labeller:
        need(*programs)
        shared = work.parent / "inputs"
        shared.mkdir(exist_ok=True)
        inputs = make_inputs(shared)
        return _loop(recipe, work, out, shell.format(work=work, **inputs), by_comm(*comms))
    return run


def _build(recipe: Recipe, work: Path, out: Path) -> Labeller:
    need("make", "gcc")
    src = make_c_project(work)
    # make and the gcc driver (cc, collect2) only wait for their children; the work is cc1, as, ld
    comms = ("cc1", "as", "ld")
    return _loop(recipe, work, out, "make -s -j2 clean all > /dev/null", by_comm(*comms), cwd=src)


def _starved(recipe: Recipe) -> Recipe:
    """`recipe` as procsift's background profile leaves it on a busy machine (module docstring)."""
    return dataclasses.replace(recipe, name=f"{recipe.name}-starved", extra={**recipe.extra, "starved": True},
                               notes=f"{recipe.notes}; under SCHED_IDLE and the idle I/O class beside "
                                     f"{CONTENDERS} CPU contenders")


def _bg(name: str, source: str, run: object, apt: tuple[str, ...] = (), notes: str = "") -> Recipe:
    return Recipe(name, "background", source, run, duration_s=60, apt=apt, notes=notes)  # type: ignore[arg-type]


PI = "echo 'scale=2500; 4*a(1)' | bc -l > /dev/null"

RECIPES: list[Recipe] = [
    _bg("bg-xz", "xz", _tool("xz -6 -T1 -c {corpus} > /dev/null", ("xz",), ("xz",)), ("xz-utils",),
        "xz -6 single-threaded over a 96 MB tar of /usr/lib/python3, /usr/share/doc, /usr/share/perl"),
    _bg("bg-gzip", "gzip", _tool("gzip -6 -c {corpus} > /dev/null", ("gzip",), ("gzip",)), (),
        "gzip -6 over the same corpus"),
    _bg("bg-zstd", "zstd", _tool("zstd -q -15 -T1 -c {corpus} > /dev/null", ("zstd",), ("zstd",)), ("zstd",),
        "zstd -15 single-threaded over the same corpus"),
    _bg("bg-sort", "sort", _tool("sort -S 64M --parallel=2 -T {work} {text} -o {work}/sorted.txt",
                                  ("sort",), ("sort",)), (),
        "GNU sort of 120 MB of base64 lines with a 64 MB buffer (spills to temp files)"),
    _bg("bg-checksum", "sha256sum", _tool("sha256sum {corpus} {text} > /dev/null; md5sum {corpus} > /dev/null",
                                           ("sha256sum", "md5sum"), ("sha256sum", "md5sum")), (),
        "sha256sum and md5sum over the corpus and the text file"),
    _bg("bg-make", "gcc-make", _build, ("make", "gcc"),
        "make -j2 clean all of a generated 48-file C project (gcc -O2); cc1, as, ld labelled (make and the gcc driver only wait)"),
    _bg("bg-find-du", "find-du", _tool("find /usr -xdev -type f -printf '%s %p\\n' > /dev/null; du -sx /usr > /dev/null",
                                        ("find", "du"), ("find", "du")), (),
        "find and du over /usr (warm cache after the first pass)"),
    _bg("bg-pigz", "pigz", _tool("pigz -6 -p 2 -c {corpus} > /dev/null", ("pigz",), ("pigz",)), ("pigz",),
        "pigz -6 with 2 compression threads over the same corpus (threads handing blocks over by futex)"),
    _bg("bg-bzip2", "bzip2", _tool("bzip2 -9 -c {corpus} > /dev/null", ("bzip2",), ("bzip2",)), ("bzip2",),
        "bzip2 -9 over the same corpus"),
    _bg("bg-bc-pi", "bc-pi", _tool(PI, ("bc",), ("bc",)), ("bc",),
        "bc -l computing pi to 2,500 digits (no system calls while it computes, like a bare CPU loop)"),
]

# The same tools after procsift's background profile, on a busy machine (module docstring).
RECIPES += variants(RECIPES, ("bg-xz", "bg-gzip", "bg-checksum", "bg-bzip2", "bg-bc-pi"), _starved)
