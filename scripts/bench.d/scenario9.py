"""scenario9.py - scenario 9 (scripts/bench-small-files): one repo of many small git files (10,000
by default), `speech download` embedded against the same command handed to a `speech-fetchd`
serving the cache base, side by side in one run, and the ratio of their wall times. A second,
untimed round of each mode under `strace -f -c` counts the durability calls (fsync, fdatasync,
rename, link, openat) of the caller and of the daemon with its workers. run() returns the entry of
benchmarks.json's "more"; render() and verdict() are page.py's.
"""
import contextlib
import glob
import os
import re
import shutil
import signal
import time

from measure import Daemon, rng, spawn, strace_summary, tree_cpu, tree_pids, wait_idle

TRACED = "fsync,fdatasync,rename,renameat,renameat2,link,linkat,openat"
# The calls the page shows, in this order (rename and link stand for their *at variants too).
SHOWN = ("fsync", "fdatasync", "rename", "link", "openat")
GOAL = 1.3


def count_files(model_dir):
    """Repo files in model_dir: every regular file but the cache's own bookkeeping."""
    n = 0
    for root, dirs, files in os.walk(model_dir):
        if root == model_dir:
            dirs[:] = [d for d in dirs if d != ".incomplete"]
            files = [f for f in files if not f.startswith((".speech-fetch", "..speech-fetch"))]
        n += len(files)
    return n


def strace_counts(path):
    """{syscall: calls} from an `strace -c -o path` summary; rename and link fold in their *at forms."""
    out = {}
    for name, (calls, _) in strace_summary(path).items():
        name = re.sub(r"^(rename|link)(at2?)$", r"\1", name)
        out[name] = out.get(name, 0) + calls
    return out


def stop_traced_daemon(strace_pid, base):
    """SIGTERM to the daemon strace runs (its child), then waits for strace to write its summary.
    A daemon that has not drained within 90 s (everything is slow under strace): strace is
    interrupted (it detaches and writes the summary so far), then the rest is killed."""
    children = [p for p in tree_pids(strace_pid) if p != strace_pid]
    supervisor = min(children) if children else strace_pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(supervisor, signal.SIGTERM)
    for sig, wait in ((None, 90), (signal.SIGINT, 15)):
        if sig:
            os.kill(strace_pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if os.waitpid(strace_pid, os.WNOHANG)[0]:
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                return sig is None
            time.sleep(0.05)
    os.killpg(strace_pid, signal.SIGKILL)
    os.waitpid(strace_pid, 0)
    return False


def one_run(a, env, mode, name, logs, traced):
    """One download into a fresh base; returns its figures (and, traced, the strace counts)."""
    base = os.path.join(a.work, "target", name)
    shutil.rmtree(os.path.join(a.work, "target"), ignore_errors=True)
    os.makedirs(base)
    os.sync()
    log_path = os.path.join(logs, name + ".log")
    client_trace = os.path.join(logs, name + ".client.strace")
    daemon_trace = os.path.join(logs, name + ".daemon.strace")
    daemon = strace_pid = None
    if mode == "daemon":
        if traced:
            strace_pid = spawn(["/usr/bin/strace", "-f", "-c", "-e", "trace=" + TRACED, "-o", daemon_trace,
                                a.fetchd, "--cache-base", base], env, log_path + ".fetchd")
            deadline = time.monotonic() + 30
            while not glob.glob(os.path.join(base, "spool", "supervisors", "*")) and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            daemon = Daemon(a.fetchd, base, env, log_path + ".fetchd")
        time.sleep(0.5)  # the supervisor's start-up (its workers) is not part of the download
    argv = [a.speech, "download", a.repo, "--cache-base", base]
    if traced:
        argv = ["/usr/bin/strace", "-f", "-c", "-e", "trace=" + TRACED, "-o", client_trace] + argv
    d_cpu0 = tree_cpu(daemon.pid) if daemon else 0.0
    t0 = time.monotonic()
    pid = spawn(argv, env, log_path)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    d_cpu = (tree_cpu(daemon.pid) - d_cpu0) if daemon else 0.0
    if daemon:
        daemon.stop()
    if strace_pid:
        stop_traced_daemon(strace_pid, base)
    files = count_files(os.path.join(base, "models", a.repo))
    r = {"exit": os.waitstatus_to_exitcode(status), "wall_s": wall, "client_cpu_s": ru.ru_utime + ru.ru_stime,
         "daemon_cpu_s": d_cpu, "cpu_s": ru.ru_utime + ru.ru_stime + d_cpu, "files": files}
    if traced:
        r["client_calls"] = strace_counts(client_trace)
        r["daemon_calls"] = strace_counts(daemon_trace) if mode == "daemon" else {}
    shutil.rmtree(os.path.join(a.work, "target"), ignore_errors=True)
    return r


def run(a, base_env, logs, settle, idle_wait):
    env = dict(base_env, HF_ENDPOINT=f"http://127.0.0.1:{a.port}")
    modes = [("embedded", "speech download, embedded (ours)"), ("daemon", "speech download through speech-fetchd (ours)")]
    tools = [dict(key=k, label=label, runs=[], traced=None) for k, label in modes]
    for rnd in range(a.runs):
        # Alternating: the mode that runs first changes each round.
        for t in (tools if rnd % 2 == 0 else tools[::-1]):
            waited = wait_idle(a.nginx_pid, settle, idle_wait)
            r = dict(one_run(a, env, t["key"], f"s8-{t['key']}-{rnd}", logs, traced=False), round=rnd, waited_s=waited)
            t["runs"].append(r)
            print(f"bench: s8 round {rnd + 1}/{a.runs} {t['label']:<48} {r['wall_s']:7.2f} s cpu {r['cpu_s']:6.2f} s "
                  f"(daemon {r['daemon_cpu_s']:.2f} s) files {r['files']}/{a.files}"
                  + ("" if r["exit"] == 0 else f" EXIT {r['exit']}"), flush=True)
    if a.strace:
        for t in tools:
            wait_idle(a.nginx_pid, settle, idle_wait)
            r = one_run(a, env, t["key"], f"s8-{t['key']}-strace", logs, traced=True)
            t["traced"] = r
            calls = {k: r["client_calls"].get(k, 0) + r["daemon_calls"].get(k, 0) for k in SHOWN}
            print(f"bench: s8 under strace {t['label']:<48} {r['wall_s']:7.2f} s "
                  + " ".join(f"{k} {v}" for k, v in calls.items()), flush=True)
    for t in tools:
        ok = [r for r in t["runs"] if r["exit"] == 0 and r["files"] == a.files]
        t["summary"] = None if not ok else {"wall_s": rng([r["wall_s"] for r in ok]), "cpu_s": rng([r["cpu_s"] for r in ok]),
                                            "daemon_cpu_s": rng([r["daemon_cpu_s"] for r in ok])}
    e, d = tools[0]["runs"], tools[1]["runs"]
    ratios = [rd["wall_s"] / re_["wall_s"] for re_, rd in zip(e, d)
              if re_["exit"] == 0 and rd["exit"] == 0 and re_["files"] == a.files and rd["files"] == a.files]
    return {"key": "9", "title": f"{a.files:,} small files, embedded against daemon-hosted",
            "files": a.files, "bytes": a.bytes, "repo": a.repo, "runs": a.runs, "tools": tools,
            "ratio_daemon_embedded": rng(ratios), "load": a.load, "command": a.command}


def render(sc, header, fr, tool_rows):
    L = ["", f"## Scenario {sc['key']}: {sc['title']}", "",
         f"`{sc['repo']}`: {sc['files']:,} git files of 0.2–4 KiB ({sc['bytes'] / 1048576:.1f} MiB) in 5 directories, "
         "on nginx without a limit. `speech download REPO --cache-base DIR` with no daemon, and with "
         "`speech-fetchd --cache-base DIR` serving DIR (started before the timed run, stopped with SIGTERM after it), "
         "alternating, each into a fresh DIR. Wall time is the client's; CPU is the client's plus the daemon's and "
         "its workers'. *× embedded* is each round's daemon-hosted wall time over the same round's embedded one. "
         f"Load average before the runs: {sc.get('load', '?')}. " + header(sc) + ".", "",
         "| tool | wall s | CPU s | of which daemon CPU s | × embedded |", "|---|---|---|---|---|"]
    x = sc.get("ratio_daemon_embedded")
    L += tool_rows(sc["tools"], 4, lambda t, s: (
        f"| {t['label']} | {fr(s['wall_s'], '{:.2f}')} | {fr(s['cpu_s'], '{:.2f}')} | {fr(s['daemon_cpu_s'], '{:.2f}')} | "
        + ("1 (baseline)" if t["key"] == "embedded" else (fr(x, "{:.2f}") if x else "–")) + " |"))
    traced = [t for t in sc["tools"] if t.get("traced")]
    if traced:
        L += ["", "The same download once more per mode under `strace -f -c -e trace=" + TRACED + "` (caller, and "
              "daemon with its workers; not timed): calls made.", "",
              "| tool | process | " + " | ".join(SHOWN) + " |", "|---|---|" + "---|" * len(SHOWN)]
        for t in traced:
            r = t["traced"]
            rows = [("caller", r["client_calls"])] + ([("daemon and workers", r["daemon_calls"])] if t["key"] == "daemon" else [])
            for who, calls in rows:
                L.append(f"| {t['label']} | {who} | " + " | ".join(str(calls.get(k, 0)) for k in SHOWN) + " |")
    L += ["", f"Command: `{sc['command']}`."]
    return L


def verdict(sc):
    x = sc.get("ratio_daemon_embedded")
    e, d = (t["summary"] for t in sc["tools"])
    if not (x and e and d):
        return [f"- Scenario {sc['key']}: **a mode failed** in every run (see benchmarks.json)."]
    return [f"- Scenario {sc['key']} ({sc['files']:,} small files): daemon-hosted {d['wall_s']['median']:.1f} s against embedded "
            f"{e['wall_s']['median']:.1f} s: **{x['median']:.2f}×** (target ≤ {GOAL}: "
            f"{'met' if x['median'] <= GOAL else '**missed**'})."]
