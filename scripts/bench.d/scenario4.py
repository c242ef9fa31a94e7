"""scenario4.py - scenario 4 of scripts/bench: scenario 2's file and limit, `speech
download` embedded against the same command with a `speech-fetchd` serving the cache base
(started before the timed run, stopped with SIGTERM after). Memory: the peak of the sum of PSS
over the client, the daemon and its workers. run() returns its entry of benchmarks.json's "more"
(page.py renders it).
"""
import os
import shutil
import time

from measure import (MIB, Daemon, Sampler, fresh_target, keep, log_tail_on_failure, med, read_log, rng,
                     self_cpu, spawn, system_cpu, tree_cpu, wait_idle)
from common import sha256_file


def run(a, base_env, logs, settle, idle_wait):
    endpoint = f"http://127.0.0.1:{a.port_limited}"
    access_log = os.path.join(a.work, "nginx", "logs", f"access-{a.port_limited}.log")
    env = dict(base_env, HF_ENDPOINT=endpoint)
    tools = [dict(key="embedded", label="speech download, embedded (ours)", daemon=False, runs=[], verified=None),
             dict(key="daemon", label="speech download through speech-fetchd (ours)", daemon=True, runs=[],
                  verified=None)]
    for rnd in range(a.runs):
        order = tools[rnd % 2:] + tools[:rnd % 2]
        for t in order:
            for attempt in range(3):
                target, base = fresh_target(a.work, f"s4-{t['key']}-{rnd}")
                log_path = os.path.join(logs, f"s4-{t['key']}-{rnd}-{attempt}.log")
                waited = wait_idle(a.nginx_pid, settle, idle_wait)
                daemon = Daemon(a.fetchd, base, env, log_path + ".fetchd") if t["daemon"] else None
                time.sleep(0.2)  # the supervisor's start-up work is not part of the download
                log_offset = os.path.getsize(access_log) if os.path.exists(access_log) else 0
                d_cpu0 = tree_cpu(daemon.pid) if daemon else 0.0
                sys0, _ = system_cpu()
                self0 = self_cpu()
                t0 = time.monotonic()
                pid = spawn([a.speech, "download", a.repo, "--cache-base", base], env, log_path)
                sampler = Sampler([pid] + ([daemon.pid] if daemon else []), interval=0.05)
                sampler.start()
                _, status, ru = os.wait4(pid, 0)
                wall = time.monotonic() - t0
                sampler.stop.set()
                sampler.join()
                d_cpu = (tree_cpu(daemon.pid) - d_cpu0) if daemon else 0.0
                sys1, _ = system_cpu()
                clean_stop = daemon.stop() if daemon else None
                client_cpu = ru.ru_utime + ru.ru_stime
                time.sleep(0.2)
                r = {"round": rnd, "waited_s": waited, "exit": os.waitstatus_to_exitcode(status), "wall_s": wall,
                     "client_cpu_s": client_cpu, "daemon_cpu_s": d_cpu, "cpu_s": client_cpu + d_cpu,
                     "peak_pss_mib": sampler.peak_pss / 1024, "peak_rss_mib": sampler.peak_rss / 1024,
                     "processes_at_peak": sampler.peak_procs, "daemon_stopped_by_term": clean_stop,
                     "server": read_log(access_log, log_offset)}
                other = max(0.0, (sys1 - sys0) - r["cpu_s"] - (self_cpu() - self0))
                r["other_cpu_s"] = other
                out = os.path.join(base, "models", a.repo, a.file)
                if r["exit"] == 0 and t["verified"] is None:
                    t["verified"] = os.path.getsize(out) == a.size and sha256_file(out) == a.sha256
                    r["verified"] = t["verified"]
                log_tail_on_failure(r, log_path)
                print(f"bench: s4 round {rnd + 1}/{a.runs} {t['label']:<48} {wall:6.2f} s "
                      f"{a.size / MIB / wall:5.0f} MiB/s cpu {r['cpu_s']:5.2f} s pss {r['peak_pss_mib']:5.1f} MiB "
                      f"({r['processes_at_peak']} procs) req {r['server'].get('requests', 0)}/"
                      f"{r['server'].get('connections', 0)}" + ("" if r["exit"] == 0 else f" EXIT {r['exit']}"),
                      flush=True)
                shutil.rmtree(target, ignore_errors=True)
                if keep(t, r, attempt, long_ok=False):
                    break
    for t in tools:
        ok = [r for r in t["runs"] if r["exit"] == 0]
        t["summary"] = None if not ok else {
            "wall_s": rng([r["wall_s"] for r in ok]),
            "mib_s": rng([a.size / MIB / r["wall_s"] for r in ok]),
            "cpu_s": rng([r["cpu_s"] for r in ok]),
            "peak_pss_mib": rng([r["peak_pss_mib"] for r in ok]),
            "peak_rss_mib": rng([r["peak_rss_mib"] for r in ok]),
            "processes_at_peak": med([r["processes_at_peak"] for r in ok]),
            "requests": med([r["server"].get("requests", 0) for r in ok]),
            "connections": med([r["server"].get("connections", 0) for r in ok]),
        }
    e, d = tools[0]["summary"], tools[1]["summary"]
    ratio = (d["mib_s"]["median"] / e["mib_s"]["median"]) if e and d else None
    return {"key": "4", "title": f"embedded against daemon-hosted, scenario 2's file and `limit_rate {a.rate_limit}`",
            "runs": a.runs, "tools": tools, "ratio_daemon_embedded": ratio, "limit_mib_s": 16 * int(a.rate_limit.rstrip("m"))}
