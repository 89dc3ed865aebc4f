#!/usr/bin/env python3
"""What a new CL.THROTTLE quota costs when many keys are tracked, and what the others see meanwhile.

Usage: python3 serve/bench/scale.py path/to/leakgate [keys] [new_quotas]

Starts `leakgate serve --resp --http` on free ports, fills it with `keys` CL.THROTTLE keys
(pipelined, spread over 8 quotas of 1 per day, 65,536 keys each at most, as the service before
one-bucket-per-key needed), then, from one connection, sends `new_quotas` CL.THROTTLE calls each
with a quota never seen before, one at a time, while a second connection checks existing keys
one at a time. Prints: the time of each new-quota call (median, max), the check latencies
meanwhile (p50, p99, max), and the time (and the service's CPU time) of GET /buckets (default
page) and GET /buckets?limit=1.
Needs only python3.
"""
import os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time, urllib.request

binary = sys.argv[1]
keys = int(sys.argv[2]) if len(sys.argv) > 2 else 524288
new_quotas = int(sys.argv[3]) if len(sys.argv) > 3 else 20

def enc(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)

def read_replies(s, n, buf):
    """Reads n whole CL.THROTTLE replies (6 lines each) or errors (1 line); returns the rest."""
    got = 0
    while True:
        while got < n:
            if buf.startswith(b"*5\r\n"):
                parts = buf.split(b"\r\n", 6)
                if len(parts) < 7:
                    break
                buf = parts[6]
            elif buf.startswith(b"-") and b"\r\n" in buf:
                buf = buf.split(b"\r\n", 1)[1]
            else:
                break
            got += 1
        if got == n:
            return buf
        buf += s.recv(1 << 20)

d = tempfile.mkdtemp()
rules = os.path.join(d, "rules.toml")
open(rules, "w").write('"" = "1000/s"\n')
serve = subprocess.Popen([binary, "serve", "--rules", rules, "--resp", "127.0.0.1:0", "--http", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    addrs = dict(serve.stdout.readline().split() for _ in range(2))
    rport = int(addrs["resp"].rsplit(":", 1)[1])
    http = addrs["http"]
    s = socket.create_connection(("127.0.0.1", rport)); s.settimeout(120)
    t0 = time.time()
    buf = b""
    per_quota = 65536
    batch = 512
    for start in range(0, keys, batch):
        n = min(batch, keys - start)
        cmds = []
        for i in range(start, start + n):
            period = b"%d" % (86400 + i // per_quota)
            cmds.append(enc(b"CL.THROTTLE", b"user:%08d" % i, b"10", b"1", period))
        s.sendall(b"".join(cmds))
        buf = read_replies(s, n, buf)
    fill_s = time.time() - t0
    rss = next(int(l.split()[1]) // 1024 for l in open(f"/proc/{serve.pid}/status") if l.startswith("VmRSS"))
    print(f"filled {keys} keys in {fill_s:.1f} s; RSS {rss} MiB")

    stop = threading.Event()
    lat = []
    def checker():
        c = socket.create_connection(("127.0.0.1", rport)); c.settimeout(120)
        b = b""
        i = 0
        while not stop.is_set():
            k = b"user:%08d" % ((i * 7919) % keys)
            period = b"%d" % (86400 + ((i * 7919) % keys) // per_quota)
            t = time.perf_counter()
            c.sendall(enc(b"CL.THROTTLE", k, b"10", b"1", period, b"0"))
            b = read_replies(c, 1, b)
            lat.append(time.perf_counter() - t)
            i += 1
    th = threading.Thread(target=checker); th.start()
    time.sleep(0.5)
    made = []
    for q in range(new_quotas):
        t = time.perf_counter()
        s.sendall(enc(b"CL.THROTTLE", b"new:%d" % q, b"5", b"%d" % (q + 2), b"7"))
        buf = read_replies(s, 1, buf)
        made.append(time.perf_counter() - t)
    time.sleep(0.5)
    stop.set(); th.join()
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
    print(f"new quota: median {statistics.median(made)*1000:.2f} ms, max {max(made)*1000:.2f} ms over {new_quotas}")
    print(f"checks meanwhile: {len(lat)}, p50 {pct(0.5):.3f} ms, p99 {pct(0.99):.3f} ms, max {lat[-1]*1000:.2f} ms")
    def cpu_ms():
        fields = open(f"/proc/{serve.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    for path in ["/buckets", "/buckets?limit=1"]:
        times, cpus = [], []
        for _ in range(5):
            c, t = cpu_ms(), time.perf_counter()
            body = urllib.request.urlopen(f"http://{http}{path}", timeout=120).read()
            times.append(time.perf_counter() - t)
            cpus.append(cpu_ms() - c)
        print(f"GET {path}: median {statistics.median(times)*1000:.1f} ms "
              f"(service CPU {statistics.median(cpus):.0f} ms), {len(body)} bytes")
finally:
    serve.terminate(); serve.wait()
    shutil.rmtree(d)
