# Sourced, not run, by the serve_* reproducers here (each passes its own "$@"): starts `$1 serve`
# (the built leakgate) on one rule, "" = "1000/s", with a RESP listener on a free loopback port,
# and sets L (the binary), D (a temporary folder), S (the service's pid) and PORT. At exit the
# service is killed and the folder removed.
L=$1; D=$(mktemp -d); trap 'kill $S 2>/dev/null; wait 2>/dev/null; rm -rf $D' EXIT
printf '"" = "1000/s"\n' > $D/rules.toml
$L serve --rules $D/rules.toml --resp 127.0.0.1:0 > $D/out 2>$D/err & S=$!
for i in $(seq 1 100); do grep -q '^resp ' $D/out && break; sleep 0.1; done
PORT=$(sed -n 's/^resp .*:\([0-9]*\)$/\1/p' $D/out)
