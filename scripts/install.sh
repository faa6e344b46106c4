#!/usr/bin/env bash
# `make install` / `make uninstall`: procsift as a system service, from a wheel.
#
#   scripts/install.sh install [WHEEL]   build the wheel (python -m build) unless given, then
#                                        install it into its own venv and put the rest in place
#   scripts/install.sh uninstall         remove what install put there
#   scripts/install.sh paths | unit      print where things would go / the unit it would write
#
# Where things go (ROOT="" is the real machine; tests install under a temporary ROOT, and
# every path written into the unit then points inside it, so the installed copy runs there):
#   $ROOT/opt/procsift              the venv (Debian's python3, bcc importable through a .pth)
#   $ROOT/usr/local/bin/procsift    a link to the venv's procsift
#   $ROOT/etc/procsift/policy.toml  the policy the service reads (a changed one is never overwritten)
#   $ROOT/etc/systemd/system/procsift.service   the unit, made from distributor/procsift.service
#   $ROOT/usr/local/share/doc/procsift/         README.md (the unit's Documentation=)
# Each can be moved on its own: OPT_DIR, BIN_DIR, ETC_DIR, UNIT_DIR, DOC_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=${ROOT:-}
ROOT=${ROOT%/}
OPT_DIR=${OPT_DIR:-$ROOT/opt/procsift}
BIN_DIR=${BIN_DIR:-$ROOT/usr/local/bin}
ETC_DIR=${ETC_DIR:-$ROOT/etc/procsift}
UNIT_DIR=${UNIT_DIR:-$ROOT/etc/systemd/system}
DOC_DIR=${DOC_DIR:-$ROOT/usr/local/share/doc/procsift}
PYTHON=${PYTHON:-/usr/bin/python3}   # Debian's: the one python3-bpfcc is packaged for
BUILD_PY=${BUILD_PY:-.venv/bin/python}
PURGE=${PURGE:-}
MARK="$OPT_DIR/.procsift-install"   # marks a venv this script made (uninstall removes only that)
POLICY_STAMP="$OPT_DIR/.policy.sha256"   # hash of the policy this script last put in /etc

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
systemd_running() { [ -z "$ROOT" ] && [ -d /run/systemd/system ]; }

build_wheel() {
  # sdist first, then the wheel from the sdist: what a packager does, so a file the sdist
  # forgets is missing from the wheel too. --no-isolation: the dev venv has the backend.
  mkdir -p dist && rm -f dist/procsift-*.whl dist/procsift-*.tar.gz
  "$BUILD_PY" -m build --no-isolation --outdir dist . >dist/build.log 2>&1 ||
    { cat dist/build.log >&2; die "python -m build failed (log: dist/build.log)"; }
  ls "$PWD"/dist/procsift-*.whl
}

install_policy() {
  local src=$1 dst="$ETC_DIR/policy.toml"
  mkdir -p "$ETC_DIR"
  if [ ! -e "$dst" ]; then
    install -m 644 "$src" "$dst"
    say "policy: installed $dst"
  elif [ "$(sha "$dst")" = "$(sha "$src")" ]; then
    say "policy: $dst is the shipped default already"
  elif [ "$(sha "$dst")" = "$(cat "$POLICY_STAMP" 2>/dev/null)" ]; then
    install -m 644 "$src" "$dst"
    say "policy: $dst was the previous default, unchanged: replaced by the new one"
  else
    install -m 644 "$src" "$dst.new"
    say "policy: kept your changed $dst; the shipped default is in $dst.new"
    return
  fi
  sha "$dst" >"$POLICY_STAMP"
}

render_unit() {
  # The shipped unit names the default locations; point them at this install's.
  sed -e "s#/usr/bin/env procsift#$OPT_DIR/bin/procsift#g" \
      -e "s#/etc/procsift/#$ETC_DIR/#g" \
      -e "s#/usr/local/share/doc/procsift/#$DOC_DIR/#g" "$1"
}

install_unit() {
  local src=$1 dst="$UNIT_DIR/procsift.service"
  mkdir -p "$UNIT_DIR"
  render_unit "$src" >"$dst.tmp"
  chmod 644 "$dst.tmp"
  mv "$dst.tmp" "$dst"
  if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$dst" || die "systemd-analyze verify refused $dst"
    say "unit: installed $dst (systemd-analyze verify: ok)"
  else
    say "unit: installed $dst (systemd-analyze not found: not verified)"
  fi
}

do_install() {
  local wheel=${1:-}
  [ -n "$wheel" ] || wheel=$(build_wheel)
  [ -f "$wheel" ] || die "no wheel at $wheel"
  say "wheel: $wheel"
  if [ -e "$OPT_DIR" ] && [ ! -e "$MARK" ]; then
    die "$OPT_DIR exists and was not made by this script; move it away or set OPT_DIR"
  fi
  if [ ! -x "$OPT_DIR/bin/python" ]; then
    "$PYTHON" -m venv "$OPT_DIR"
    touch "$MARK"
    say "venv: created $OPT_DIR ($("$OPT_DIR/bin/python" --version))"
  fi
  # bcc's bindings come only from Debian (python3-bpfcc): put just that package on the path.
  local site
  site=$("$OPT_DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ -d /usr/lib/python3/dist-packages/bcc ]; then
    mkdir -p "$OPT_DIR/bcc-only"
    ln -sfn /usr/lib/python3/dist-packages/bcc "$OPT_DIR/bcc-only/bcc"
    echo "$OPT_DIR/bcc-only" >"$site/procsift-bcc.pth"
  else
    say "bcc: python3-bpfcc is not installed; the service will use the /proc collector"
  fi
  local log="$OPT_DIR/pip-install.log"
  # Dependencies first, then this wheel again even if the version did not change.
  { "$OPT_DIR/bin/python" -m pip install -q --disable-pip-version-check "$wheel" &&
    "$OPT_DIR/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"; } \
    >"$log" 2>&1 || { cat "$log" >&2; die "pip install failed (log: $log)"; }
  say "venv: $("$OPT_DIR/bin/procsift" --version) in $OPT_DIR"
  mkdir -p "$BIN_DIR"
  ln -sfn "$OPT_DIR/bin/procsift" "$BIN_DIR/procsift"
  say "link: $BIN_DIR/procsift -> $OPT_DIR/bin/procsift"
  local pkg
  pkg=$("$OPT_DIR/bin/python" -c 'import pathlib, procsift.distributor as d; print(pathlib.Path(d.__file__).parent)')
  install_policy "$pkg/default-policy.toml"
  "$OPT_DIR/bin/procsift" check-policy "$ETC_DIR/policy.toml" >/dev/null
  mkdir -p "$DOC_DIR"
  install -m 644 README.md "$DOC_DIR/README.md"
  install_unit "$pkg/procsift.service"
  if systemd_running; then
    systemctl daemon-reload
    say "start it with: systemctl enable --now procsift"
  else
    say "systemd is not running here: the unit is installed but not loaded"
  fi
}

do_uninstall() {
  if systemd_running; then
    systemctl disable --now procsift 2>/dev/null || true
  fi
  local unit="$UNIT_DIR/procsift.service"
  if [ -e "$unit" ]; then
    grep -q "procsift" "$unit" && rm -f "$unit" && say "removed $unit"
  fi
  systemd_running && systemctl daemon-reload
  if [ -L "$BIN_DIR/procsift" ] && [ "$(readlink "$BIN_DIR/procsift")" = "$OPT_DIR/bin/procsift" ]; then
    rm -f "$BIN_DIR/procsift" && say "removed $BIN_DIR/procsift"
  fi
  rm -rf "$DOC_DIR"
  local policy="$ETC_DIR/policy.toml"
  rm -f "$policy.new"
  if [ -e "$policy" ]; then
    if [ "$(sha "$policy")" = "$(cat "$POLICY_STAMP" 2>/dev/null)" ]; then
      rm -f "$policy" && say "removed $policy (unchanged)"
    else
      say "kept $policy: it was changed after install (delete it yourself if you no longer want it)"
    fi
  fi
  rmdir "$ETC_DIR" 2>/dev/null || true
  if [ -e "$MARK" ]; then
    rm -rf "$OPT_DIR" && say "removed $OPT_DIR"
  elif [ -e "$OPT_DIR" ]; then
    say "left $OPT_DIR: not made by this script"
  fi
  local state="$ROOT/var/lib/procsift"
  if [ -n "$PURGE" ]; then
    rm -rf "$state" && say "removed $state (PURGE)"
  elif [ -e "$state" ]; then
    say "left $state (journal, API token); 'make uninstall PURGE=1' removes it too"
  fi
}

case "${1:-}" in
  install) do_install "${2:-}" ;;
  uninstall) do_uninstall ;;
  # What an install here would write, without writing it (the tests check the default paths).
  paths) printf 'OPT_DIR=%s\nBIN_DIR=%s\nETC_DIR=%s\nUNIT_DIR=%s\nDOC_DIR=%s\n' \
           "$OPT_DIR" "$BIN_DIR" "$ETC_DIR" "$UNIT_DIR" "$DOC_DIR" ;;
  unit) render_unit distributor/procsift.service ;;
  *) die "usage: scripts/install.sh install [WHEEL] | uninstall | paths | unit" ;;
esac
