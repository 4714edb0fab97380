#!/usr/bin/env bash
# Bootstrap Wrack from nothing: Debian packages (deploy/debian-packages.txt), .venv, Python deps.
# Idempotent and quick when nothing changed (a stamp in .venv records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS_FILE=deploy/debian-packages.txt
VENV=.venv
STAMP=$VENV/.wrack-setup-stamp

want=$(sha256sum pyproject.toml "$PKGS_FILE" scripts/setup.sh | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/wrack" ]; then
  exit 0
fi

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
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  echo "setup: not a Debian system; install the packages of $PKGS_FILE by hand" >&2
fi

# 2. The virtualenv and the Python dependencies (the project itself, editable, with dev tools).
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $($PY --version 2>&1)"
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
echo "setup: installing Python dependencies into $VENV"
"$VENV/bin/python" -m pip install -q -e '.[harness,dev]'
echo "$want" > "$STAMP"
echo "setup: done"
