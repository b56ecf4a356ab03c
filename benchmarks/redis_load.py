"""A distributed campaign on a real Redis server on this machine's loopback (fuzz/distributed.py).

    python benchmarks/redis_load.py load --writers 16 --records 2000
    python benchmarks/redis_load.py machines --seconds 60 [--kill-after 25] [--fault raise:0.3]

``load``: WRITERS processes each push RECORDS findings records through
:class:`fuzz.distributed.Store` at once; prints writers, records, lost (records not in
Redis afterwards), out of order (a writer's records not in the order it pushed them),
and records/s.

``machines``: one campaign alone (``shardfuzz run --jobs 1`` with a local example
database) for SECONDS, then three campaigns as separate process trees ("machines", each in
its own directory) on one Redis for SECONDS, the third SIGKILLed after --kill-after
seconds; prints programs/s of the three (summed) vs the one, the distinct signatures of
the union, machines that recorded each signature (1: each bug is reduced once),
reductions per signature, and the findings the killed machine had announced that are
still in Redis. With ``--fault`` (``SHARDFUZZ_TEST_FAULT``; test-only) findings come
quickly. The corpus is known as ``shardfuzz run`` knows it.

A server is started here (``redis-server`` on PATH; 127.0.0.1 only, a free port, a temp
directory) and stopped at the end. The tests (tests/test_redis.py) use
:class:`RedisServer`, :func:`load`, :func:`start_machine` and :func:`analyse`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIG_WIDTH = 150  # the CLI prints at most this many characters of a signature


class RedisServer:
    """A ``redis-server`` on 127.0.0.1 and a free port, its files in ``directory`` (append-only file on, so
    that :meth:`restart` keeps the data). ``password``: ``requirepass``. Raises RuntimeError if it does not
    start within 20 s, FileNotFoundError without ``redis-server``."""

    def __init__(self, directory, password: str | None = None):
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            raise FileNotFoundError("redis-server")
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.port = free_port()
        self.proc = None
        self.start()

    def start(self) -> None:
        args = [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
                "--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
                "--protected-mode", "yes", "--logfile", str(self.dir / "redis.log")]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.client().ping():
                    return
            except Exception:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                path = self.dir / "redis.log"
                log = path.read_text(errors="replace")[-500:] if path.exists() else ""
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}: {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM (the server writes its append-only file) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, password: str | None = None, db: int = 0, prefix: str = "") -> str:
        password = self.password if password is None else password
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/{db}" + (f"?prefix={prefix}" if prefix else "")

    def client(self, db: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, db=db, password=self.password, socket_timeout=5)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------ load
def write(url: str, index: int, records: int) -> None:
    """One writer: push ``records`` records (signature ``w<index>-<j>``) as machine ``writer-<index>``."""
    from fuzz.distributed import Store

    store = Store(url, machine=f"writer-{index}", echo=lambda line: print(line, file=sys.stderr))
    for j in range(records):
        store.push({"signature": f"w{index}-{j}", "oracle": "internal-error", "kind": "builtins.ValueError",
                    "message": f"load record {j}", "count": 1, "program": {}})
    if store.backlog:
        raise SystemExit(f"writer {index}: {len(store.backlog)} records not pushed")


def load(url: str, writers: int, records: int, timeout: float = 600) -> dict:
    """Run ``writers`` writer processes of ``records`` records each at once; read the list back.

    Returns {"writers", "records" (expected), "found", "lost", "duplicates", "out_of_order", "failed"
    (writers that exited non-zero), "seconds", "records_per_second"}.
    """
    from fuzz.distributed import Address, collect, connect, parse_url

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.path.insert(0, sys.argv[1]); from redis_load import write; " \
           "write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))"
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent), url, str(i), str(records)],
                              env=env, stderr=subprocess.PIPE, text=True) for i in range(writers)]
    failed = 0
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        failed += p.returncode != 0
    seconds = time.monotonic() - t0
    address: Address = parse_url(url)
    held = collect(address, connect(address))
    seen: dict = {}
    duplicates = out_of_order = 0
    for rec in held["records"]:
        w, _, j = rec["signature"][1:].partition("-")
        last = seen.setdefault(w, [])
        if last and int(j) <= last[-1]:
            duplicates += int(j) in last
            out_of_order += int(j) < last[-1]
        last.append(int(j))
    found = sum(len(set(v)) for v in seen.values())
    return {"writers": writers, "records": writers * records, "found": found, "lost": writers * records - found,
            "duplicates": duplicates, "out_of_order": out_of_order, "failed": failed, "skipped": held["skipped"],
            "seconds": round(seconds, 2), "records_per_second": round(writers * records / seconds, 1)}


# ------------------------------------------------------------------------------ machines
class Machine:
    """One ``shardfuzz run`` as its own process tree, its stderr lines kept with their times."""

    def __init__(self, name: str, proc, directory: Path):
        self.name, self.proc, self.dir = name, proc, directory
        self.lines: list = []  # (time.monotonic(), line)
        self.killed_at: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for ln in self.proc.stderr:
            self.lines.append((time.monotonic(), ln.rstrip("\n")))

    def started(self) -> bool:
        return any("host CPU devices" in ln for _, ln in self.lines)

    def announced(self, before: float | None = None) -> list:
        """Signatures (the CLI's first SIG_WIDTH characters) announced as ``finding N: ...``."""
        return [ln.split(": ", 1)[1] for t, ln in self.lines
                if ln.startswith("finding ") and (before is None or t < before)]

    def kill(self) -> None:
        """SIGKILL the campaign process (its workers die with it: PR_SET_PDEATHSIG)."""
        self.killed_at = time.monotonic()
        os.kill(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float) -> int | None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        return self.proc.returncode

    def report(self) -> dict | None:
        try:
            return json.loads((self.dir / "report.json").read_text())
        except (OSError, ValueError):
            return None

    def stderr(self) -> str:
        return "\n".join(ln for _, ln in self.lines)


def start_machine(name: str, directory, database: str, seconds: float, fault: str | None = None,
                  corpus: str | None = None, extra: tuple = ()) -> Machine:
    """Start ``shardfuzz run --jobs 1 --time SECONDS --no-determinism --database DATABASE`` in ``directory``
    (made), its report at ``directory/report.json``; ``fault``: SHARDFUZZ_TEST_FAULT."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "SHARDFUZZ_DEBUG", "SHARDFUZZ_TEST_FAULT")}
    env["PYTHONPATH"] = str(ROOT)
    if fault:
        env["SHARDFUZZ_TEST_FAULT"] = fault
    cmd = [sys.executable, "-m", "fuzz", "run", "--jobs", "1", "--time", str(seconds), "--no-determinism",
           "--database", database, "--report", str(d / "report.json"),
           "--corpus", str(ROOT / "corpus") if corpus is None else corpus, *extra]
    proc = subprocess.Popen(cmd, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    return Machine(name, proc, d)


def analyse(url: str, machines: list) -> dict:
    """What one Redis holds of a campaign of ``machines`` (:class:`Machine`), checked against their consoles
    and local findings files.

    Returns {"machines", "signatures" (distinct, the union of the machines' last records
    not moved), "recorders" ({signature: machines that pushed a finding record of it}; not
    for shardfuzz's own generator / reference findings, which are not always claimed),
    "reductions" ({signature: machines that pushed a reduced or reducer-run record of it}),
    "claims_held_by_other" (signatures recorded by a machine other than the claimant),
    "local_union" (signatures of the machines' findings files), "announced", "announced_lost"
    (announced on a console, before its kill for a killed one, and not in Redis),
    "killed_announced", "killed_kept", "skipped", "peer_hits"}.
    """
    from fuzz import findings as findings_file
    from fuzz.distributed import collect, connect, parse_url
    from oracles import OWN

    address = parse_url(url)
    held = collect(address, connect(address))
    latest: dict = {}  # (machine, signature) -> record
    recorders: dict = {}
    reductions: dict = {}
    pushed = set()
    for rec in held["records"]:
        latest[(rec["machine"], rec["signature"])] = rec
        pushed.add(rec["signature"][:SIG_WIDTH])
        if "superseded_by" in rec or rec.get("oracle") in OWN:  # (shardfuzz's own bugs are not claimed)
            continue
        recorders.setdefault(rec["signature"], set()).add(rec["machine"])
        if rec.get("reduced") or rec.get("reduction_runs"):
            reductions.setdefault(rec["signature"], set()).add(rec["machine"])
    signatures = sorted({sig for (m, sig), rec in latest.items() if "superseded_by" not in rec})
    other = sorted(sig for sig, ms in recorders.items() if held["claims"].get(sig) not in ms)
    local = set()
    for m in machines:
        path = m.dir / ".shardfuzz" / "findings.jsonl"
        if path.exists():
            local |= {r["signature"] for r in findings_file.read(str(path))}
    announced, lost, killed_announced, killed_kept = 0, [], 0, 0
    for m in machines:
        said = m.announced(before=m.killed_at)
        announced += len(said)
        missing = [s for s in said if s not in pushed]
        lost += missing
        if m.killed_at is not None:
            killed_announced += len(said)
            killed_kept += len(said) - len(missing)
    peer_hits = sum(int(st.get("peer_hits") or 0) for st in held["machines"].values())  # (from the heartbeats)
    return {"machines": len(machines), "signatures": signatures,
            "recorders": {s: sorted(v) for s, v in recorders.items()},
            "reductions": {s: sorted(v) for s, v in reductions.items()}, "claims_held_by_other": other,
            "local_union": sorted(local), "announced": announced, "announced_lost": lost,
            "killed_announced": killed_announced, "killed_kept": killed_kept, "skipped": held["skipped"],
            "peer_hits": peer_hits, "live": sorted(held["alive"]), "machine_stats": held["machines"]}


def run_machines(server: RedisServer, base: Path, count: int, seconds: float, fault: str | None,
                 kill_after: float | None, database: str | None = None, prefix: str = "") -> tuple:
    """``count`` machines at once for ``seconds``; the last one SIGKILLed ``kill_after`` seconds after it
    started (None: never), or later, once it has announced a finding, but before its ``seconds`` are up.
    Returns (machines, wall seconds)."""
    url = database or server.url(prefix=prefix)
    t0 = time.monotonic()
    machines = [start_machine(f"m{i}", base / f"m{i}", url, seconds, fault) for i in range(count)]
    if kill_after is not None:
        victim = machines[-1]
        deadline = time.monotonic() + 300
        while not victim.started() and victim.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        until, last = time.monotonic() + kill_after, time.monotonic() + max(kill_after, seconds - 2)
        while victim.proc.poll() is None and (time.monotonic() < until
                                              or not victim.announced() and time.monotonic() < last):
            time.sleep(0.2)
        if victim.proc.poll() is None:
            victim.kill()
    for m in machines:
        m.wait(seconds + 400)
    return machines, time.monotonic() - t0


def programs_per_second(machines: list) -> float:
    """Programs/s summed over machines that wrote a report (a killed one has none)."""
    total = 0.0
    for m in machines:
        r = m.report()
        if r:
            total += r.get("programs_per_second", 0.0)
    return round(total, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    lo = sub.add_parser("load", help="N writer processes, M records each")
    lo.add_argument("--writers", type=int, default=16)
    lo.add_argument("--records", type=int, default=2000)
    ma = sub.add_parser("machines", help="three machines on one Redis vs one machine alone")
    ma.add_argument("--seconds", type=float, default=60)
    ma.add_argument("--machines", type=int, default=3)
    ma.add_argument("--kill-after", type=float, default=None,
                    help="SIGKILL the last machine this many seconds after it started (default: half of --seconds)")
    ma.add_argument("--fault", default=None, help="SHARDFUZZ_TEST_FAULT for every machine (e.g. raise:0.3)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="shardfuzz-redis-bench-"))
    server = RedisServer(base / "redis")
    try:
        if args.what == "load":
            print(json.dumps(load(server.url(), args.writers, args.records)))
            return
        kill_after = args.seconds / 2 if args.kill_after is None else args.kill_after
        alone = start_machine("alone", base / "alone", str(base / "alone" / "db" / "examples"), args.seconds,
                              args.fault)
        alone.wait(args.seconds + 400)
        one = programs_per_second([alone])
        machines, wall = run_machines(server, base, args.machines, args.seconds, args.fault, kill_after)
        a = analyse(server.url(), machines)
        survivors = programs_per_second(machines)
        per_sig = [len(v) for v in a["reductions"].values()]
        out = {"seconds": args.seconds, "machines": args.machines, "fault": args.fault,
               "programs_per_second_alone": one,
               "programs_per_second_together": survivors,
               "programs_per_second_together_heartbeats": round(sum(
                   float(st.get("programs_per_second") or 0) for st in a["machine_stats"].values()), 3),
               "note": "together: summed over the machines that wrote a report (the killed one has none); "
                       "_heartbeats: over every machine's last heartbeat, the killed one's too",
               "distinct_signatures": len(a["signatures"]),
               "alone_findings": len((alone.report() or {}).get("findings", [])),
               "signatures_recorded_by_more_than_one_machine": sum(len(v) > 1 for v in a["recorders"].values()),
               "reductions_per_signature_max": max(per_sig, default=0),
               "signatures_reduced": len(per_sig), "claims_held_by_other": len(a["claims_held_by_other"]),
               "peer_hits": a["peer_hits"], "killed_announced": a["killed_announced"],
               "killed_kept": a["killed_kept"], "announced_lost": len(a["announced_lost"]),
               "local_union_equals_redis": set(a["local_union"]) == set(a["signatures"]),
               "wall_seconds": round(wall, 1)}
        print(json.dumps(out, indent=1))
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
