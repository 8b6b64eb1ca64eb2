"""The image, built and run hardened: what the container test checks and what the report records.

Contract:
- ``HARDENING`` is the one list of hardening flags: the README's ``docker run`` line
  (``run_line``) and ``compose.yaml`` say the same (tests hold all three together). The root
  filesystem is read-only with no tmpfs at all, because the service writes nothing at run time;
  every capability is dropped; no process may gain privileges; the port is published on
  127.0.0.1 only.
- ``build(image)`` runs ``docker build --network host`` on the checkout's Dockerfile.
- ``run_hardened(root, image)`` creates a container with ``HARDENING`` and the host's network
  (a daemon without a bridge, as in CI, cannot publish a port; the app then binds 127.0.0.1
  itself through ``serve --host``), starts it, and checks: ``GET /health`` serving,
  ``GET /answer/q11`` answered with the committed index version in ``X-Index-Version``,
  ``POST /ask`` answered (the local model loads from a read-only filesystem), a 429 within
  ``rate_limit.max_client_burst + 1`` further requests, the process's user id (not 0), no
  effective capabilities and ``NoNewPrivs`` in ``/proc/1/status``, and that ``touch`` fails on
  the root filesystem and on ``/tmp``. It times ``docker create`` (the storage driver's copy of
  the image) and start to first 200 from ``/health`` separately. The container is removed in a
  ``finally``; a failed step raises ``ContainerError`` with the container's log.
- ``python -m tools.container`` builds, runs, and writes ``eval/results/container.json``
  (figures vary by machine and storage driver: tests hold its structure and bounds, never
  exact values); ``render(report)`` is the README's block for it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rag_contract.config.thresholds import load_thresholds
from rag_contract.project import Paths, find_root

IMAGE = "rag-contract"
HARDENING: tuple[str, ...] = ("--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true")
PUBLISH: tuple[str, ...] = ("-p", "127.0.0.1:8000:8000")
BUILD_TIMEOUT_S = 1800
HEALTH_TIMEOUT_S = 180.0
ASK_TIMEOUT_S = 120.0  # the model loads from the image once, on the first question
DOCKER_TIMEOUT_S = 300
# Bounds a report must stay within on any machine that can run the image at all.
SIZE_BOUNDS_MB = (50.0, 2000.0)
SECONDS_BOUND = 300.0


class ContainerError(RuntimeError):
    """A step of building or running the image failed; the message says which, with the log."""


@dataclass(frozen=True)
class Checks:
    health_serving: bool
    answer_status: int
    index_version_header: str | None
    index_version_committed: str
    ask_status: int
    burst: int
    first_429_after: int | None  # requests sent after the checks above until the first 429
    uid: int
    user: str
    cap_eff: str
    no_new_privs: bool
    root_write_refused: bool
    tmp_write_refused: bool

    def failures(self) -> list[str]:
        """What the hardened container got wrong; empty when every check holds."""
        wrong = []
        if not self.health_serving:
            wrong.append("/health: not serving")
        if self.answer_status != 200:
            wrong.append(f"/answer/q11: status {self.answer_status}")
        if self.index_version_header != self.index_version_committed:
            wrong.append(f"X-Index-Version {self.index_version_header!r} != {self.index_version_committed!r}")
        if self.ask_status != 200:
            wrong.append(f"POST /ask: status {self.ask_status}")
        if self.first_429_after is None:
            wrong.append(f"no 429 within {self.burst + 1} requests")
        if self.uid == 0:
            wrong.append("the process runs as root")
        if int(self.cap_eff, 16) != 0:
            wrong.append(f"effective capabilities {self.cap_eff}")
        if not self.no_new_privs:
            wrong.append("NoNewPrivs is not set")
        if not self.root_write_refused:
            wrong.append("the root filesystem accepted a write")
        if not self.tmp_write_refused:
            wrong.append("/tmp accepted a write")
        return wrong


@dataclass(frozen=True)
class Run:
    image_size_bytes: int
    create_s: float
    start_to_health_s: float
    checks: Checks


def run_line(image: str = IMAGE) -> str:
    """The README's hardened ``docker run`` line."""
    return " ".join(("docker", "run", "--rm", *HARDENING, *PUBLISH, image))


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        step = " ".join(a for a in args[:2] if not a.startswith("-"))
        raise ContainerError(f"docker {step} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc


def build(root: Path, image: str = IMAGE) -> None:
    docker("build", "--network", "host", "--quiet", "-t", image, str(root), timeout=BUILD_TIMEOUT_S)


def image_size(image: str) -> int:
    return int(docker("image", "inspect", image, "--format", "{{.Size}}").stdout.strip())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(url: str, body: dict | None = None) -> tuple[int, Mapping[str, str], bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def _ask(url: str, question: str) -> int:
    """The status of ``POST /ask``, asked again as ``Retry-After`` says while the model loads (the
    first question starts the load; until it ends the answer is 503 ``embedder_loading``)."""
    deadline = time.monotonic() + ASK_TIMEOUT_S
    while True:
        status, headers, body = _request(url + "/ask", {"question": question})
        loading = status == 503 and b"embedder_loading" in body
        if not loading or time.monotonic() > deadline:
            return status
        time.sleep(float(headers.get("Retry-After") or 1))


def _wait_for_health(url: str, cid: str) -> float:
    """Seconds until ``/health`` first answers 200 (a refused connection costs no token)."""
    start = time.monotonic()
    while time.monotonic() - start < HEALTH_TIMEOUT_S:
        try:
            if _request(url + "/health")[0] == 200:
                return time.monotonic() - start
        except OSError:
            pass
        if docker("inspect", "--format", "{{.State.Running}}", cid).stdout.strip() != "true":
            raise ContainerError("the container exited before /health answered")
        time.sleep(0.1)
    raise ContainerError(f"/health did not answer within {HEALTH_TIMEOUT_S:.0f} s")


def _write_refused(cid: str, path: str) -> bool:
    proc = docker("exec", cid, "touch", path, check=False)
    return proc.returncode != 0 and "Read-only file system" in proc.stderr


def _status_field(status: str, name: str) -> str:
    for line in status.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    raise ContainerError(f"/proc/1/status has no {name}")


def _check(url: str, cid: str, root: Path) -> Checks:
    paths = Paths(root)
    committed = json.loads((paths.index / "meta.json").read_text(encoding="utf-8"))["version"]
    burst = load_thresholds(paths.thresholds).rate_limit.max_client_burst
    status, _, body = _request(url + "/health")
    serving = status == 200 and json.loads(body).get("serving") is True
    answer_status, headers, _ = _request(url + "/answer/q11")
    ask_status = _ask(url, "Which hosts receive a cookie set with a Domain attribute?")
    first_429 = None
    for n in range(1, burst + 2):
        if _request(url + "/health")[0] == 429:
            first_429 = n
            break
    proc_status = docker("exec", cid, "cat", "/proc/1/status").stdout
    return Checks(
        health_serving=serving,
        answer_status=answer_status,
        index_version_header=headers.get("X-Index-Version"),
        index_version_committed=committed,
        ask_status=ask_status,
        burst=burst,
        first_429_after=first_429,
        uid=int(docker("exec", cid, "id", "-u").stdout.strip()),
        user=docker("exec", cid, "id", "-un").stdout.strip(),
        cap_eff=_status_field(proc_status, "CapEff"),
        no_new_privs=_status_field(proc_status, "NoNewPrivs") == "1",
        root_write_refused=_write_refused(cid, "/app/written-at-run-time"),
        tmp_write_refused=_write_refused(cid, "/tmp/written-at-run-time"),
    )


def run_hardened(root: Path, image: str = IMAGE) -> Run:
    port = _free_port()
    serve = ("rag-contract", "serve", "--host", "127.0.0.1", "--port", str(port))
    started = time.monotonic()
    cid = docker("create", *HARDENING, "--network", "host", image, *serve).stdout.strip()
    create_s = time.monotonic() - started
    try:
        docker("start", cid)
        url = f"http://127.0.0.1:{port}"
        try:
            start_to_health_s = _wait_for_health(url, cid)
            checks = _check(url, cid, root)
        except (ContainerError, OSError) as exc:
            log = docker("logs", "--tail", "40", cid, check=False)
            raise ContainerError(f"{exc}\n--- container log ---\n{log.stdout}{log.stderr}") from exc
    finally:
        docker("rm", "--force", cid, check=False)
    return Run(image_size(image), round(create_s, 2), round(start_to_health_s, 2), checks)


def report(run: Run, image: str = IMAGE, base: str = "python:3.11-slim") -> dict[str, Any]:
    info = docker("info", "--format", "{{.ServerVersion}} {{.Driver}}").stdout.split()
    base_comment = docker("image", "inspect", base, "--format", "{{.Comment}}", check=False).stdout.strip()
    return {
        "meta": {"date": dt.date.today().isoformat(), "cpu_count": os.cpu_count(), "docker": info[0]},
        "image": image,
        "image_size_mb": round(run.image_size_bytes / 1e6, 1),
        "base_image": {
            "name": base,
            "size_mb": round(image_size(base) / 1e6, 1),
            # `docker import` leaves this comment: the stand-in .ci/docker-image builds from Debian
            "stand_in": base_comment.startswith("Imported from"),
        },
        "storage_driver": info[1],
        "create_s": run.create_s,
        "start_to_health_s": run.start_to_health_s,
        "run_to_health_s": round(run.create_s + run.start_to_health_s, 2),
        "checks": asdict(run.checks),
        "failures": run.checks.failures(),
    }


def structure_errors(rep: Mapping[str, Any]) -> list[str]:
    """What is wrong with a report's shape or bounds (its figures vary by machine, so only
    these are held): the keys, sizes within ``SIZE_BOUNDS_MB``, times positive and below
    ``SECONDS_BOUND``, and no failed check."""
    errors = []
    keys = {"meta", "image", "image_size_mb", "base_image", "storage_driver", "create_s", "start_to_health_s"}
    keys |= {"run_to_health_s", "checks", "failures"}
    if set(rep) != keys:
        return [f"keys {sorted(rep)} != {sorted(keys)}"]
    lo, hi = SIZE_BOUNDS_MB
    for name, size in (("image", rep["image_size_mb"]), ("base image", rep["base_image"]["size_mb"])):
        if not lo <= size <= hi:
            errors.append(f"{name} size {size} MB outside [{lo}, {hi}]")
    for name in ("create_s", "start_to_health_s", "run_to_health_s"):
        if not 0 < rep[name] < SECONDS_BOUND:
            errors.append(f"{name} {rep[name]} outside (0, {SECONDS_BOUND})")
    if abs(rep["create_s"] + rep["start_to_health_s"] - rep["run_to_health_s"]) > 0.011:
        errors.append("run_to_health_s is not create_s + start_to_health_s")
    if set(rep["checks"]) != {f for f in Checks.__dataclass_fields__}:
        errors.append("checks: unexpected fields")
    elif rep["failures"] != Checks(**rep["checks"]).failures():
        errors.append("failures do not follow from the checks")
    if rep["failures"]:
        errors.append(f"failed checks: {rep['failures']}")
    return errors


def render(rep: Mapping[str, Any]) -> str:
    base = rep["base_image"]
    origin = "a stand-in imported from Debian bookworm by `.ci/docker-image`" if base["stand_in"] else "pulled"
    c = rep["checks"]
    lines = [
        f"Measured {rep['meta']['date']} on {rep['meta']['cpu_count']} cores, Docker {rep['meta']['docker']}, "
        f"`{rep['storage_driver']}` storage; base `{base['name']}` ({origin}, {base['size_mb']:.0f} MB). "
        "These figures vary by machine: the tests hold the report's structure and bounds, not its values.",
        "",
        "| image size | `docker create` | start to first `/health` | run to first `/health` |",
        "|---|---|---|---|",
        f"| {rep['image_size_mb']:.0f} MB | {rep['create_s']:.1f} s | {rep['start_to_health_s']:.1f} s "
        f"| {rep['run_to_health_s']:.1f} s |",
        "",
    ]
    if rep["storage_driver"] == "vfs":
        lines += ["With `vfs` storage, `docker create` copies the whole image; overlay2 does not.", ""]
    lines += [
        f"Checked in the running container: `/health` serving, `/answer/q11` answered with `X-Index-Version: "
        f"{c['index_version_header']}`, `POST /ask` answered, a 429 after {c['first_429_after']} more requests "
        f"(burst {c['burst']}), user `{c['user']}` (uid {c['uid']}), `CapEff` {c['cap_eff']}, `NoNewPrivs` "
        f"{int(c['no_new_privs'])}, `touch` refused on `/app` and on `/tmp` (read-only file system). "
        f"Failed checks: {', '.join(rep['failures']) or 'none'}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=IMAGE)
    parser.add_argument("--no-build", action="store_true", help="use the image as it is")
    args = parser.parse_args(argv)
    root = find_root()
    if not args.no_build:
        build(root, args.image)
    rep = report(run_hardened(root, args.image), args.image)
    Paths(root).result("container.json").write_text(json.dumps(rep, indent=1) + "\n", encoding="utf-8")
    print(render(rep), end="")
    errors = structure_errors(rep)
    for e in errors:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
