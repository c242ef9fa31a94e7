"""chaos - a bounded soak: random SIGKILLs of every kind of speech-fetch process while a
fault-injecting proxy (faultproxy.py) sits between them and the test Hub.

Rounds alternate between embedded downloads (two `speech download` callers of one repo, each
running the engine itself) and daemon-hosted ones (a `speech-fetchd`, its workers, two callers
and a `speech wait`). While a round runs, a random live process of the round is SIGKILLed every
so often; a killed caller, waiter or supervisor is started again (as a user or systemd would).
A watcher hashes every file the moment it appears under a final path: a corrupt file must never
be visible there, not even for an instant. At the end of each round every file is compared with
the Hub's copy and `speech cache verify` must pass.

Prints kills by kind, faults by kind, and the ratio of file-body bytes the proxy carried to the
bytes of the files (1.0 = each byte once), with where the bytes beyond each byte once went
(`ByteLedger`). Exit 0 when every check held.

With --xet the test Hub serves the repo's LFS file through Xet (`--xet-repo`): the callers and
the daemon's workers fetch its reconstruction and xorb ranges through the proxy, and a SIGKILL
lands mid-file. Its ratio is then of xorb bytes: the xorb bodies' bytes the proxy wrote to
clients' sockets (`xorbServedRatio`: what the Hub served; a body cut by a kill counts what was
written before the kill) and of those the clients' kernels acknowledged (`xorbAckedRatio`),
against the file's bytes once per round (each round has a fresh cache base: nothing is shared
between rounds). `--max-ratio` bounds the served ratio. No byte is flipped on the Xet path: a
flipped stored chunk fails the file after one fresh refetch by design (XetDownloadTests,
XetDaemonTests), and a chunk in transit is TLS's to protect.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from common import free_ports, sha256_file as sha256  # noqa: E402
from faultproxy import FAULT_KINDS, FaultProxy  # noqa: E402

REPO = "chaos/model"
FILES = {  # repo path -> size; the .safetensors goes in ranges, the others whole
    "model.safetensors": 48 << 20,
    "tokenizer.json": 700_000,      # a git file (below 1 MiB, not an LFS extension)
    "small.txt": 300_000,           # a git file
    "config.json": 2_000,
}


XET_FILE = "model.safetensors"  # the one LFS file: Xet-backed with --xet


def count_xorbs(tally, bodies):
    """Adds the xorb bodies among `bodies` (faultproxy's log) to `tally`: bytes written, acknowledged."""
    for e in bodies:
        if e["file"].startswith("xorb:"):
            tally["sent"] += e["sent"]
            tally["acked"] += e["acked"]


def say(msg):
    print(f"chaos: {msg}", file=sys.stderr, flush=True)


class Watcher(threading.Thread):
    """Hashes each final file whenever it appears or changes; records any that is not the Hub's."""

    def __init__(self, expected):
        super().__init__(daemon=True)
        self.expected = expected  # repo path -> sha256
        self.models = None
        self.seen = {}
        self.checked = 0
        self.corrupt = []
        self.stop = False

    def run(self):
        while not self.stop:
            models = self.models
            if models and os.path.isdir(models):
                for path, digest in self.expected.items():
                    final = os.path.join(models, path)
                    try:
                        st = os.stat(final)
                    except OSError:
                        continue
                    key = (st.st_ino, st.st_size, st.st_mtime_ns)
                    if self.seen.get(final) == key:
                        continue
                    self.seen[final] = key
                    try:
                        actual = sha256(final)
                    except OSError:
                        continue
                    self.checked += 1
                    if actual != digest:
                        self.corrupt.append(final)
                        say(f"CORRUPT FILE VISIBLE under its final path: {final}")
            time.sleep(0.02)


class ByteLedger:
    """Where the served bytes went. Per round and file, each body's bytes are either served the
    first time that round (`first`, at most the file) or again (`again`): again after a body of
    that file with a flipped byte had been served that round (`againAfterFlip`: the client's
    digest check failed and it fetched again: the cost of a flip) or with no flip before
    (`againOther`: kills, cut bodies). Across both, `unacked` counts bytes written to a client's
    socket that its kernel never acknowledged (a reset threw them away, or the client was killed
    before its kernel took them); `flipped` the bytes of the flipped bodies themselves."""

    KEYS = ("first", "againAfterFlip", "againOther", "unacked", "flipped")

    def __init__(self):
        self.totals = dict.fromkeys(self.KEYS, 0)
        self.flips = {}  # file -> flipped bodies

    def add_round(self, entries):
        row = dict.fromkeys(self.KEYS, 0)
        by_file = {}
        for e in sorted(entries, key=lambda e: e["began"]):
            by_file.setdefault(e["file"], []).append(e)
        for path, bodies in by_file.items():
            covered = []  # sorted, disjoint [a, b)
            flips_ended = []
            for e in bodies:
                a, b = e["start"], e["start"] + e["sent"]
                new = b - a - overlap(covered, a, b)
                covered = merge(covered, a, b)
                row["first"] += new
                row["againAfterFlip" if any(t <= e["began"] for t in flips_ended) else "againOther"] += e["sent"] - new
                row["unacked"] += e["sent"] - e["acked"]
                if e["fault"] == "flip":
                    row["flipped"] += e["sent"]
                    flips_ended.append(e["ended"])
                    self.flips[path] = self.flips.get(path, 0) + 1
        for k in self.KEYS:
            self.totals[k] += row[k]
        return row


def overlap(intervals, a, b):
    return sum(max(0, min(b, y) - max(a, x)) for x, y in intervals)


def merge(intervals, a, b):
    out = []
    for x, y in intervals:
        if y < a or x > b:
            out.append((x, y))
        else:
            a, b = min(a, x), max(b, y)
    out.append((a, b))
    return sorted(out)


def processes_under(base):
    """(pid, kind) of every live process whose command line names this cache base."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{entry}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    continue
        except OSError:
            continue
        if not any(base in a for a in argv):
            continue
        if "--worker" in argv:
            kind = "worker"
        elif "download" in argv:
            kind = "caller"
        elif "wait" in argv:
            kind = "waiter"
        elif any(a.endswith("speech-fetchd") for a in argv[:1]) or "--cache-base" == argv[1:2] or "speech-fetchd" in argv[0]:
            kind = "supervisor"
        else:
            continue
        found.append((int(entry), kind))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="directory with speech, speech-fetchd, speech-testhub")
    ap.add_argument("--kills", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=20, help="at least this many rounds; more until --kills is reached")
    ap.add_argument("--max-rounds", type=int, default=200)
    ap.add_argument("--fault-rate", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--round-timeout", type=float, default=180)
    ap.add_argument("--max-ratio", type=float, default=None, help="fail when served/needed bytes exceed this")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--xet", action="store_true", help="serve the LFS file through Xet; the ratio is of xorb bytes")
    a = ap.parse_args()

    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="speech-fetch-chaos.")
    say(f"seed {a.seed}, work directory {work}")
    hub_root = os.path.join(work, "hub")
    os.makedirs(hub_root)
    hub_port, cdn_port = free_ports(2)
    spec = ",".join(f"{p}={s}" for p, s in FILES.items())
    hub = subprocess.Popen([os.path.join(a.bin, "speech-testhub"), "--root", hub_root, "--port", str(hub_port),
                            "--cdn-port", str(cdn_port), "--cdn-host", "127.0.0.1",  # the proxy reaches and rewrites 127.0.0.1
                            "--generate", f"{REPO}:{spec}"] + (["--xet-repo", REPO] if a.xet else []),
                           stdout=subprocess.PIPE, stderr=open(os.path.join(work, "testhub.log"), "w"))
    hub.stdout.readline()
    expected = {p: sha256(os.path.join(hub_root, REPO, p)) for p in FILES}
    kinds = tuple(k for k in FAULT_KINDS if not (a.xet and k == "flip"))
    proxy = FaultProxy(hub_port, cdn_port, a.fault_rate, a.seed, stall_seconds=3.0, kinds=kinds)
    xorb = {"sent": 0, "acked": 0, "needed": 0}  # --xet: xorb bodies' bytes
    env = dict(os.environ,
               HF_ENDPOINT=proxy.base,
               HF_TOKEN="",
               HF_HUB_OFFLINE="0",
               HF_DOWNLOAD_RANGE_CHUNK=str(4 << 20),
               HF_DOWNLOAD_STALL_TIMEOUT="2",
               SPEECH_FETCH_RETRY_ATTEMPTS="12",
               SPEECH_FETCH_RETRY_DELAYS="0.1,0.2,0.5",
               SPEECH_FETCH_LEASE_SECONDS="3",
               SPEECH_FETCH_POLL_SECONDS="1")
    env.pop("HF_TOKEN")
    speech = os.path.join(a.bin, "speech")
    fetchd = os.path.join(a.bin, "speech-fetchd")

    watcher = Watcher(expected)
    watcher.start()
    ledger = ByteLedger()
    events = []  # kills of the current round, with their time (monotonic, as the proxy's log)
    kills = {"caller": 0, "waiter": 0, "supervisor": 0, "worker": 0}
    restarts = 0
    failures = []   # non-zero exits that were not our kills: (round, what, stderr tail)
    problems = []
    needed_bytes = 0
    started = time.time()
    kills_per_round = max(1, -(-a.kills // a.rounds))

    try:
        r = -1
        while True:
            r += 1
            if r >= a.max_rounds or (r >= a.rounds and sum(kills.values()) >= a.kills):
                break
            daemon = r % 2 == 1
            base = os.path.join(work, f"base{r}")
            os.makedirs(base)
            models = os.path.join(base, "models", REPO)
            watcher.models = models
            logs = os.path.join(work, f"round{r}")
            os.makedirs(logs)
            counter = [0]

            def start(argv, name):
                counter[0] += 1
                err = open(os.path.join(logs, f"{name}.{counter[0]}.log"), "w")
                return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=err, start_new_session=True), err.name

            roles = {}  # name -> (argv, Popen, log, done)
            if daemon:
                roles["supervisor"] = [[fetchd, "--cache-base", base], None, None, False]
            roles["caller1"] = [[speech, "download", REPO, "--cache-base", base], None, None, False]
            roles["caller2"] = [[speech, "download", REPO, "--cache-base", base], None, None, False]
            for name, role in roles.items():
                role[1], role[2] = start(role[0], name)
                if name == "supervisor":
                    time.sleep(0.5)
            if daemon:
                time.sleep(0.3)
                roles["waiter"] = [[speech, "wait", REPO, "--cache-base", base], None, None, False]
                roles["waiter"][1], roles["waiter"][2] = start(roles["waiter"][0], "waiter")
            round_kills = 0
            deadline = time.time() + a.round_timeout
            next_kill = time.time() + rng.uniform(0.2, 1.0)
            killed_pids = set()
            while True:
                clients = [n for n in roles if n != "supervisor"]
                if all(roles[n][3] for n in clients):
                    break
                if time.time() > deadline:
                    problems.append(f"round {r}: not complete after {a.round_timeout:.0f} s (logs in {logs})")
                    break
                if round_kills < kills_per_round and time.time() >= next_kill and sum(kills.values()) < a.kills:
                    live = [(pid, kind) for pid, kind in processes_under(base)]
                    if live:
                        pid, kind = rng.choice(live)
                        try:
                            os.kill(pid, signal.SIGKILL)
                            killed_pids.add(pid)
                            kills[kind] += 1
                            round_kills += 1
                            events.append({"round": r, "kill": kind, "at": time.monotonic()})
                        except ProcessLookupError:
                            pass
                    next_kill = time.time() + rng.uniform(0.2, 1.2)
                for name, role in roles.items():
                    argv, proc, log, done = role
                    if done or proc.poll() is None:
                        continue
                    rc = proc.returncode
                    if name != "supervisor" and rc == 0:
                        role[3] = True
                        continue
                    if rc != -signal.SIGKILL or proc.pid not in killed_pids:
                        with open(log) as f:
                            tail = f.read()[-400:].strip().replace("\n", " | ")
                        failures.append((r, name, rc, tail))
                        events.append({"round": r, "exit": name, "rc": rc, "at": time.monotonic(), "tail": tail[-160:]})
                    if name == "waiter" and rc == 1 and "nothing is requested" in tail:
                        # The request was already settled and cleaned up: ask the cache instead.
                        pass
                    restarts += 1
                    role[1], role[2] = start(argv, name)
                time.sleep(0.05)
            if "supervisor" in roles:
                sup = roles["supervisor"][1]
                if sup.poll() is None:
                    sup.send_signal(signal.SIGTERM)
                    try:
                        sup.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        sup.kill()
            for pid, _ in processes_under(base):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for name, role in roles.items():
                if role[1].poll() is None:
                    role[1].kill()
                    role[1].wait()
            # Every file as the Hub has it, and `speech cache verify` agrees.
            for path, digest in expected.items():
                final = os.path.join(models, path)
                if not os.path.exists(final):
                    problems.append(f"round {r}: {path} missing")
                elif sha256(final) != digest:
                    problems.append(f"round {r}: {path} differs from the Hub's copy")
            verify = subprocess.run([speech, "cache", "verify", "--cache-base", base], env=env,
                                    capture_output=True, text=True)
            if verify.returncode != 0:
                problems.append(f"round {r}: speech cache verify exit {verify.returncode}: "
                                f"{(verify.stdout + verify.stderr).strip()[-300:]}")
            needed_bytes += sum(FILES.values())
            stats = proxy.stats()
            bodies = proxy.take_log()
            row = ledger.add_round(bodies)
            if a.xet:
                count_xorbs(xorb, bodies)
                xorb["needed"] += FILES[XET_FILE]
            with open(os.path.join(work, "bodies.jsonl"), "a") as f:  # for a closer look (--keep)
                for e in events + [dict(b, round=r) for b in bodies]:
                    f.write(json.dumps(e) + "\n")
            events.clear()
            mib = 1 << 20
            served = (f"xorb bytes served {xorb['sent'] / xorb['needed']:.2f}x (acknowledged {xorb['acked'] / xorb['needed']:.2f}x)"
                      if a.xet else f"served {stats['bodyBytes'] / needed_bytes:.2f}x")
            say(f"round {r + 1} ({'daemon' if daemon else 'embedded'}): {round_kills} kills ({sum(kills.values())} in all), "
                f"{served} so far; this round again {row['againOther'] / mib:.1f} MiB, "
                f"again after a flip {row['againAfterFlip'] / mib:.1f} MiB, unacknowledged {row['unacked'] / mib:.1f} MiB; "
                f"{len(problems)} problems")
    finally:
        watcher.stop = True
        hub.terminate()
        try:
            hub.wait(timeout=10)
        except subprocess.TimeoutExpired:
            hub.kill()

    time.sleep(2.5)  # bodies still draining are logged (`FaultProxy._settle` waits up to 2 s)
    stats = proxy.stats()
    late = proxy.take_log()
    ledger.add_round(late)
    count_xorbs(xorb, late)
    ratio = stats["bodyBytes"] / max(1, needed_bytes)
    if a.xet:
        ratio = xorb["sent"] / max(1, xorb["needed"])
    needed = max(1, needed_bytes)
    summary = {
        "seed": a.seed, "rounds": r, "seconds": round(time.time() - started, 1),
        "kills": kills, "killsTotal": sum(kills.values()), "restarts": restarts,
        "faults": stats["faults"], "faultsTotal": sum(stats["faults"].values()), "requests": stats["requests"],
        "servedBytes": stats["bodyBytes"], "neededBytes": needed_bytes, "servedRatio": round(ratio, 3),
        "ackedRatio": round(stats["ackedBytes"] / needed, 3),
        # served = first + againAfterFlip + againOther, each as a share of the needed bytes
        "servedBy": {k: round(v / needed, 3) for k, v in ledger.totals.items()},
        "flippedBodies": ledger.flips,
        "xet": a.xet,
        **({"xorbServedBytes": xorb["sent"], "xorbAckedBytes": xorb["acked"], "xorbNeededBytes": xorb["needed"],
            "xorbServedRatio": round(xorb["sent"] / max(1, xorb["needed"]), 3),
            "xorbAckedRatio": round(xorb["acked"] / max(1, xorb["needed"]), 3)} if a.xet else {}),
        "checksumFailureExits": sum(1 for f in failures if "checksum mismatch" in f[3] or "does not verify" in f[3]),
        "finalFilesHashedWhileRunning": watcher.checked, "corruptVisible": len(watcher.corrupt),
        "unexpectedExits": len(failures), "problems": problems,
    }
    print(json.dumps(summary, indent=2))
    for r, name, rc, tail in failures[:20]:
        say(f"round {r}: {name} exited {rc} without being killed: {tail}")
    if watcher.corrupt:
        problems.append(f"{len(watcher.corrupt)} corrupt files were visible under final paths")
    if a.max_ratio is not None and ratio > a.max_ratio:
        problems.append(f"served {ratio:.2f}x the {'xorb bytes of the Xet file' if a.xet else 'file bytes'}, above --max-ratio {a.max_ratio}")
    if problems:
        for p in problems:
            say("FAILED: " + p)
        say(f"work directory kept: {work}")
        sys.exit(1)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    say(f"passed: {sum(kills.values())} kills, {sum(stats['faults'].values())} faults, served {ratio:.2f}x"
        + (" (xorb bytes of the Xet file)" if a.xet else ""))


if __name__ == "__main__":
    main()
