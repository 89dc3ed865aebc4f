#!/usr/bin/env bash
# Installs PostgreSQL (the Debian package `postgresql`) if it is missing: leakgate-jobs's tests,
# its benchmark and the CLI's jobs tests start their own servers (initdb in a temporary
# directory, a free loopback port, as the `postgres` user when run as root) and stop them when
# they end. Needs root (CI runs as root).
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
    exit 0
fi
echo "== installing postgresql (apt-get)"
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package may start a system cluster on 5432; the tests never use it, so stop it.
if command -v service >/dev/null 2>&1; then $sudo service postgresql stop >/dev/null 2>&1 || true; fi
ls /usr/lib/postgresql/*/bin/initdb
