#!/usr/bin/env bash
# Installs what leakgate-serve's tests drive as real clients, if missing: redis-cli (Debian
# package redis-tools) and headless Chromium (package chromium), for the page test. Needs root
# (CI runs as root); elsewhere through sudo.
set -euo pipefail
missing=()
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then missing+=(chromium); fi
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install "${missing[@]}"
