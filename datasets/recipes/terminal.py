"""Interactive programs driven through a private tmux server with human-like timing.

Keys arrive in bursts (50-250 ms apart, as typed) separated by think pauses of 0.5-10 s
(log-uniform). tmux itself and the `tmux send-keys` clients are outside the recorded tree:
only the pane's program (and what it starts) is recorded.
"""

from __future__ import annotations

import math
import random
import subprocess
import time
from pathlib import Path

from procsift.datasets.recipes._run import (
    Labeller, Recipe, by_comm, contended, everything, need, record_pids, variants,
)

__all__ = ["RECIPES"]

SOCKET = "procsift-datasets"
_KEYS = {"<Enter>": "Enter", "<Esc>": "Escape", "<Up>": "Up", "<Down>": "Down", "<Left>": "Left",
         "<Right>": "Right", "<PgDn>": "NPage", "<PgUp>": "PPage", "<Space>": "Space", "<Tab>": "Tab",
         "<F6>": "F6", "<BS>": "BSpace", "<C-o>": "C-o", "<C-x>": "C-x", "<C-w>": "C-w", "<C-k>": "C-k",
         "<C-u>": "C-u", "<C-l>": "C-l", "<Home>": "Home", "<End>": "End",
         "<F3>": "F3", "<F10>": "F10"}
PAUSE = "~"


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, "-f", "/dev/null", *args], check=True, capture_output=True,
                          text=True, timeout=10).stdout.strip()


def _tokens(script: str) -> list[str]:
    """Split a script into literal characters, <Key> names and ~ pauses."""
    out, i = [], 0
    while i < len(script):
        if script[i] == "<" and (j := script.find(">", i)) > i and script[i:j + 1] in _KEYS:
            out.append(script[i:j + 1])
            i = j + 1
        else:
            out.append(script[i])
            i += 1
    return out


def type_script(target: str, script: str, until: float, rng: random.Random) -> bool:
    """Send a script's keys with typing delays and think pauses; False when time ran out."""
    for tok in _tokens(script):
        if time.monotonic() >= until:
            return False
        if tok == PAUSE:
            time.sleep(min(math.exp(rng.uniform(math.log(0.5), math.log(10.0))), max(0.0, until - time.monotonic())))
        elif tok in _KEYS:
            _tmux("send-keys", "-t", target, _KEYS[tok])
            time.sleep(rng.uniform(0.08, 0.3))
        else:
            _tmux("send-keys", "-t", target, "-l", tok)
            time.sleep(rng.uniform(0.05, 0.25) if rng.random() > 0.05 else rng.uniform(0.3, 0.8))
    return True


def _session(recipe: Recipe, work: Path, out: Path, command: str, script: str, label: Labeller) -> Labeller:
    need("tmux")
    name = recipe.name
    env = f"env -i HOME={work} TERM=xterm-256color LANG=C.UTF-8 PATH=/usr/bin:/bin PS1='$ ' MANPAGER=less PAGER=less "
    _tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", str(work), env + command)
    try:
        time.sleep(1.0)
        pane_pid = int(_tmux("display-message", "-p", "-t", name, "#{pane_pid}"))
        rec = record_pids(out, [pane_pid], recipe, recipe.duration_s, work / f"{name}.record.log")
        time.sleep(2.0)
        until = time.monotonic() + recipe.duration_s - 3
        rng = random.Random(name)
        while type_script(name, script, until, rng):
            pass
        rec.proc.wait(60)
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", name], capture_output=True, timeout=10)
    return label


def _prepare(work: Path) -> None:
    notes = work / "notes.txt"
    if not notes.exists():
        notes.write_text("".join(f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(400)))
    (work / "scratch.py").write_text("def f(x):\n    return x * 2\n")
    for i in range(4):  # a small linked site for the text browser
        links = "".join(f'<li><a href="page{j}.html">page {j}</a></li>' for j in range(4) if j != i)
        text = "".join(f"<p>paragraph {k} of page {i}: the quick brown fox jumps over the lazy dog</p>" for k in range(60))
        (work / f"page{i}.html").write_text(f"<html><body><h1>page {i}</h1><ul>{links}</ul>{text}</body></html>")


def _recipe(name: str, source: str, command: str, script: str, label: Labeller | None = None,
            apt: tuple[str, ...] = (), notes: str = "") -> Recipe:
    def run(recipe: Recipe, work: Path, out: Path) -> Labeller:
        _prepare(work)
        return _session(recipe, work, out, command, script, label or everything())
    return Recipe(name, "interactive", source, run, duration_s=75, apt=("tmux",) + apt, notes=notes)


SHELL = ("ls -l<Enter>~echo hello world<Enter>~pwd<Enter>~~cat notes.txt | head -5<Enter>~"
         "grep fox notes.txt | wc -l<Enter>~~date<Enter>~<Up><Up><Enter>~cd /tmp; ls | head<Enter>~cd -<Enter>~~"
         "echo $((6 * 7))<Enter>~history | tail -3<Enter>~<C-l>~")
VIM = ("<Down><Down><Down>~jjjj~ihello from the dataset recipe <Esc>~:w<Enter>~~"
       "<PgDn>~kkk~dd~u~oA new line typed slowly.<Esc>~~/fox<Enter>~n~n~cwcat<Esc>~:w<Enter>~~"
       "gg~<PgDn><PgDn>~A and more<Esc>~")
NANO = ("<Down><Down><Down><Down>~Adding a sentence here. ~<Enter>~<C-o><Enter>~~<PgDn>~<Down><Down>~"
        "more words to type <BS><BS>~<C-k>~<C-u>~~<C-w>fox<Enter>~<C-o><Enter>~~<PgUp>~<End> tail text~")
PYREPL = ("1 + 1<Enter>~import math<Enter>~math.sqrt(2)<Enter>~~[x * x for x in range(10)]<Enter>~"
          "def g(n):<Enter>    return sum(range(n))<Enter><Enter>~g(100)<Enter>~~"
          "d = {'a': 1}<Enter>~d['b'] = 2<Enter>~d<Enter>~~sorted('procsift')<Enter>~")
PAGER = ("<Space>~<Space>~j~j~j~k~~/fox<Enter>~n~n~<Space>~~b~<PgDn>~G~g~~/line 3<Enter>~n~<Space>~")
MAN = ("<Space>~<Space>~j~j~j~~/PATTERN<Enter>~n~n~<Space>~~b~<PgDn>~k~k~~/-v<Enter>~n~<Space>~g~")
NODEREPL = ("1 + 1<Enter>~const xs = [3, 1, 2]<Enter>~xs.sort()<Enter>~~Math.max(...xs)<Enter>~"
            "'procsift'.toUpperCase()<Enter>~~function f(n) { return n * 2 }<Enter>~f(21)<Enter>~~"
            "Object.keys({a: 1, b: 2})<Enter>~new Date().getFullYear()<Enter>~")
SQLITE = ("create table t(a, b);<Enter>~insert into t values (1, 'one');<Enter>~~"
          "insert into t values (2, 'two');<Enter>~select * from t;<Enter>~~.schema<Enter>~"
          "select count(*), sum(a) from t;<Enter>~~update t set b = 'uno' where a = 1;<Enter>~select b from t;<Enter>~")
BC = ("2 + 2<Enter>~scale = 10<Enter>~4 * a(1)<Enter>~~sqrt(2)<Enter>~x = 7<Enter>~x ^ 3<Enter>~~"
      "define f(n) { return n * n }<Enter>~f(12)<Enter>~~obase = 16<Enter>~255<Enter>~obase = 10<Enter>~")
TOP = ("~M~~P~<Down>~~1~~1~~T~~P~i~~i~")
LUA = ("1 + 1<Enter>~x = 10<Enter>~print(x * 2)<Enter>~~function f(n) return n * n end<Enter>~f(12)<Enter>~~"
       "t = {3, 1, 2}<Enter>~table.sort(t)<Enter>~print(table.concat(t, ','))<Enter>~~"
       "string.upper('procsift')<Enter>~math.sqrt(2)<Enter>~")
ED = ("1,5p<Enter>~/fox/<Enter>~s/fox/cat/p<Enter>~~$<Enter>~a<Enter>a line added in ed<Enter>.<Enter>~w<Enter>~~"
      "3d<Enter>~u<Enter>~10,12n<Enter>~~g/line 2/p<Enter>~w<Enter>~")
MC = ("<Down>~<Down><Down>~<Enter>~~<Down>~<Down>~<Tab>~<Down><Down>~~<F3>~<PgDn>~<Esc><Esc>~~<Tab>~<Up>~"
      "<Home>~<Enter>~~<End>~<Up><Up>~<Tab>~")
W3M = ("<Space>~<Space>~<Tab>~<Enter>~~<Space>~<Tab><Tab>~<Enter>~~B~<Space>~<PgDn>~/fox<Enter>~n~~B~<Tab>~"
       "<Enter>~<Space>~")
HTOP = ("<Down>~<Down>~<Down>~~<Up>~t~~t~<F6>~<Down><Down><Enter>~~<PgDn>~<PgUp>~<Down>~"
        "~~<F6><Enter>~<Down>~")
BTOP = ("<Down>~<Down><Down>~~<Right>~<Right>~~r~~e~<Down>~~e~<Left><Left>~~r~<Up>~<Up>~")
NMON = ("c~m~~t~~d~~m~k~~n~~c~d~~k~t~")

RECIPES: list[Recipe] = [
    _recipe("int-bash", "bash", "bash --norc --noprofile -i", SHELL,
            notes="an interactive bash; it and the commands typed into it are labelled"),
    _recipe("int-vim", "vim", "vim -u NONE -N notes.txt", VIM, apt=("vim",), notes="vim editing a 400-line file"),
    _recipe("int-nano", "nano", "nano notes.txt", NANO, apt=("nano",), notes="nano editing the same file"),
    _recipe("int-python", "python-repl", "/usr/bin/python3 -q", PYREPL, notes="the Python REPL"),
    _recipe("int-less", "less", "less notes.txt", PAGER, apt=("less",), notes="paging a file with less"),
    _recipe("int-man", "man", "man bash", MAN, label=by_comm("man", "less", "pager"), apt=("man-db",),
            notes="man bash paged with less; man and less labelled (not the groff pipeline)"),
    _recipe("int-htop", "htop", "htop -d 15", HTOP, apt=("htop",), notes="htop, refreshing every 1.5 s, "
            "navigated and re-sorted"),
    _recipe("int-node-repl", "node-repl", "node", NODEREPL, notes="the node REPL"),
    _recipe("int-sqlite3", "sqlite3", "sqlite3 scratch.db", SQLITE, apt=("sqlite3",),
            notes="the sqlite3 shell on a scratch database"),
    _recipe("int-bc", "bc", "bc -lq", BC, apt=("bc",), notes="the bc calculator"),
    _recipe("int-top", "top", "top -d 2", TOP, apt=("procps",), notes="top, refreshing every 2 s, re-sorted "
            "and toggled"),
    _recipe("int-lua", "lua", "lua5.4 -i", LUA, apt=("lua5.4",), notes="the Lua 5.4 REPL"),
    _recipe("int-ed", "ed", "ed -p '*' notes.txt", ED, apt=("ed",), notes="the ed line editor on the 400-line file"),
    _recipe("int-mc", "mc", "mc -u --nomouse", MC, apt=("mc",),
            notes="Midnight Commander (no subshell) browsing and viewing files"),
    _recipe("int-w3m", "w3m", "w3m page0.html", W3M, apt=("w3m",),
            notes="the w3m text browser following links through four local pages"),
    _recipe("int-btop", "btop", "btop", BTOP, apt=("btop",), notes="btop, refreshing every 2 s, its process "
            "list scrolled, re-sorted and shown as a tree"),
    _recipe("int-nmon", "nmon", "nmon", NMON, apt=("nmon",), notes="nmon, refreshing every 2 s, its CPU, memory, "
            "disk, kernel, network and top-process panels toggled"),
]

# The same programs on a busy machine: three CPU contenders at normal priority beside them
# (recipes/_run.py, contenders()), so that waiting for a CPU is seen under every label.
RECIPES += variants(RECIPES, ("int-bash", "int-vim", "int-python", "int-htop"), contended)
