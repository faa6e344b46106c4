"""`procsift top` and `procsift record`: the live table and trace recording."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from procsift.collector import LABELS, TraceMeta, Window, write_trace
from procsift.collector.schema import printable
from procsift.collector.errors import ProcsiftError
from procsift.collector.session import Collector, RowFilter
from procsift.collector.traceio import format_of, writable
from procsift.service.cli._args import existing_pids, fraction, pid, seconds, window_seconds

__all__ = ["register", "render_table", "window_json"]

TOP_EXAMPLES = """examples:
  procsift top                 live table, 1 s windows
  procsift top -d 2 -p 1234    2 s windows, process 1234 and its children only
  procsift top --once --json   one window as JSON, then exit
"""

RECORD_EXAMPLES = """examples:
  procsift record -o all.parquet --duration 30
  procsift record -o gz.parquet --label background --source gzip -- gzip -k big.file
  procsift record -o web.parquet -w 0.5 -p $(pgrep -d' ' nginx) --label html-serving
Ctrl-C (or the command's exit) ends the recording and writes everything so far.
"""


def _add_collector_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--pid", type=pid, nargs="+", metavar="PID",
                   help="only these processes and their descendants")
    p.add_argument("--uid", type=int, help="only processes of this user id")
    p.add_argument("--cgroup", help="only processes whose cgroup path starts with this")
    p.add_argument("--comm", help="only processes with this command name")
    p.add_argument("--proc", action="store_true",
                   help="use the /proc fallback collector (no syscall counts) even where BPF loads")
    p.add_argument("--syscall-duty", type=fraction, default=1.0, metavar="FRACTION",
                   help="count syscalls only this share of each window (0-1], scaled up; "
                        "lowers the cost every syscall pays while the probe is attached")
    p.add_argument("--ebpf", action="store_true", help="print the BPF program and exit")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the `top` and `record` verbs."""
    top = sub.add_parser("top", help="live per-process table of syscalls and run/wait behaviour",
                         epilog=TOP_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("-d", "--delay", type=window_seconds, default=1.0, metavar="SECONDS",
                     help="window length (default 1)")
    top.add_argument("-n", "--count", type=int, help="stop after this many windows")
    top.add_argument("--once", action="store_true", help="one window, then exit")
    top.add_argument("--json", action="store_true", help="print rows as JSON (with --once: one array)")
    top.add_argument("--sort", choices=("cpu", "syscalls", "runq", "wait"), default="cpu")
    _add_collector_options(top)
    top.set_defaults(func=cmd_top)

    rec = sub.add_parser("record", help="record windows of processes into a trace file",
                         epilog=RECORD_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    rec.add_argument("-o", "--output", required=True, metavar="FILE",
                     help="trace file to write (.parquet, .csv or .arff)")
    rec.add_argument("-w", "--window", type=window_seconds, default=1.0, metavar="SECONDS",
                     help="window length (default 1)")
    rec.add_argument("--label", help=f"label every row ({', '.join(LABELS)})")
    rec.add_argument("--source", help="name of the application/workload, for held-out evaluation")
    rec.add_argument("--duration", type=seconds, metavar="S",
                     help="stop after this many seconds (a command still running then is stopped)")
    _add_collector_options(rec)
    rec.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                     help="run this command and record it and its children until it exits")
    rec.set_defaults(func=cmd_record)


def _collector(args: argparse.Namespace, window_s: float, pids: Sequence[int] | None) -> Collector:
    return Collector(window_s=window_s, pids=pids,
                     row_filter=RowFilter(uid=args.uid, cgroup=args.cgroup, comm=args.comm),
                     force_proc=args.proc, syscall_duty=args.syscall_duty)


def _print_ebpf() -> int:
    from procsift.collector._bpf import bpf_source  # noqa: PLC0415
    print(bpf_source())
    return 0


# --- top -------------------------------------------------------------------

_SORT_KEYS = {
    "cpu": lambda w: w.run_ns,
    "syscalls": lambda w: w.syscalls_total,
    "runq": lambda w: w.runq_ns,
    "wait": lambda w: w.max_wait_ns,
}


def _ms(ns: int) -> str:
    return f"{ns / 1e6:8.1f}"


def render_table(rows: Sequence[Window], kind: str, window_s: float, limit: int | None = None,
                 sort: str = "cpu", width: int = 80) -> str:
    """The `top` table for one window's rows, as text."""
    rows = sorted(rows, key=_SORT_KEYS[sort], reverse=True)
    shown = rows if limit is None else rows[:limit]
    total_sc = sum(w.syscalls_total for w in rows)
    head = (f"procsift top - {time.strftime('%H:%M:%S')}  {kind} collector  window {window_s:g} s  "
            f"{len(rows)} active processes  {total_sc / max(window_s, 1e-9):,.0f} syscalls/s")
    cols = f"{'PID':>7} {'COMM':<15} {'CPU%':>6} {'SYSC/s':>8} {'RUNQ ms':>8} {'MAXWAIT':>8} {'R/W':>5}  TOP SYSCALLS"
    lines = [head[:width], cols]
    for w in shown:
        dur = max(w.dur_s, 1e-9)
        top3 = " ".join(f"{n}:{c}" for n, c in w.top_syscalls(3))
        line = (f"{w.pid:>7} {printable(w.comm)[:15]:<15} {100 * w.run_ns / 1e9 / dur:6.1f} "
                f"{w.syscalls_total / dur:8.0f} {_ms(w.runq_ns)} {_ms(w.max_wait_ns)} "
                f"{w.run_wait_transitions:>5}  {top3}")
        lines.append(line[:max(width, len(cols))])
    return "\n".join(lines)


def window_json(w: Window) -> dict[str, object]:
    """One row as JSON: the Window fields, syscalls by name (non-zero only) and per category."""
    rec = {k: v for k, v in w.as_record().items() if not k.startswith(("sys_", "cat_"))}
    rec["syscall_counts"] = dict(sorted(w.syscalls.items(), key=lambda kv: -kv[1]))
    rec["categories"] = w.categories()
    return rec


def cmd_top(args: argparse.Namespace) -> int:
    if args.ebpf:
        return _print_ebpf()
    existing_pids(args.pid)
    count = 1 if args.once else args.count
    live = sys.stdout.isatty() and not args.json and not args.once
    with _collector(args, args.delay, args.pid) as col:
        for rows in col.windows(count=count):
            if args.json:
                payload = [window_json(w) for w in rows]
                print(json.dumps(payload if args.once else {"t": time.time(), "rows": payload}), flush=True)
                continue
            size = shutil.get_terminal_size((80, 24))
            text = render_table(rows, col.kind, args.delay, sort=args.sort, width=size.columns,
                                limit=size.lines - 3 if live else None)
            if live:
                sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
                sys.stdout.flush()
            else:
                print(text + "\n", flush=True)
    return 0


# --- record ----------------------------------------------------------------

def _spawn_held(command: Sequence[str]) -> tuple[subprocess.Popen[bytes], int]:
    """Start `command` held before it runs, so it can be followed first; returns (proc, go-fd).

    bash waits on a pipe, then execs the command under the same PID: writing a line
    to the go-fd lets it run; closing it unwritten (the recording ended first) makes bash
    exit without running it. (A preexec_fn can't wait: Popen blocks until exec.)
    """
    r, w = os.pipe()
    script = 'read -r _ <&"$1" || exit 0; eval "exec $1<&-"; shift; exec "$@"'
    held = ["/bin/bash", "-c", script, "procsift-held", str(r), *command]
    try:
        proc = subprocess.Popen(held, pass_fds=(r,))
    finally:
        os.close(r)
    return proc, w


def _wait_until_held(pid: int, timeout: float = 10.0) -> None:
    """Wait until the held bash blocks reading its go-pipe, i.e. is done starting up.

    bash makes system calls of its own as it starts (getppid() for $PPID among them). Following
    the PID only once it sleeps in read() keeps them out of the recording in every run, instead
    of depending on which of bash and the collector gets there first.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            with open(f"/proc/{pid}/syscall", "rb") as f:
                nr = f.read().split(maxsplit=1)[0]
        except (FileNotFoundError, ProcessLookupError):
            return  # already gone: the exit status will say why
        except (PermissionError, IndexError):
            nr = b"0"  # /proc/PID/syscall unreadable here: the sleeping state alone has to do
        if state == b"S" and nr == b"0":  # asleep in read (syscall 0 on x86_64)
            return
        time.sleep(0.001)


def _check_runnable(command: Sequence[str]) -> None:
    if shutil.which(command[0]) is None:
        raise ProcsiftError(f"cannot run {command[0]!r}: command not found")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_record(args: argparse.Namespace) -> int:
    if args.ebpf:
        return _print_ebpf()
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    out = Path(args.output)
    format_of(out)  # refuse an unknown extension before recording anything
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise ProcsiftError(f"{out}: folder {out.parent} does not exist")
    writable(out)  # and a place it cannot be written to: not after minutes of recording
    if args.label is not None and args.label not in LABELS:
        raise ProcsiftError(f"unknown label {args.label!r}; labels are {', '.join(LABELS)}")
    if command and args.pid:
        raise ProcsiftError("give either -p PID or a command, not both")
    existing_pids(args.pid)
    if command:
        _check_runnable(command)

    pids: list[int] | None = list(args.pid) if args.pid else ([] if command else None)
    rows: list[Window] = []
    proc = None
    progress = sys.stderr.isatty()
    with _collector(args, args.window, pids) as col:
        started = time.monotonic()  # --duration counts from here, not from BPF compile time
        what = " ".join(command) if command else (f"PIDs {' '.join(map(str, pids))}" if pids else "all processes")

        def stop() -> bool:
            if proc is not None and proc.poll() is not None:
                return True
            return args.duration is not None and time.monotonic() - started >= args.duration

        n = 0
        interrupted = False
        go = -1
        # `timeout`, `kill` and service managers stop with SIGTERM: treat it as Ctrl-C, so
        # the windows recorded so far are written, not lost. Both are caught from before the
        # command starts and before "recording" is said: a Ctrl-C at any moment after it must
        # still end the command and write the file.
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            print(f"recording {what} to {out} ({col.kind} collector, {args.window:g} s windows); "
                  "Ctrl-C to stop", file=sys.stderr, flush=True)
            if command:
                proc, go = _spawn_held(command)
                _wait_until_held(proc.pid)
                col.track([proc.pid])
                os.write(go, b"go\n")
            for batch in col.windows(stop=stop):
                n += 1
                rows.extend(batch)
                if progress:
                    print(f"\rrecording: {n} windows, {len(rows)} rows, {time.monotonic() - started:.1f} s ",
                          end="", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            interrupted = True
            rows.extend(col.close_window())  # flush the window in progress
        finally:
            if go >= 0:
                os.close(go)  # a held command that never got its go sees EOF and exits unrun
        recorded_s = time.monotonic() - started
        kind = col.kind
    if progress:
        print(file=sys.stderr)
    if args.label is not None or args.source is not None:
        from dataclasses import replace  # noqa: PLC0415
        rows = [replace(w, label=args.label if args.label is not None else w.label,
                        source=args.source if args.source is not None else w.source) for w in rows]
    write_trace(out, rows, TraceMeta(window_s=args.window, collector=kind, syscall_duty=args.syscall_duty,
                                     duration_s=round(recorded_s, 3)))
    processes = len({(w.pid, w.start_time) for w in rows})
    status = "" if proc is None else _end_command(proc, "on Ctrl-C" if interrupted else "at --duration")
    print(f"wrote {out}: {len(rows)} rows, {processes} processes{status}", file=sys.stderr)
    return 0


def _end_command(proc: subprocess.Popen[bytes], when: str, grace_s: float = 3.0) -> str:
    """The recorded command's end: its exit status, or it is stopped (SIGTERM, then SIGKILL after
    `grace_s`) when the recording ended first; the recording never waits on it."""
    if proc.poll() is not None:
        return f"; command exited with status {proc.returncode}"
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
        how = "SIGTERM"
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        how = "SIGKILL"
    return f"; command stopped {when} ({how}; it was still running)"
