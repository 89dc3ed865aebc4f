#!/usr/bin/env bash
# Installs redis-server (the Debian package, which brings redis-cli) if it is missing:
# leakgate-redis's tests and benchmark start their own servers on loopback ports, and its cluster
# tests join six of them with `redis-cli --cluster create`. Needs root (CI runs as root).
set -euo pipefail
has() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/bin/$1" ]; }
if has redis-server && has redis-cli; then
    echo "== redis-server is installed: $(PATH="$PATH:/usr/bin" redis-server --version)"
    exit 0
fi
# apt_install (scripts/apt-install.sh) runs apt-get install redis-server, as root or through sudo.
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install redis-server
# The package may start a system server on 6379; the tests never use it, so stop it.
stop_service redis-server
redis-server --version
