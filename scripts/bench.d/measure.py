"""measure.py - the measuring floor of scripts/bench: every scenario module measures through it,
and it imports none of them (the page and run.py sit above the scenarios).

  process trees   tree_pids, rollup (PSS/RSS), cpu_seconds, tree_cpu, proc_cpu_ns, system_cpu
  one run         measure (a tool under /usr/bin/time: wall, CPU from wait4, ru_maxrss, peak PSS
                  over its tree every 50 ms, nginx's CPU and access log), spawn, timed, Daemon
                  (a speech-fetchd for the run), fresh_target (a cold target directory)
  noise           wait_idle (settle until the rest of the machine is idle), keep (keep a run or
                  discard it when others were busy during it), NOISE_SHARE
  timing          measure_first / measure_normally (SCHED_FIFO for the threads that read clocks)
  figures         summarize, med, pct, rng
  the machine     machine_info, pyversion, first_line, balloon_reports_free_pages, memory_probe
Standard library only.
"""
import glob
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

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


def _cpu_ticks(pids, fields):
    """The sum of /proc/PID/stat's `fields` (0 = its third field, the state) over `pids`, in
    seconds; a process gone meanwhile counts nothing."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                values = f.read().rsplit(")", 1)[1].split()
            total += sum(int(values[i]) for i in fields)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def strace_summary(path):
    """{syscall: (calls, errors)} from an `strace -c -o path` summary, its total row left out;
    empty when the file is missing."""
    counts = {}
    try:
        with open(path) as f:
            for line in f:
                # % time, seconds, usecs/call, calls, errors (blank when none), syscall
                parts = line.split()
                if len(parts) >= 5 and parts[3].isdigit() and parts[-1] != "total" and not parts[-1].startswith("-"):
                    counts[parts[-1]] = (int(parts[3]), int(parts[4]) if len(parts) == 6 and parts[4].isdigit() else 0)
    except OSError:
        pass
    return counts


def cpu_seconds(pids):
    return _cpu_ticks(pids, (11, 12))  # utime, stime (fields 14, 15)


def tree_cpu(root):
    """utime+stime+cutime+cstime summed over root's live process tree, in seconds: exited
    children the tree waited for stay counted in their parent's cutime/cstime."""
    return _cpu_ticks(tree_pids(root), (11, 12, 13, 14))


def proc_cpu_ns(pid):
    """CPU time of all of a process's threads in ns (/proc/PID/task/*/schedstat): utime+stime
    in 10 ms ticks rounds a sleeping waiter's few microseconds per wake-up away."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total
    except (OSError, IndexError, ValueError):
        return None


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
    """Peak of the summed PSS and RSS over the process trees of `roots`, every `interval` seconds;
    with `skip_root` a root itself is not counted (/usr/bin/time). `samples` counts the samples
    that saw a process, `peak_procs` the processes at the PSS peak."""

    def __init__(self, roots, interval=SAMPLE_SECONDS, skip_root=False):
        super().__init__(daemon=True)
        self.roots, self.interval, self.skip_root, self.stop = roots, interval, skip_root, threading.Event()
        self.peak_pss = self.peak_rss = 0
        self.peak_procs = self.samples = 0

    def run(self):
        while not self.stop.is_set():
            pss = rss = n = 0
            for root in self.roots:
                for p in tree_pids(root)[1 if self.skip_root else 0:]:
                    r = rollup(p)
                    if r:
                        pss += r[0]
                        rss += r[1]
                        n += 1
            if n:
                self.samples += 1
            if pss > self.peak_pss:
                self.peak_pss, self.peak_procs = pss, n
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(self.interval)


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
    sampler = Sampler([pid], skip_root=True)
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


def spawn(argv, env, log_path):
    """Starts argv (an absolute path) in its own process group, output to log_path."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0)


def timed(argv, env, log_path, access_log):
    """Wall and CPU seconds of argv run to its end, and where access_log stood before it."""
    off = os.path.getsize(access_log) if os.path.exists(access_log) else 0
    t0 = time.monotonic()
    pid = spawn(argv, env, log_path)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    return {"exit": os.waitstatus_to_exitcode(status), "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
            "log_offset": off}


class Daemon:
    """A speech-fetchd serving base, up once its supervisor has registered; stop() sends SIGTERM
    (True: it exited within 15 s, else its process group is killed)."""

    def __init__(self, fetchd, base, env, log_path, extra=()):
        os.makedirs(base, exist_ok=True)
        self.base = base
        self.pid = spawn([fetchd, "--cache-base", base] + list(extra), env, log_path)
        deadline = time.monotonic() + 30
        while not glob.glob(os.path.join(base, "spool", "supervisors", "*")):
            if time.monotonic() > deadline or os.waitpid(self.pid, os.WNOHANG)[0]:
                raise SystemExit(f"bench: speech-fetchd did not come up (log: {log_path})")
            time.sleep(0.01)

    def stop(self):
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                return True
            time.sleep(0.05)
        os.killpg(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return False


def fresh_target(work, name):
    """An empty WORK/target/NAME (the previous run's target removed), synced: every run writes
    into a cold directory on the same disk. Returns (WORK/target, WORK/target/NAME)."""
    target = os.path.join(work, "target")
    shutil.rmtree(target, ignore_errors=True)
    path = os.path.join(target, name)
    os.makedirs(path)
    os.sync()
    return target, path


# ---------------------------------------------------------------- noise
def log_tail_on_failure(r, log_path):
    """When the run failed, keeps the last 2000 characters of its log in its result (`log_tail`);
    returns whether it failed."""
    if r["exit"] == 0:
        return False
    with open(log_path, errors="replace") as f:
        r["log_tail"] = f.read()[-2000:]
    return True


def keep(t, r, attempt, long_ok, retries=2, stream=None):
    """Adds run r to tool t, or discards it (True: kept) when other processes used more than
    NOISE_SHARE of the machine during it, up to `retries` times (with long_ok, runs over 30 s are
    kept). The note goes to stream (default: standard output)."""
    share = r["other_cpu_s"] / (r["wall_s"] * os.cpu_count())
    if share > NOISE_SHARE and attempt < retries and r["exit"] == 0 and not (long_ok and r["wall_s"] >= 30):
        r["discarded"] = f"busy machine: others used {share * 100:.0f}% of the CPU"
        t.setdefault("discarded", []).append(r)
        print(f"bench:   discarded ({r['discarded']}); again", file=stream or sys.stdout, flush=True)
        return False
    t["runs"].append(r)
    return True


# ---------------------------------------------------------------- timing
def measure_first():
    """Puts the calling thread under SCHED_FIFO (root only), so the 200 waiters that wake at once
    cannot delay the clock readings of the thread that times them. Returns whether it could.
    SCHED_RESET_ON_FORK: what this thread spawns later (the next round's daemon and waiters)
    starts under the normal policy, not as real-time tasks that would starve the timing."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
        return True
    except (AttributeError, OSError):
        return False


def measure_normally():
    """Back to the normal policy (the runner's main thread, after a round of scenario 6)."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass


# ---------------------------------------------------------------- figures
def summarize(tool, size):
    """Median/min/max of a tool's successful runs of `size` bytes (None when none succeeded)."""
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


def med(xs):
    return statistics.median(xs) if xs else None


def pct(xs, p):
    """Nearest-rank percentile."""
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)] if s else None


def rng(xs):
    return {"median": med(xs), "min": min(xs), "max": max(xs)} if xs else None


# ---------------------------------------------------------------- the machine
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
