"""run.py - the measuring half of scripts/bench: runs each tool, alternating, into a cold target
directory, measures it, verifies its output once, and writes docs/benchmarks.md and .json.

Per run: wall time (monotonic clock around spawn..reap), CPU seconds (user+sys from wait4, which
includes every descendant the tool waited for), peak RSS (ru_maxrss), and the peak over 50 ms
samples of PSS and RSS summed over the tool's whole process tree (/proc/PID/smaps_rollup). From
nginx: its CPU seconds during the run and, from its access log, requests, connections and status
codes. Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sha256 import sha256_file  # noqa: E402
import more  # noqa: E402

MIB = 1 << 20
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_SECONDS = 0.05


# ---------------------------------------------------------------- process tree
def tree_pids(root):
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/children") as f:
                        todo.extend(int(x) for x in f.read().split())
                except OSError:
                    pass
        except OSError:
            pass
    return out


def rollup(pid):
    """(pss_kib, rss_kib) of one process, or None when it is gone."""
    pss = rss = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        return None
    if pss is None or rss is None:
        return None
    return pss, rss


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def system_cpu():
    """(user+nice+system, irq+softirq) seconds of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2]) / CLK_TCK, (v[5] + v[6]) / CLK_TCK


def self_cpu():
    t = os.times()
    return t.user + t.system


CURRENT = {"pid": None}  # the tool being measured (leader of its own process group)


def stop_current(signum, _frame):
    """On SIGTERM/SIGINT: stop the tool's whole process group, then exit."""
    pid = CURRENT["pid"]
    if pid:
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 1.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.05)
            else:
                continue
            break
    raise SystemExit(128 + signum)


NOISE_SHARE = 0.15  # a run during which others used more than this share of the CPU is redone


def wait_idle(nginx_pid, settle_s, max_wait_s):
    """Sleeps at least settle_s, in 1 s windows, until a window in which the rest of the machine
    used under NOISE_SHARE of the CPU (or max_wait_s more have passed). Returns seconds waited."""
    t0 = time.monotonic()
    while True:
        busy0, _ = system_cpu()
        self0, ng0 = self_cpu(), cpu_seconds(tree_pids(nginx_pid))
        w0 = time.monotonic()
        time.sleep(1.0)
        busy1, _ = system_cpu()
        other = (busy1 - busy0) - (self_cpu() - self0) - (cpu_seconds(tree_pids(nginx_pid)) - ng0)
        share = other / ((time.monotonic() - w0) * os.cpu_count())
        waited = time.monotonic() - t0
        if waited >= settle_s and (share < NOISE_SHARE or waited >= settle_s + max_wait_s):
            return waited


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak_pss = self.peak_rss = 0
        self.samples = 0

    def run(self):
        while not self.stop.is_set():
            pss = rss = 0
            seen = False
            for p in tree_pids(self.pid)[1:]:  # not /usr/bin/time itself
                r = rollup(p)
                if r:
                    seen = True
                    pss += r[0]
                    rss += r[1]
            if seen:
                self.samples += 1
                self.peak_pss = max(self.peak_pss, pss)
                self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(SAMPLE_SECONDS)


# ---------------------------------------------------------------- one run
def read_log(path, offset):
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read().decode(errors="replace")
    except OSError:
        return {}
    conns, statuses, reqs, sent = set(), {}, 0, 0
    methods = {}
    for line in data.splitlines():
        parts = line.split(" ", 4)
        if len(parts) < 4:
            continue
        reqs += 1
        conns.add(parts[0])
        statuses[parts[1]] = statuses.get(parts[1], 0) + 1
        methods[parts[3]] = methods.get(parts[3], 0) + 1
        sent += int(parts[2]) if parts[2].isdigit() else 0
    return {"requests": reqs, "connections": len(conns), "statuses": statuses, "methods": methods,
            "body_bytes_sent": sent}


def balloon_reports_free_pages():
    try:
        return any(os.listdir("/sys/bus/virtio/drivers/virtio_balloon"))
    except OSError:
        return False


def memory_probe(work, blob, size, pause):
    """Seconds for a dd of the source after a pause (cold memory) and right after (warm)."""
    out = os.path.join(work, "probe")
    times = []
    for p in (pause, 0.0):
        time.sleep(p)
        t0 = time.monotonic()
        subprocess.run(["dd", f"if={blob}", f"of={out}", "bs=256K", "status=none"], check=True)
        times.append(time.monotonic() - t0)
        os.unlink(out)
    return {"cold_s": times[0], "warm_s": times[1], "cold_mib_s": size / MIB / times[0],
            "warm_mib_s": size / MIB / times[1]}


def measure(argv, env, log_path, nginx_pid, access_log):
    """Runs argv under /usr/bin/time (so ru_maxrss is the tool's own: a process spawned straight
    from this Python would inherit its peak RSS across exec)."""
    exe = shutil.which(argv[0], path=env.get("PATH"))
    if exe is None:
        raise SystemExit(f"bench: {argv[0]} not found")
    rss_file = log_path + ".rss"
    argv = ["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file, exe] + list(argv[1:])
    exe = "/usr/bin/time"
    log_offset = os.path.getsize(access_log) if os.path.exists(access_log) else 0
    nginx_before = cpu_seconds(tree_pids(nginx_pid))
    sys_before, irq_before = system_cpu()
    self_before = self_cpu()
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    t0 = time.monotonic()
    pid = os.posix_spawn(exe, argv, env, file_actions=actions, setpgroup=0)
    CURRENT["pid"] = pid
    sampler = Sampler(pid)
    sampler.start()
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    CURRENT["pid"] = None
    sampler.stop.set()
    sampler.join()
    try:
        with open(rss_file) as f:
            maxrss_kib = int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        maxrss_kib = None
    sys_after, irq_after = system_cpu()
    self_after = self_cpu()
    nginx_cpu = cpu_seconds(tree_pids(nginx_pid)) - nginx_before
    time.sleep(0.2)  # let nginx write its last access-log line
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": wall,
        "cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime, "cpu_s": ru.ru_utime + ru.ru_stime,
        "maxrss_mib": None if maxrss_kib is None else maxrss_kib / 1024,
        "peak_pss_mib": sampler.peak_pss / 1024, "peak_rss_sampled_mib": sampler.peak_rss / 1024,
        "pss_samples": sampler.samples,
        "nginx_cpu_s": nginx_cpu,
        # CPU the machine spent on anything but the tool, nginx and this runner (other users of
        # the machine: noise), and in interrupts (loopback network processing, charged to no one).
        "other_cpu_s": max(0.0, (sys_after - sys_before) - (ru.ru_utime + ru.ru_stime) - nginx_cpu
                           - (self_after - self_before)),
        "irq_cpu_s": irq_after - irq_before,
        "server": read_log(access_log, log_offset),
    }


def fresh_target(work, name):
    """An empty WORK/target/NAME (the previous run's target removed), synced: every run writes
    into a cold directory on the same disk. Returns (WORK/target, WORK/target/NAME)."""
    target = os.path.join(work, "target")
    shutil.rmtree(target, ignore_errors=True)
    path = os.path.join(target, name)
    os.makedirs(path)
    os.sync()
    return target, path


# ---------------------------------------------------------------- tools and scenarios
def tools(a, hf_new_version, hf_old_version):
    out_file = lambda d: os.path.join(d, a.file)  # noqa: E731
    conc = int(os.environ.get("HF_DOWNLOAD_RANGE_CONCURRENCY", "16") or 16)
    return [
        dict(key="curl", label="curl -o", conns="1", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["curl", "-sSf", "-o", out_file(d), f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="curl -sSf -o DIR/model.safetensors $HF_ENDPOINT/bench/OneGiB/resolve/main/model.safetensors",
             env={}, out=out_file),
        dict(key="curl_sync", label="curl -o, then fsync", conns="1", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["sh", "-c", 'curl -sSf -o "$1" "$2" && sync "$1"', "sh", out_file(d),
                                 f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="curl -sSf -o DIR/model.safetensors URL && sync DIR/model.safetensors",
             env={}, out=out_file),
        dict(key="dd", label="dd bs=256K of the source (no network)", conns="–", scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["dd", f"if={a.blob}", f"of={out_file(d)}", "bs=256K", "status=none"],
             shown="dd if=SOURCE of=DIR/model.safetensors bs=256K status=none",
             env={}, out=out_file),
        dict(key="speech", label="speech download (ours)", conns=str(min(conc, 16)), scenarios={"1", "2"},
             argv=lambda d, ep: [a.speech, "download", a.repo, "--cache-dir", d],
             shown="speech download bench/OneGiB --cache-dir DIR",
             env={}, out=out_file, ours=True),
        dict(key="speech_nohash", label="speech download, file listed without `lfs` (no SHA-256)",
             conns=str(min(conc, 16)), scenarios={"1"}, reference=True,
             argv=lambda d, ep: [a.speech, "download", a.nohash_repo, "--cache-dir", d],
             shown="speech download bench/OneGiB-nohash --cache-dir DIR  # same bytes, tree entry without lfs",
             env={}, out=out_file),
        # The same SHA-256 work done by another process beside the unhashed download (the wall
        # time is both done): what hashing 1 GiB costs on this machine however it is arranged.
        dict(key="speech_nohash_openssl",
             label="speech download without SHA-256, beside `openssl dgst -sha256` of the same bytes",
             conns=str(min(conc, 16)), scenarios={"1"}, reference=True,
             argv=lambda d, ep: ["sh", "-c", 'openssl dgst -sha256 "$1" >/dev/null & h=$!; "$2" download "$3" --cache-dir "$4"; s=$?; wait $h || s=1; exit $s',
                                 "sh", a.blob, a.speech, a.nohash_repo, d],
             shown="openssl dgst -sha256 SOURCE & speech download bench/OneGiB-nohash --cache-dir DIR; wait",
             env={}, out=out_file),
        # One connection at scenario 2's cap takes ~53 s and its speed is the cap itself: one run
        # there (max_runs), which keeps the whole bench within its 15 minutes.
        dict(key="aria2", label="aria2c (defaults)", conns="1", scenarios={"1", "2"}, max_runs={"2": 1},
             argv=lambda d, ep: ["aria2c", "-q", "--allow-overwrite=true", "--auto-file-renaming=false",
                                 "-d", d, "-o", a.file, f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="aria2c -q --allow-overwrite=true --auto-file-renaming=false -d DIR -o model.safetensors URL",
             env={}, out=out_file),
        dict(key="aria2_16", label="aria2c -x16 -s16 -k8M", conns="16", scenarios={"1", "2"},
             argv=lambda d, ep: ["aria2c", "-q", "--allow-overwrite=true", "--auto-file-renaming=false",
                                 "-x16", "-s16", "-k8M", "-d", d, "-o", a.file,
                                 f"{ep}/{a.repo}/resolve/main/{a.file}"],
             shown="aria2c -q --allow-overwrite=true --auto-file-renaming=false -x16 -s16 -k8M -d DIR -o model.safetensors URL",
             env={}, out=out_file),
        dict(key="hf", label=f"huggingface_hub {hf_new_version}", conns="1", scenarios={"1", "2"}, max_runs={"2": 1},
             argv=lambda d, ep: [a.py_new, a.hf_get, a.repo, d],
             shown=f"python -c 'snapshot_download(\"bench/OneGiB\", local_dir=DIR)'  # huggingface_hub {hf_new_version}",
             env={}, out=out_file),
        dict(key="hft", label=f"huggingface_hub {hf_old_version} + hf_transfer", conns="100",
             scenarios={"1", "2"},
             argv=lambda d, ep: [a.py_old, a.hf_get, a.repo, d],
             shown=f"python -c 'snapshot_download(\"bench/OneGiB\", local_dir=DIR)'  # huggingface_hub {hf_old_version}",
             env={"HF_HUB_ENABLE_HF_TRANSFER": "1"}, out=out_file),
        dict(key="hft16", label=f"huggingface_hub {hf_old_version} + hf_transfer, 16 connections",
             conns="16", scenarios={"1", "2"},
             argv=lambda d, ep: [a.py_old, a.hf_get, a.repo, d],
             shown="python -c 'constants.HF_TRANSFER_CONCURRENCY = 16; snapshot_download(...)'",
             env={"HF_HUB_ENABLE_HF_TRANSFER": "1", "BENCH_HF_TRANSFER_CONCURRENCY": "16"}, out=out_file),
    ]


def pyversion(python, module):
    try:
        return subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                              capture_output=True, text=True, timeout=60).stdout.strip() or "?"
    except Exception:
        return "?"


def first_line(argv, stderr=False):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        text = (r.stderr if stderr else r.stdout) or r.stdout or r.stderr
        return text.strip().splitlines()[0]
    except Exception:
        return "?"


def machine_info(work, repo_dir):
    mem = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / MIB:.1f} GiB"
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    disk = first_line(["findmnt", "-no", "SOURCE,FSTYPE", "-T", work])
    git = first_line(["git", "-C", repo_dir, "rev-parse", "--short=12", "HEAD"])
    dirty = subprocess.run(["git", "-C", repo_dir, "status", "--porcelain", "--", "Sources", "Package.swift"],
                           capture_output=True, text=True).stdout.strip()
    if os.environ.get("BENCH_SPEECH_BIN"):
        git = os.environ.get("BENCH_SPEECH_COMMIT") or "an unstated commit"
        dirty = ""
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory": mem, "kernel": platform.release(),
            "os": first_line(["sh", "-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]),
            "disk": disk, "target_dir": work,
            "speech_fetch_commit": git, "speech_binary_prebuilt": os.environ.get("BENCH_SPEECH_BIN") or None,
            "speech_fetch_sources_uncommitted": bool(dirty)}


# ---------------------------------------------------------------- summary
def spread(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def summarize(tool, size):
    ok = [r for r in tool["runs"] if r["exit"] == 0]
    if not ok:
        return None
    walls = [r["wall_s"] for r in ok]
    med_wall = statistics.median(walls)
    s = {"runs_ok": len(ok), "runs": len(tool["runs"]),
         "wall_s": {"median": med_wall, "min": min(walls), "max": max(walls)},
         "mib_s": {"median": size / MIB / med_wall, "min": size / MIB / max(walls), "max": size / MIB / min(walls)}}
    for k in ("cpu_s", "maxrss_mib", "peak_pss_mib", "nginx_cpu_s"):
        vals = [r[k] for r in ok if r[k] is not None] or [float("nan")]
        s[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    reqs = [r["server"].get("requests", 0) for r in ok]
    conns = [r["server"].get("connections", 0) for r in ok]
    s["requests"] = statistics.median(reqs)
    s["connections"] = statistics.median(conns)
    return s


def fmt_range(d, fmt):
    if d["min"] == d["max"]:
        return fmt.format(d["median"])
    return f"{fmt.format(d['median'])} ({fmt.format(d['min'])}–{fmt.format(d['max'])})"


def render(doc):
    L = []
    quick = doc["quick"]
    size_mib = doc["file"]["size"] / MIB
    L.append("# Benchmarks")
    L.append("")
    keys = sorted([s["key"] for s in doc["scenarios"]] + list(doc.get("more", {})))
    L.append(f"Generated by `scripts/bench` on {doc['generated']} — do not edit by hand; rerun it "
             "whenever performance work lands. Issue 6 asks for scenarios 1–6; this page has "
             f"{', '.join(keys)} so far.")
    merged = sorted(k for k, m in doc.get("more", {}).items() if m.get("run") is None or m.get("run") != doc.get("run"))
    if merged:
        L.append("")
        L.append("Scenarios " + ", ".join(merged) + " were measured in a later run than "
                 f"{', '.join(s['key'] for s in doc['scenarios']) or 'none'} (each states its date and commit) and "
                 "merged into this page; the machine and method sections describe the run of the others.")
    if quick:
        L.append("")
        L.append(f"**Quick run (`BENCH_QUICK=1`): a {size_mib:.0f} MiB file and {doc['runs']} run(s) per "
                 "tool. Figures are indicative only.**")
    L.append("")
    L.append("## Verdict")
    L.append("")
    L.extend(doc["verdict"])
    for sc in doc["scenarios"]:
        L.append("")
        L.append(f"## Scenario {sc['key']}: {sc['title']}")
        L.append("")
        L.append(sc["description"])
        L.append("")
        L.append(f"Limit: **{sc['limit_mib_s']:.0f} MiB/s** — {sc['limit_basis']}.")
        L.append("")
        L.append("| tool | conns | requests | wall s | MiB/s | CPU s | peak RSS MiB | peak PSS MiB | "
                 "nginx CPU s | × limit | × ours |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for t in sc["tools"]:
            s = t["summary"]
            name = t["label"] + (" *(reference)*" if t.get("reference") else "")
            if len(t["runs"]) == 1 and doc["runs"] > 1:
                name += " *(1 run)*"
            if t.get("verified") is False:
                name += " **WRONG OUTPUT**"
            if s is None:
                L.append(f"| {name} | {t['conns']} | – | failed ({len(t['runs'])} runs) | – | – | – | – | – | – | – |")
                continue
            fails = "" if s["runs_ok"] == s["runs"] else f" ({s['runs'] - s['runs_ok']} failed)"
            L.append("| " + " | ".join([
                name + fails, t["conns"], f"{s['requests']:.0f} / {s['connections']:.0f}",
                fmt_range(s["wall_s"], "{:.2f}"), fmt_range(s["mib_s"], "{:.0f}"),
                fmt_range(s["cpu_s"], "{:.2f}"), fmt_range(s["maxrss_mib"], "{:.0f}"),
                fmt_range(s["peak_pss_mib"], "{:.0f}"), fmt_range(s["nginx_cpu_s"], "{:.2f}"),
                f"{s['x_limit']:.2f}", "–" if s.get("x_ours") is None else f"{s['x_ours']:.2f}",
            ]) + " |")
    L.append("")
    L.append("")
    L.append("Columns: median (min–max) over the runs. *conns* is the tool's connection setting; "
             "*requests* is requests / distinct TCP connections as nginx logged them (median). "
             "*CPU s* is user+sys of the tool's whole process tree (wait4). *peak RSS* is the tool's "
             "ru_maxrss (GNU time %M: the largest single process); "
             "*peak PSS* is the highest sum of `Pss` from `/proc/PID/smaps_rollup` over the tool's "
             f"process tree, sampled every {int(SAMPLE_SECONDS * 1000)} ms. *nginx CPU s* is the "
             "server's CPU during the run (it shares the 2 cores). *× limit* is the tool's median "
             "MiB/s over the limit; *× ours* is the tool's median MiB/s over ours (above 1: faster than us).")
    L.append("")
    L.extend(more.render(doc.get("more", {})))
    L.append("")
    L.append("## Machine")
    L.append("")
    m = doc["machine"]
    L.append(f"- {m['nproc']} cores ({m['cpu']}), {m['memory']} RAM, kernel {m['kernel']}, {m['os']}")
    L.append(f"- disk: {m['disk']}; source file and target directories on it, under `{m['target_dir']}`")
    if doc.get("script_s"):
        L.append(f"- time: {doc['elapsed_s'] / 60:.1f} min of runs; {doc['script_s'] / 60:.1f} min for the whole "
                 "`scripts/bench` (peers installed when missing, binaries built, the layout generated, the runs)")
    L.append(f"- speech-fetch at {m['speech_fetch_commit']}"
             + (" (with uncommitted changes under Sources/)" if m["speech_fetch_sources_uncommitted"] else "")
             + ("; binary given as `BENCH_SPEECH_BIN`, its commit as `BENCH_SPEECH_COMMIT`"
                if m.get("speech_binary_prebuilt") else "; built by the script (release)"))
    if m.get("memory_probe"):
        pr = m["memory_probe"]
        cold = pr["cold_mib_s"] < 0.7 * pr["warm_mib_s"]
        L.append(f"- memory: a VM with a virtio balloon that can hand freed pages back to the host; "
                 f"freshly backed memory is slow to write into the first time. Before the runs, `dd bs=256K` "
                 f"of the file after a {doc['settle_s']:.0f} s pause ran at {pr['cold_mib_s']:.0f} MiB/s, right "
                 f"after at {pr['warm_mib_s']:.0f} MiB/s"
                 + (" (cold memory was slower: each new page-cache page is first faulted in from the host, "
                    "as sys time of the writing thread)" if cold else
                    " (no difference this time: the memory was still backed)")
                 + f". Every run starts after a pause of at least {doc['settle_s']:.0f} s so that they all "
                 "start from the same state as far as this machine allows; what else runs on it changes "
                 "that state, so compare tools within one page, not across pages")
    v = doc["versions"]
    others = [(r["other_cpu_s"], r["wall_s"], sc["key"], t["label"]) for sc in doc["scenarios"]
              for t in sc["tools"] for r in t["runs"]]
    if others:
        share = [o / (w * m["nproc"]) for o, w, _, _ in others]
        worst = max(range(len(others)), key=lambda i: share[i])
        o, w, k, lab = others[worst]
        L.append(f"- other load: CPU used by anything but the tool, nginx and the runner during a run was "
                 f"{statistics.median(share) * 100:.1f}% of the machine (median over runs), at most "
                 f"{share[worst] * 100:.0f}% ({o:.2f} CPU s in {w:.2f} s, scenario {k}, {lab})"
                 + (" — **the machine was not idle; treat these figures with care**"
                    if share[worst] > NOISE_SHARE else ""))
    discarded = sum(len(t.get("discarded", [])) for sc in doc["scenarios"] for t in sc["tools"])
    if discarded:
        L.append(f"- {discarded} run(s) discarded and redone because other processes were busy "
                 "(in benchmarks.json under `discarded`)")
    L.append(f"- server: {v['nginx']} on 127.0.0.1 (`sendfile on`, static files, 200 with the Hub's "
             "headers on resolve, 206 for ranges)")
    L.append(f"- peers: {v['curl']}; {v['aria2c']}; huggingface_hub {v['hf_new']}; "
             f"huggingface_hub {v['hf_old']} with hf_transfer {v['hf_transfer']}; Python {v['python']}")
    L.append("")
    L.append("## Method")
    L.append("")
    L.append(f"- One random {size_mib:.0f} MiB `model.safetensors` (SHA-256 `{doc['file']['sha256']}`) in "
             "repo `bench/OneGiB`, served by nginx from a temp dir with the revision and tree JSON as "
             "files and `X-Repo-Commit`, `X-Linked-Etag`, `X-Linked-Size`, `ETag` added by `map`s. "
             "The source stays in page cache (read once before the runs).")
    L.append(f"- {doc['runs']} run(s) per tool and scenario, tools alternating (the order rotates each "
             "round); each run writes into a fresh empty directory on the same disk, deleted after, "
             f"with `sync` and a pause of at least {doc['settle_s']:.0f} s before the next run, extended "
             f"(up to {doc['idle_wait_s']:.0f} s) until a 1 s window in which other processes used under "
             f"{NOISE_SHARE * 100:.0f}% of the CPU. A run during which they used more is discarded and "
             f"redone, up to {doc['noise_retries']} times (runs over 30 s are kept). Each tool's output is checked (size and SHA-256) once "
             "per scenario, outside the timing.")
    L.append("- Wall time includes process start (Python's import time for huggingface_hub), metadata "
             "requests, the transfer, verification a tool does itself, and its fsync if it does one: "
             "`curl -o` does not fsync, so the disk limit is the page cache's write speed; the "
             "`curl -o, then fsync` row shows what forcing the bytes to disk costs.")
    L.append("- Environment for every tool: `HF_ENDPOINT=http://127.0.0.1:PORT`, `HF_HOME` in the temp "
             "dir, `HF_HUB_DISABLE_TELEMETRY=1`, `HF_HUB_DISABLE_PROGRESS_BARS=1`.")
    L.append("")
    L.append("Commands (`DIR` is the cold target dir, `URL` the resolve URL of the file at `main`):")
    L.append("")
    seen = set()
    for sc in doc["scenarios"]:
        for t in sc["tools"]:
            if t["key"] in seen:
                continue
            seen.add(t["key"])
            env = " ".join(f"{k}={v}" for k, v in t["env"].items())
            L.append(f"- {t['label']}: `{(env + ' ') if env else ''}{t['shown']}`")
    L.append("")
    L.append("Raw figures per run: [benchmarks.json](benchmarks.json).")
    L.append("")
    return "\n".join(L)


def verdict(doc):
    out = []
    for sc in doc["scenarios"]:
        ours = next((t for t in sc["tools"] if t.get("ours")), None)
        if ours is None or ours["summary"] is None:
            out.append(f"- Scenario {sc['key']}: **ours failed** in every run.")
            continue
        s = ours["summary"]
        x = s["x_limit"]
        line = (f"- Scenario {sc['key']}: ours {s['mib_s']['median']:.0f} MiB/s, {x:.2f} of the limit "
                f"({'meets' if x >= 0.9 else 'misses'} the 0.9 target)")
        ahead, behind = [], []
        for t in sc["tools"]:
            if t is ours or t.get("reference") or t["summary"] is None:
                continue
            r = t["summary"]["x_ours"]
            desc = f"{t['label']} ({t['conns']} conns: {r:.2f}× our speed)"
            (behind if r > 1.0 else ahead).append(desc)
        if behind:
            line += "; **behind** " + ", ".join(behind)
        if ahead:
            line += "; ahead of " + ", ".join(ahead)
        line += (f". CPU {s['cpu_s']['median']:.2f} s, peak PSS {s['peak_pss_mib']['median']:.0f} MiB "
                 f"(RSS {s['maxrss_mib']['median']:.0f} MiB)")
        if sc["key"] == "2":
            pss = s["peak_pss_mib"]["max"]
            line += f"; memory target (PSS < 64 MiB): {'met' if pss < 64 else '**missed**'} (max {pss:.0f} MiB)"
        line += "."
        if ours.get("verified") is False:
            line += " **Our output did not verify.**"
        out.append(line)
        nohash = next((t for t in sc["tools"] if t["key"] == "speech_nohash" and t["summary"]), None)
        if nohash:
            n = nohash["summary"]
            extra = s["wall_s"]["median"] / n["wall_s"]["median"] - 1
            cpu = s["cpu_s"]["median"] - n["cpu_s"]["median"]
            verify = [r.get("verify_cpu_s") for t in sc["tools"] for r in t["runs"] if r.get("verify_cpu_s")]
            beside = next((t for t in sc["tools"] if t["key"] == "speech_nohash_openssl" and t["summary"]), None)
            out.append(f"  SHA-256 while downloading: ours takes {extra * 100:+.1f}% wall time and "
                       f"{cpu:+.2f} CPU s against the same bytes listed without `lfs` (target: under +5% "
                       f"wall: {'met' if extra < 0.05 else '**missed**'})"
                       + (f"; hashing the file alone (OpenSSL, this machine) takes {statistics.median(verify):.2f} CPU s"
                          if verify else "")
                       + (f"; the unhashed download with `openssl dgst -sha256` of the same 1 GiB running beside it "
                          f"(another process, both done) takes "
                          f"{(beside['summary']['wall_s']['median'] / n['wall_s']['median'] - 1) * 100:+.1f}%: "
                          "what that much SHA-256 costs on these cores however it is arranged" if beside else "") + ".")
        failed = [t["label"] for t in sc["tools"] if any(r["exit"] != 0 for r in t["runs"])]
        if failed:
            out.append(f"  Runs that failed: {', '.join(failed)} (see benchmarks.json).")
    out.extend(more.verdict(doc.get("more", {})))
    return out


# ---------------------------------------------------------------- main
def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        # Rewrites benchmarks.md beside the given benchmarks.json (the figures are not touched).
        with open(sys.argv[2]) as f:
            doc = json.load(f)
        doc["verdict"] = verdict(doc)
        with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[2])), "benchmarks.md"), "w") as f:
            f.write(render(doc))
        return
    p = argparse.ArgumentParser()
    for k in ("work", "repo", "file", "sha256", "commit", "blob", "rate-limit", "scenarios", "speech",
              "py-new", "py-old", "hf-get", "repo-dir", "out-dir"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--nohash-repo", required=True)
    for k in ("fetchd", "wait-rate", "small-repo", "small-commit", "sharded-repo", "sharded-list"):
        p.add_argument("--" + k, default="")
    p.add_argument("--port-wait", type=int, default=0)
    for k in ("size", "port-free", "port-limited", "nginx-pid", "runs", "quick"):
        p.add_argument("--" + k, type=int, required=True)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, stop_current)
    signal.signal(signal.SIGINT, stop_current)

    wanted = set(a.scenarios.split(","))
    hf_new, hf_old = pyversion(a.py_new, "huggingface_hub"), pyversion(a.py_old, "huggingface_hub")
    versions = {
        "nginx": first_line(["nginx", "-v"], stderr=True).replace("nginx version: ", ""),
        "curl": " ".join(first_line(["curl", "--version"]).split()[:2]),
        "aria2c": first_line(["aria2c", "--version"]),
        "hf_new": hf_new, "hf_old": hf_old, "hf_transfer": pyversion(a.py_old, "hf_transfer"),
        "python": platform.python_version(),
    }
    rate_mib = int(a.rate_limit.rstrip("m"))
    a.hf_new_version = hf_new
    a.versions = versions
    all_tools = tools(a, hf_new, hf_old)
    if os.environ.get("BENCH_TOOLS"):  # development runs: only these tools (keys of tools())
        only = set(os.environ["BENCH_TOOLS"].split(","))
        all_tools = [t for t in all_tools if t["key"] in only]
    scenarios = []
    if "1" in wanted:
        scenarios.append(dict(key="1", title=f"one {a.size / MIB:.0f} MiB LFS file, no limit", port=a.port_free,
                              description="nginx without a rate limit on loopback: the disk (page cache) "
                                          "and the 2 CPU cores are the limits."))
    if "2" in wanted:
        scenarios.append(dict(key="2", title=f"the same file, nginx `limit_rate {a.rate_limit}` per connection",
                              port=a.port_limited,
                              description=f"Each connection is capped at {rate_mib} MiB/s (a CDN's per-stream "
                                          "cap); more connections go faster. Peers at their defaults and at "
                                          "16 connections. nginx applies `limit_rate` per request, so a "
                                          "client that sends several shorter requests down one connection "
                                          "can end slightly above the cap per connection (× limit above 1)."))
    for sc in scenarios:
        sc["tools"] = [dict(t, runs=[], verified=None) for t in all_tools if sc["key"] in t["scenarios"]]

    hf_home = os.path.join(a.work, "hf-home")
    os.makedirs(hf_home, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("HF_", "HUGGING_FACE", "http_proxy", "https_proxy", "HTTP_PROXY",
                                     "HTTPS_PROXY", "all_proxy", "ALL_PROXY"))
                or k.startswith("HF_DOWNLOAD_")}
    base_env.update({"HF_HOME": hf_home, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                     "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"})
    logs = os.path.join(a.work, "logs")
    os.makedirs(logs, exist_ok=True)

    # The source in page cache; the VM's memory behaviour.
    sha256_file(a.blob)
    balloon = balloon_reports_free_pages()
    settle = float(os.environ.get("BENCH_SETTLE", "3" if balloon else "1"))
    probe = memory_probe(a.work, a.blob, a.size, settle) if balloon else None

    machine = dict(machine_info(a.work, a.repo_dir), balloon=balloon, memory_probe=probe)
    noise_retries = int(os.environ.get("BENCH_NOISE_RETRIES", "2"))
    idle_wait = float(os.environ.get("BENCH_IDLE_WAIT", "60"))

    def one_run(sc, t, rnd, attempt):
        endpoint = f"http://127.0.0.1:{sc['port']}"
        access_log = os.path.join(a.work, "nginx", "logs", f"access-{sc['port']}.log")
        _, dst = fresh_target(a.work, f"s{sc['key']}-{t['key']}-{rnd}")
        env = dict(base_env, HF_ENDPOINT=endpoint, **t["env"])
        log_path = os.path.join(logs, f"s{sc['key']}-{t['key']}-{rnd}-{attempt}.log")
        waited = wait_idle(a.nginx_pid, settle, idle_wait)
        r = measure(t["argv"](dst, endpoint), env, log_path, a.nginx_pid, access_log)
        r["round"] = rnd
        r["waited_s"] = waited
        out = t["out"](dst)
        if r["exit"] == 0 and t["verified"] is None:
            try:
                tv = time.monotonic()
                cpu0 = time.process_time()
                good = os.path.getsize(out) == a.size and sha256_file(out) == a.sha256
                r["verify_wall_s"] = time.monotonic() - tv
                r["verify_cpu_s"] = time.process_time() - cpu0
            except OSError:
                good = False
            t["verified"] = good
            r["verified"] = good
        if r["exit"] != 0:
            with open(log_path, errors="replace") as f:
                r["log_tail"] = f.read()[-2000:]
            print(f"bench: {t['label']} failed (exit {r['exit']}):\n{r['log_tail']}", file=sys.stderr)
        print(f"bench: s{sc['key']} round {rnd + 1}/{a.runs} {t['label']:<52} {r['wall_s']:7.2f} s "
              f"{a.size / MIB / r['wall_s']:7.0f} MiB/s cpu {r['cpu_s']:5.2f} s "
              f"rss {r['maxrss_mib']:5.0f} pss {r['peak_pss_mib']:5.0f} MiB "
              f"req {r['server'].get('requests', 0)}/{r['server'].get('connections', 0)} "
              f"other {r['other_cpu_s']:.2f}"
              + ("" if r["exit"] == 0 else f" EXIT {r['exit']}")
              + ("" if r.get("verified", True) else " WRONG OUTPUT"), file=sys.stderr)
        shutil.rmtree(os.path.join(a.work, "target"), ignore_errors=True)
        return r

    t_start = time.monotonic()
    run_id = f"{os.getpid()}@{time.time():.0f}"
    for sc in scenarios:
        ts = sc["tools"]
        for rnd in range(a.runs):
            order = ts[rnd % len(ts):] + ts[:rnd % len(ts)]
            for t in order:
                if rnd >= t.get("max_runs", {}).get(sc["key"], a.runs):
                    continue
                for attempt in range(1 + noise_retries):
                    r = one_run(sc, t, rnd, attempt)
                    share = r["other_cpu_s"] / (r["wall_s"] * os.cpu_count())
                    if (share > NOISE_SHARE and attempt < noise_retries and r["exit"] == 0
                            and r["wall_s"] < 30):
                        r["discarded"] = f"busy machine: others used {share * 100:.0f}% of the CPU"
                        t.setdefault("discarded", []).append(r)
                        print(f"bench:   discarded ({r['discarded']}); again", file=sys.stderr)
                        continue
                    t["runs"].append(r)
                    break

    more_results = {}
    if wanted & {"3", "4", "5", "6"}:
        stamp = {"generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "commit": machine["speech_fetch_commit"]
                 + (" (with uncommitted changes)" if machine["speech_fetch_sources_uncommitted"] else ""),
                 "versions": versions, "quick": bool(a.quick), "run": run_id}
        if a.quick:
            stamp["note"] = f"quick run: a {a.size / MIB:.0f} MiB file"
        more_results = more.run(a, wanted, base_env, logs, settle, idle_wait, stamp)
    out_json = os.path.join(a.out_dir, "benchmarks.json")
    previous = None
    if os.path.exists(out_json):
        with open(out_json) as f:
            previous = json.load(f)
    if more_results and not scenarios and previous is not None:
        # Only scenarios 4-6 ran: merge them into the page of the earlier run.
        doc = previous
        doc.setdefault("more", {}).update(more_results)
        doc["verdict"] = verdict(doc)
        with open(out_json, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        with open(os.path.join(a.out_dir, "benchmarks.md"), "w") as f:
            f.write(render(doc))
        print("\n".join(doc["verdict"]), file=sys.stderr)
        print(f"bench: merged scenarios {', '.join(sorted(more_results))} into {out_json} and rendered "
              "benchmarks.md", file=sys.stderr)
        return

    # Limits and ratios.
    disk_limit = None
    for sc in scenarios:
        for t in sc["tools"]:
            t["summary"] = summarize(t, a.size)
        if sc["key"] == "1":
            curl = next(t for t in sc["tools"] if t["key"] == "curl")
            if curl["summary"] is None:
                raise SystemExit("bench: curl failed; no disk limit")
            disk_limit = curl["summary"]["mib_s"]["median"]
            sc["limit_mib_s"] = disk_limit
            sc["limit_basis"] = "`curl -o` of the same file to the same disk (median)"
            cs = curl["summary"]
            if cs["cpu_s"]["median"] >= 0.8 * cs["wall_s"]["median"]:
                sc["limit_basis"] += (f"; curl used {cs['cpu_s']['median']:.2f} CPU s in {cs['wall_s']['median']:.2f} s, "
                                      "so its one stream is bound by one core (loopback receive plus the "
                                      "page-cache write), not by the disk: tools that spread the work over "
                                      "both cores can pass it")
        else:
            cap = 16 * rate_mib
            sc["limit_mib_s"] = cap if disk_limit is None else min(cap, disk_limit)
            sc["limit_basis"] = (f"16 × {rate_mib} MiB/s" if sc["limit_mib_s"] == cap
                                 else "the disk limit of scenario 1, below 16 × the cap")
            if disk_limit is None:
                sc["limit_basis"] += " (scenario 1 not run: disk not measured)"
        ours = next((t for t in sc["tools"] if t.get("ours")), None)
        ours_speed = ours["summary"]["mib_s"]["median"] if ours and ours["summary"] else None
        for t in sc["tools"]:
            if t["summary"]:
                t["summary"]["x_limit"] = t["summary"]["mib_s"]["median"] / sc["limit_mib_s"]
                t["summary"]["x_ours"] = (t["summary"]["mib_s"]["median"] / ours_speed) if ours_speed else None

    doc = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": bool(a.quick), "runs": a.runs, "settle_s": settle, "idle_wait_s": idle_wait,
        "noise_retries": noise_retries, "elapsed_s": time.monotonic() - t_start, "run": run_id,
        "script_s": (time.time() - float(os.environ["BENCH_STARTED"])) if os.environ.get("BENCH_STARTED") else None,
        "machine": machine,
        "versions": versions,
        "file": {"repo": a.repo, "path": a.file, "size": a.size, "sha256": a.sha256, "commit": a.commit},
        "scenarios": [],
    }
    for sc in scenarios:
        doc["scenarios"].append({
            "key": sc["key"], "title": sc["title"], "description": sc["description"],
            "limit_mib_s": sc["limit_mib_s"], "limit_basis": sc["limit_basis"],
            "tools": [{k: v for k, v in t.items() if k not in ("argv", "out", "scenarios")} for t in sc["tools"]],
        })
    kept = {k: v for k, v in ((previous or {}).get("more") or {}).items() if k not in more_results}
    if kept or more_results:
        doc["more"] = dict(kept, **more_results)
    doc["verdict"] = verdict(doc)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "benchmarks.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(a.out_dir, "benchmarks.md"), "w") as f:
        f.write(render(doc))
    print(render(doc).split("## Machine")[0], file=sys.stderr)
    print(f"bench: wrote {a.out_dir}/benchmarks.md and benchmarks.json "
          f"({doc['elapsed_s']:.0f} s of runs)", file=sys.stderr)


if __name__ == "__main__":
    main()
