"""scenario6.py - scenario 6 of scripts/bench: BENCH_WAITERS (default 200) `speech wait`
processes on one daemon-hosted download of about 5 s, BENCH_S6_RUNS (default 3) rounds: wake
latency from the final file's appearance (polled every 2 ms) to each waiter's exit (pidfd), and
the waiters' CPU while they wait (/proc/PID/task/*/schedstat). run() returns its entry of
benchmarks.json's "more" (page.py renders it).
"""
import os
import select
import shutil
import threading
import time

from measure import Daemon, fresh_target, measure_first, measure_normally, med, pct, proc_cpu_ns, spawn, timed

N_WAITERS = int(os.environ.get("BENCH_WAITERS", "200"))
S6_RUNS = int(os.environ.get("BENCH_S6_RUNS", "3"))


def run(a, base_env, logs):
    endpoint = f"http://127.0.0.1:{a.port_wait}"
    env = dict(base_env, HF_ENDPOINT=endpoint)
    results = []
    for rnd in range(S6_RUNS):
        target, base = fresh_target(a.work, f"s6-{rnd}")
        final = os.path.join(base, "models", a.repo, a.file)
        daemon = Daemon(a.fetchd, base, env, os.path.join(logs, f"s6-fetchd-{rnd}.log"))
        t_req = time.monotonic()
        r = timed([a.speech, "download", a.repo, "--cache-base", base, "--detach"], env,
                  os.path.join(logs, f"s6-detach-{rnd}.log"), os.devnull)
        if r["exit"] != 0:
            daemon.stop()
            raise SystemExit(f"bench: s6: speech download --detach failed (exit {r['exit']})")
        state = {"t_final": None, "t_done": None}
        stop = threading.Event()
        done_dir = os.path.join(base, "spool", "done")

        def poll_final():
            # The final file, then the request's done/ marker (what the waiters sleep on).
            measure_first()
            while not stop.is_set():
                now = time.monotonic()
                if state["t_final"] is None and os.path.exists(final):
                    state["t_final"] = now
                if state["t_done"] is None:
                    try:
                        if os.listdir(done_dir):
                            state["t_done"] = now
                    except OSError:
                        pass
                if state["t_final"] is not None and state["t_done"] is not None:
                    return
                time.sleep(0.002)

        poller = threading.Thread(target=poll_final, daemon=True)
        poller.start()
        waiters = {}
        log_path = os.path.join(logs, f"s6-waiters-{rnd}.log")
        t_spawn0 = time.monotonic()
        for _ in range(N_WAITERS):
            pid = spawn([a.speech, "wait", a.repo, "--cache-base", base, "--timeout", "120"], env, log_path)
            waiters[pid] = {"fd": os.pidfd_open(pid)}
        t_spawned = time.monotonic()
        samples = []  # (t, summed CPU ns of the live waiters, live count)

        def sample_cpu():
            # Only the samples before the final file count; stop then, so this thread holds
            # no lock the timing threads need while the waiters wake.
            while not stop.is_set() and state["t_final"] is None:
                t = time.monotonic()
                ticks = [proc_cpu_ns(p) for p in list(waiters)]
                live = [x for x in ticks if x is not None]
                samples.append((t, sum(live), len(live)))
                stop.wait(0.1)

        sampler = threading.Thread(target=sample_cpu, daemon=True)
        sampler.start()
        realtime = measure_first()  # after the spawns: the waiters keep the normal policy
        ep = select.epoll()
        by_fd = {}
        for pid, w in waiters.items():
            ep.register(w["fd"], select.EPOLLIN)
            by_fd[w["fd"]] = pid
        left = len(waiters)
        deadline = time.monotonic() + 180
        while left and time.monotonic() < deadline:
            for fd, _ in ep.poll(1.0):
                t = time.monotonic()
                pid = by_fd[fd]
                ep.unregister(fd)
                os.close(fd)
                _, status, ru = os.wait4(pid, 0)
                waiters[pid].update(t_exit=t, exit=os.waitstatus_to_exitcode(status),
                                    cpu_s=ru.ru_utime + ru.ru_stime)
                left -= 1
        stop.set()
        measure_normally()
        poller.join()
        sampler.join()
        daemon.stop()
        t_final = state["t_final"]
        ws = list(waiters.values())
        exits = {}
        for w in ws:
            exits[str(w.get("exit"))] = exits.get(str(w.get("exit")), 0) + 1
        lat = [(w["t_exit"] - t_final) * 1000 for w in ws if t_final and "t_exit" in w and w.get("exit") == 0]
        early = sum(1 for w in ws if t_final and "t_exit" in w and w["t_exit"] < t_final)
        # CPU while waiting: from the first sample at least 0.5 s after the last spawn (start-up
        # done) to the last sample before the final file appeared.
        win = [s for s in samples if s[0] >= t_spawned + 0.5 and t_final and s[0] < t_final]
        wait_cpu = None
        if len(win) >= 2:
            d_ticks = win[-1][1] - win[0][1]
            span = win[-1][0] - win[0][0]
            wait_cpu = {"window_s": span, "cpu_s_all_waiters": d_ticks / 1e9,
                        "cpu_ms_per_waiter_per_s": d_ticks / 1e9 * 1000 / N_WAITERS / span,
                        "waiters_live": win[-1][2]}
        t_done = state["t_done"]
        res = {"round": rnd, "waiters": N_WAITERS, "spawn_s": t_spawned - t_spawn0, "harness_realtime": realtime,
               "done_marker_after_final_ms": ((t_done - t_final) * 1000) if t_done and t_final else None,
               "download_s": (t_final - t_req) if t_final else None,
               "final_after_spawned_s": (t_final - t_spawned) if t_final else None,
               "exits": exits, "exited_before_final": early,
               "wake_ms": {"median": med(lat), "p99": pct(lat, 99), "min": min(lat) if lat else None,
                           "max": max(lat) if lat else None},
               "wait_cpu": wait_cpu,
               "cpu_per_waiter_total_ms": {"median": med([w["cpu_s"] * 1000 for w in ws if "cpu_s" in w]),
                                           "max": max([w["cpu_s"] * 1000 for w in ws if "cpu_s" in w] or [0])}}
        if os.path.exists(final):
            res["verified"] = os.path.getsize(final) == a.size
        results.append(res)
        print(f"bench: s6 round {rnd + 1}: spawn {res['spawn_s']:.2f} s, download {res['download_s']} s, "
              f"wake median {res['wake_ms']['median']} ms p99 {res['wake_ms']['p99']} ms, exits {exits}, "
              f"early {early}, wait cpu {wait_cpu}, final file at monotonic {t_final}", flush=True)
        shutil.rmtree(target, ignore_errors=True)
    return {"key": "6", "title": f"{N_WAITERS} `speech wait` processes on one daemon-hosted download",
            "runs": S6_RUNS, "rate_limit": a.wait_rate, "results": results}
