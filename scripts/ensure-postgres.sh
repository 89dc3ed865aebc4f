#!/usr/bin/env bash
# Installs PostgreSQL (the Debian package `postgresql`) if it is missing: leakgate-jobs's tests,
# its benchmark and the CLI's jobs tests start their own servers (initdb in a temporary
# directory, a free loopback port, as the `postgres` user when run as root) and stop them when
# they end. Needs root (CI runs as root).
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
    exit 0
fi
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install postgresql
# The package may start a system cluster on 5432; the tests never use it, so stop it.
stop_service postgresql
ls /usr/lib/postgresql/*/bin/initdb
