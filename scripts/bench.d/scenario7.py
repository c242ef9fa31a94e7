"""scenario7.py - scenario 7 of scripts/bench: what the bandwidth cap and the metrics
endpoint cost when they do not limit. Scenario 1's file on nginx without a limit, the same
`speech download` five ways in every round: through a speech-fetchd without options, with
`--metrics` (scraped every second by this runner during the download), with `--max-rate` far
above the link, and embedded without and with `--max-rate` far above the link. The figure is
each variant's throughput over its baseline's in the same round (the daemon without options,
or the embedded download without a cap), as the median of the rounds. run() returns its entry
of benchmarks.json's "more"; render() and verdict() are what page.py shows of it.
"""
import os
import shutil
import threading
import time
import urllib.request

from common import free_port, sha256_file
from measure import (MIB, Daemon, fresh_target, keep, log_tail_on_failure, rng, self_cpu, spawn, system_cpu, tree_cpu,
                     wait_idle)

FAR_ABOVE = "100G"  # 100 GiB/s: the cap never waits on loopback (about 1 GiB/s here)
TARGET = 0.99       # at most 1 % of throughput


def tools():
    return [dict(key="daemon", label="through speech-fetchd", daemon=[], args=[], base="daemon"),
            dict(key="daemon_metrics", label="through speech-fetchd --metrics, scraped every 1 s", daemon=["--metrics"],
                 args=[], base="daemon"),
            dict(key="daemon_cap", label=f"through speech-fetchd --max-rate {FAR_ABOVE}",
                 daemon=["--max-rate", FAR_ABOVE], args=[], base="daemon"),
            dict(key="embedded", label="embedded", daemon=None, args=[], base="embedded"),
            dict(key="embedded_cap", label=f"embedded, --max-rate {FAR_ABOVE}", daemon=None,
                 args=["--max-rate", FAR_ABOVE], base="embedded")]


def scrape_every_second(port, stop, counts):
    while not stop.wait(1.0):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                answer.read()
            counts["scrapes"] += 1
        except OSError:
            counts["failed"] += 1


def one_run(a, t, rnd, attempt, env, logs, settle, idle_wait):
    """One download of variant t into a fresh base; its figures (the daemon stopped after)."""
    target, base = fresh_target(a.work, f"s7-{t['key']}-{rnd}")
    log_path = os.path.join(logs, f"s7-{t['key']}-{rnd}-{attempt}.log")
    waited = wait_idle(a.nginx_pid, settle, idle_wait)
    port = free_port() if t["daemon"] == ["--metrics"] else None
    extra = ["--metrics", f"127.0.0.1:{port}"] if port else list(t["daemon"] or [])
    daemon = Daemon(a.fetchd, base, env, log_path + ".fetchd", extra=extra) if t["daemon"] is not None else None
    time.sleep(0.2)
    counts = {"scrapes": 0, "failed": 0}
    stop = threading.Event()
    scraper = threading.Thread(target=scrape_every_second, args=(port, stop, counts)) if port else None
    d_cpu0 = tree_cpu(daemon.pid) if daemon else 0.0
    sys0, _ = system_cpu()
    self0 = self_cpu()
    if scraper:
        scraper.start()
    t0 = time.monotonic()
    pid = spawn([a.speech, "download", a.repo, "--cache-base", base] + t["args"], env, log_path)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    stop.set()
    if scraper:
        scraper.join()
    d_cpu = (tree_cpu(daemon.pid) - d_cpu0) if daemon else 0.0
    sys1, _ = system_cpu()
    if daemon:
        daemon.stop()
    r = {"round": rnd, "waited_s": waited, "exit": os.waitstatus_to_exitcode(status), "wall_s": wall,
         "mib_s": a.size / MIB / wall, "cpu_s": ru.ru_utime + ru.ru_stime + d_cpu, "scrapes": counts["scrapes"],
         "scrapes_failed": counts["failed"]}
    r["other_cpu_s"] = max(0.0, (sys1 - sys0) - r["cpu_s"] - (self_cpu() - self0))
    out = os.path.join(base, "models", a.repo, a.file)
    if r["exit"] == 0 and t["verified"] is None:
        t["verified"] = os.path.getsize(out) == a.size and sha256_file(out) == a.sha256
    log_tail_on_failure(r, log_path)
    print(f"bench: s7 round {rnd + 1}/{a.runs} {t['label']:<52} {wall:6.2f} s {r['mib_s']:5.0f} MiB/s "
          f"cpu {r['cpu_s']:5.2f} s" + (f" scrapes {counts['scrapes']}" if port else "")
          + ("" if r["exit"] == 0 else f" EXIT {r['exit']}"), flush=True)
    shutil.rmtree(target, ignore_errors=True)
    return r


def run(a, base_env, logs, settle, idle_wait):
    env = dict(base_env, HF_ENDPOINT=f"http://127.0.0.1:{a.port_free}")
    ts = tools()
    for t in ts:
        t.update(runs=[], verified=None)
    for rnd in range(a.runs):
        for t in ts[rnd % len(ts):] + ts[:rnd % len(ts)]:  # the order rotates each round
            attempt = 0
            while not keep(t, one_run(a, t, rnd, attempt, env, logs, settle, idle_wait), attempt, long_ok=False):
                attempt += 1
    by_key = {t["key"]: t for t in ts}
    for t in ts:
        ok = {r["round"]: r for r in t["runs"] if r["exit"] == 0}
        base_ok = {r["round"]: r for r in by_key[t["base"]]["runs"] if r["exit"] == 0}
        paired = [ok[k]["mib_s"] / base_ok[k]["mib_s"] for k in sorted(ok) if k in base_ok]
        paired_cpu = [ok[k]["cpu_s"] / base_ok[k]["cpu_s"] for k in sorted(ok) if k in base_ok]
        t["summary"] = None if not ok else {
            "wall_s": rng([r["wall_s"] for r in ok.values()]), "mib_s": rng([r["mib_s"] for r in ok.values()]),
            "cpu_s": rng([r["cpu_s"] for r in ok.values()]), "ratio": rng(paired) if paired else None,
            "cpu_ratio": rng(paired_cpu) if paired_cpu else None,
            "scrapes": sum(r["scrapes"] for r in ok.values()),
        }
    return {"key": "7", "title": "what the bandwidth cap and the metrics cost when they do not limit",
            "runs": a.runs, "tools": ts, "far_above": FAR_ABOVE}


def render(sc, header, fr, tool_rows):
    L = ["", f"## Scenario 7: {sc['title']}", "",
         "Scenario 1's file on nginx without a limit (the fastest link here, so a per-chunk cost shows most), "
         "`speech download bench/OneGiB --cache-base DIR` five ways in every round, the order rotating: through "
         "`speech-fetchd --cache-base DIR` without options; with `--metrics 127.0.0.1:PORT` while the runner "
         "GETs `/metrics` every second (a Prometheus scraping 15 times as often as its default); with "
         f"`--max-rate {sc['far_above']}` (far above the link, so every chunk is charged to the node's schedule "
         "in /dev/shm, under flock 5 ms of the cap at a time, but never waits); embedded; and embedded with `--max-rate "
         f"{sc['far_above']}` (the call's schedule in memory). *MiB/s × baseline* is each run's MiB/s over its "
         "baseline's in the same round (the daemon without options, or embedded without a cap), *CPU × "
         "baseline* the same for CPU seconds (the client's plus the daemon's and its workers'): the median and "
         "range over the rounds. On loopback without a limit a download is bound by the CPU, so the CPU a "
         "variant adds is the throughput it costs on an idle machine; the CPU ratio is the figure judged, because "
         "wall time swings with whatever else the machine runs while CPU time barely does. " + header(sc) + ".", "",
         "| variant | wall s | MiB/s | CPU s | MiB/s × baseline | CPU × baseline |", "|---|---|---|---|---|---|"]
    L += tool_rows(sc["tools"], 5, lambda t, s: (
        f"| {t['label']} | {fr(s['wall_s'], '{:.2f}')} | {fr(s['mib_s'], '{:.0f}')} | {fr(s['cpu_s'], '{:.2f}')} | "
        + (f"{fr(s['ratio'], '{:.3f}')} | {fr(s['cpu_ratio'], '{:.3f}')}" if t["key"] != t["base"] and s["ratio"]
           else "1 (baseline) | 1 (baseline)") + " |"
        + ("" if t.get("verified") is not False else " **wrong output**")))
    L += ["", "Commands: `BENCH_SCENARIOS=7 scripts/bench` runs this scenario alone (merged into this page); each round "
          "runs `speech-fetchd --cache-base DIR [--metrics 127.0.0.1:PORT | --max-rate "
          f"{sc['far_above']}]` then `speech download bench/OneGiB --cache-base DIR`, and `speech download "
          f"bench/OneGiB --cache-base DIR [--max-rate {sc['far_above']}]` with no daemon."]
    return L


def verdict(sc):
    s = {t["key"]: t["summary"] for t in sc["tools"]}
    parts, worst = [], None
    for key, name in (("daemon_metrics", "--metrics scraped every 1 s"), ("daemon_cap", f"speech-fetchd --max-rate {sc['far_above']}"),
                      ("embedded_cap", f"speech download --max-rate {sc['far_above']}")):
        if s.get(key) and s[key]["cpu_ratio"]:
            cpu, tp = s[key]["cpu_ratio"], s[key]["ratio"]
            worst = cpu["median"] if worst is None else max(worst, cpu["median"])
            parts.append(f"{name}: CPU {cpu['median']:.3f}× (rounds {cpu['min']:.3f}–{cpu['max']:.3f}), "
                         f"MiB/s {tp['median']:.3f}×")
        else:
            parts.append(f"{name} failed")
    met = worst is not None and worst <= 2 - TARGET and len(parts) == 3
    return ["- Scenario 7 (over the same round's run without the option, median): " + "; ".join(parts)
            + f". Target, at most 1 % more CPU at no cap (CPU × baseline ≤ {2 - TARGET:.2f}): "
            + ("met" if met else "**missed**") + "."]
