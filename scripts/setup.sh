#!/usr/bin/env bash
# Bootstrap Wrack from nothing: Debian packages (deploy/debian-packages.txt), .venv, Python deps.
# Idempotent and quick when nothing changed (a stamp in .venv records what was installed).
# Quiet: one line per step; the package tools' output goes to a log file ($WRACK_SETUP_LOG,
# default /tmp/wrack-setup.log), which a failed step names.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS_FILE=deploy/debian-packages.txt
VENV=.venv
STAMP=$VENV/.wrack-setup-stamp
LOG=${WRACK_SETUP_LOG:-/tmp/wrack-setup.log}

# step WHAT CMD...: one line for the step; CMD's output to $LOG; on failure the log is named.
step() {
  local what=$1; shift
  echo "== $what" >>"$LOG"
  if "$@" >>"$LOG" 2>&1; then
    echo "setup: $what"
  else
    echo "setup: $what FAILED (exit $?); its output: $LOG" >&2
    exit 1
  fi
}

want=$(sha256sum pyproject.toml "$PKGS_FILE" scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/wrack" ]; then
  exit 0
fi
: >"$LOG"

# 1. Debian packages: install only the missing ones.
if command -v dpkg-query >/dev/null 2>&1; then
  missing=()
  while read -r pkg; do
    [ -z "$pkg" ] && continue
    case "$pkg" in \#*) continue;; esac
    st=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [ "$st" = "install ok installed" ] || missing+=("$pkg")
  done < <(sed 's/#.*//; s/[[:space:]]//g' "$PKGS_FILE")
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    step "apt-get update" $SUDO apt-get update -qq
    step "Debian packages: ${missing[*]}" $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
else
  echo "setup: not a Debian system; install the packages of $PKGS_FILE by hand" >&2
fi

# 2. The virtualenv and the Python dependencies (the project itself, editable, with dev tools).
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  step "$VENV with $($PY --version 2>&1)" "$PY" -m venv "$VENV"
fi
step "pip upgraded" "$VENV/bin/python" -m pip install -q --upgrade pip
step "Python dependencies in $VENV" "$VENV/bin/python" -m pip install -q -e '.[harness,dev]'
echo "$want" > "$STAMP"
echo "setup: done (tools' output: $LOG)"
