# Sourced by the scripts/ensure-*.sh installers and ffi/tests/c/run.sh: `apt_install PACKAGE...`
# installs Debian packages quietly (as root in CI, elsewhere through sudo), and `stop_service
# NAME` stops a system service a package may have started (the tests start their own servers on
# free loopback ports).

# Runs its command as root: directly when this is root, through sudo otherwise.
as_root() {
    if [ "$(id -u)" != 0 ]; then sudo "$@"; else "$@"; fi
}

apt_install() {
    echo "== installing $* (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

stop_service() {
    if command -v service >/dev/null 2>&1; then as_root service "$1" stop >/dev/null 2>&1 || true; fi
}
