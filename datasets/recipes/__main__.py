"""Record the datasets: `python -m procsift.datasets.recipes [--only NAME ...] [--out DIR]` (needs root)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from procsift.datasets.recipes import RECIPES, WINDOW_S
from procsift.datasets.recipes._run import relabel


def _install(dst: Path, src: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    shutil.copyfile(src, tmp)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dst)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*", metavar="NAME", help="recipes to run (default: all)")
    ap.add_argument("--skip", nargs="*", default=[], metavar="NAME", help="recipes not to run")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data")
    ap.add_argument("--work", type=Path, default=Path("/tmp/procsift-datasets"))
    ap.add_argument("--list", action="store_true", help="list the recipes and exit")
    args = ap.parse_args()
    chosen = [r for r in RECIPES if (not args.only or r.name in args.only) and r.name not in args.skip]
    if args.list:
        for r in RECIPES:
            print(f"{r.name:<18} {r.label:<13} {r.source:<20} {r.duration_s:>4g} s  {r.notes}")
        return 0
    unknown = set(args.only or []) - {r.name for r in RECIPES}
    if unknown:
        print(f"unknown recipe(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("recording needs root (BPF)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    args.work.chmod(0o755)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    failed = []
    for r in chosen:
        work = args.work / r.name
        work.mkdir(exist_ok=True)
        work.chmod(0o755)
        raw = work / f"{r.name}.parquet"
        raw.unlink(missing_ok=True)
        started = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] {r.name}: {r.label} / {r.source} ({r.duration_s:g} s)", flush=True)
        try:
            labeller = r.run(r, work, raw)
            stats = relabel(raw, labeller, r.label, r.source)
        except Exception as err:  # noqa: BLE001 - one failed recipe must not stop the others
            traceback.print_exc()
            print(f"  FAILED: {err}", flush=True)
            failed.append(r.name)
            continue
        _install(args.out / raw.name, raw)
        manifest[r.name] = {"label": r.label, "source": r.source, "window_s": WINDOW_S, "file": raw.name,
                            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                            "seconds": round(time.time() - started, 1), "bytes": (args.out / raw.name).stat().st_size,
                            "notes": r.notes, **stats}
        print(f"  {stats}", flush=True)
        tmp = manifest_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, manifest_path)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
