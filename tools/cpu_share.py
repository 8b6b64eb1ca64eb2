"""Where the CPU goes while two workers serve ``GET /answer/<id>`` at 64 clients (loopback only).

``python -m tools.cpu_share [SECONDS] [--workers 1|2]`` starts what ``make load`` starts for its
two-worker row (a throwaway redis-server, ``rag-contract serve --workers 2 --redis URL`` from the
load run's project copy, wrk with the load run's script), or with ``--workers 1`` its one-worker
row (buckets in memory, no redis), runs wrk for SECONDS (default 8), and prints the CPU seconds
each process used meanwhile (the supervisor, each worker, redis-server, wrk) next to the whole
machine's busy CPU seconds from /proc/stat, so what other work on the machine took is the
difference, and the workers' CPU per request served. A second worker can only add throughput
with a core to run on: on 2 cores, wrk, redis and anything else running share them with the
workers; and what each request costs a worker with the shared store, against one worker with
buckets in memory, is the price of sharing them.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from rag_contract.project import find_root
from tools import loadtest


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # USER_HZ is 100 on Linux


def machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / 100.0, sum(values) / 100.0


def redis_pid_on(port: int) -> int:
    """The redis-server started with ``--port port`` (ours: the port is fresh)."""
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit():
                args = (proc / "cmdline").read_bytes().split(b"\0")
                # redis-server retitles itself "redis-server HOST:PORT"; before that, argv holds the port
                title = b" ".join(args)
                if b"redis-server" in args[0] and (f":{port}".encode() in title or str(port).encode() in args):
                    return int(proc.name)
    raise RuntimeError(f"no redis-server on port {port}")


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def main(seconds: int = 8, workers: int = 2, question_id: str = loadtest.DEFAULT_QUESTION_ID) -> None:
    wrk = shutil.which("wrk")
    if wrk is None:
        raise SystemExit("wrk not found on PATH")
    root = find_root()
    with tempfile.TemporaryDirectory(prefix="ragc-cpu-") as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        script = tmp / "load.lua"
        script.write_text(loadtest.WRK_SCRIPT, encoding="utf-8")
        tree = loadtest.load_tree(root, tmp / "project")
        redis_url = stack.enter_context(loadtest.own_redis(tmp)) if workers > 1 else None
        argv = loadtest.serve_argv(workers, redis_url)
        env = loadtest.server_env()
        proc, port = stack.enter_context(loadtest.running_server(argv, tree, env, tmp / "s.log", workers))
        url = f"http://{loadtest.HOST}:{port}/answer/{question_id}"
        loadtest.run_wrk(wrk, url, 4, 1, script, 9)  # warm: the first requests pay lazy imports
        if workers > 1:
            spawned = [p for p in children(proc.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
            pids = {"supervisor": proc.pid, **{f"worker {i}": p for i, p in enumerate(spawned, 1)}}
            assert redis_url is not None
            pids["redis-server"] = redis_pid_on(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
        else:
            pids = {"worker 1": proc.pid}  # the server process answers itself
        before = {name: cpu_s(pid) for name, pid in pids.items()}
        busy0, total0 = machine_busy_s()
        cmd = loadtest.wrk_command(wrk, url, 64, seconds, script, 0)
        load = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        wrk_cpu = 0.0
        with contextlib.suppress(OSError):  # wrk's last sample: /proc forgets it once it exits
            while load.poll() is None:
                wrk_cpu = cpu_s(load.pid)
                time.sleep(0.2)
        out = load.communicate()[0]
        busy1, total1 = machine_busy_s()
        level = loadtest.parse_wrk(out, 64)
        used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
        used["wrk (to its last sample)"] = wrk_cpu
        wall_cores = (total1 - total0) / max(seconds, 1)
        print(f"{level.rps:.0f} req/s at 64 clients over {seconds} s; machine: {wall_cores:.1f} cores")
        for name, s in used.items():
            print(f"  {name:<26} {s:6.2f} CPU s ({s / seconds:.2f} of a core)")
        ours = sum(used.values())
        busy = busy1 - busy0
        print(f"  {'all of the above':<26} {ours:6.2f} CPU s")
        print(f"  {'machine busy':<26} {busy:6.2f} CPU s of {total1 - total0:.2f}")
        print(f"  {'other work on the machine':<26} {busy - ours:6.2f} CPU s")
        served = level.rps * seconds
        in_workers = sum(v for k, v in used.items() if k.startswith("worker"))
        if served:
            print(f"  {'workers per request':<26} {in_workers / served * 1e6:6.0f} CPU µs")


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m tools.cpu_share", description=__doc__.split("\n")[0])
    p.add_argument("seconds", nargs="?", type=int, default=8, help="how long wrk runs (default 8)")
    p.add_argument("--workers", type=int, choices=(1, 2), default=2, help="the load run's row to start")
    args = p.parse_args()
    main(args.seconds, args.workers)
