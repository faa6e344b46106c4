#!/usr/bin/env bash
# One idempotent set-up for `make test` and `make run` on a fresh Debian machine:
# apt packages for bcc and kernel headers, the header link and tracefs mount that
# bcc needs here (../shared/DESIGN.md, "Setting up bcc"), a venv that imports bcc,
# and the Python dependencies. Prints what it did; a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
# Debian packages: bcc's Python bindings and tools, kernel headers for bcc's
# compiler, and the real programs the tests and benchmarks drive.
APT_PACKAGES=(python3-bpfcc bpfcc-tools linux-headers-amd64 python3-venv)
# Headless Chromium for the dashboard test (driven by Playwright; never downloaded by it).
APT_PACKAGES+=(chromium)
APT_PACKAGES+=(${EXTRA_APT_PACKAGES:-})

did() { printf 'setup: %s\n' "$*"; }
is_root() { [ "$(id -u)" -eq 0 ]; }

# 1. apt packages (only the missing ones; 'apt-get update' once, when needed).
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if is_root; then
    did "installing apt packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    did "not root: cannot install ${missing[*]} (only the /proc fallback collector will work)"
  fi
fi

# 2. Kernel headers for the running kernel: Debian's work for tracepoint
#    programs once linked where bcc looks for them.
KREL=$(uname -r)
if is_root && [ ! -e "/lib/modules/$KREL/build/include" ]; then
  hdr=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)
  common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$hdr" ]; then
    mkdir -p "/lib/modules/$KREL"
    ln -sfn "$hdr" "/lib/modules/$KREL/build"
    [ -n "$common" ] && ln -sfn "$common" "/lib/modules/$KREL/source"
    did "linked kernel headers $hdr -> /lib/modules/$KREL/build"
  fi
fi

# 3. tracefs, where bcc finds tracepoints.
if is_root && [ -d /sys/kernel/tracing ] && [ -z "$(ls -A /sys/kernel/tracing 2>/dev/null)" ]; then
  mount -t tracefs tracefs /sys/kernel/tracing && did "mounted tracefs on /sys/kernel/tracing"
fi

# 4. The venv. bcc's bindings are pure Python over libbcc and come only from
#    Debian, so a .pth puts just that one package (not all of dist-packages) on
#    the venv's path.
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  did "created venv $VENV with $("$VENV/bin/python" --version)"
fi
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -d /usr/lib/python3/dist-packages/bcc ] && [ ! -e "$VENV/bcc-only/bcc" ]; then
  mkdir -p "$VENV/bcc-only"
  ln -sfn /usr/lib/python3/dist-packages/bcc "$VENV/bcc-only/bcc"
  echo "$(cd "$VENV" && pwd)/bcc-only" > "$site/procsift-bcc.pth"
  did "made bcc importable in the venv"
fi

# 5. Python dependencies, reinstalled only when pyproject.toml changes.
stamp="$VENV/.procsift-deps"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  did "installing procsift and its Python dependencies into $VENV"
  # pip and the build backend talk a lot (setuptools' notice on every editable install):
  # keep it in a log, and show it only when the install fails.
  log="$VENV/pip-install.log"
  if ! { "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
         "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev]"; } >"$log" 2>&1; then
    cat "$log" >&2
    did "pip install failed (log above, also in $log)"
    exit 1
  fi
  echo "$want" > "$stamp"
fi

if "$VENV/bin/python" -c 'import bcc' 2>/dev/null; then bcc_state="bcc importable"; else bcc_state="bcc NOT importable (fallback collector only)"; fi
did "ready ($bcc_state)"
