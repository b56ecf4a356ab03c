"""One campaign across machines on a real Redis server (fuzz/distributed.py, ``run --database redis://``).

Each test starts its own ``redis-server`` on 127.0.0.1 and a free port, in a temporary
directory, and stops it (benchmarks/redis_load.py's RedisServer); without a
``redis-server`` binary they are skipped (.ci/run installs Debian's).
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracles.common import Finding
from support.campaigns import StubRunner

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("redis_load", ROOT / "benchmarks" / "redis_load.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

pytestmark = [pytest.mark.skipif(shutil.which("redis-server") is None,
                                 reason="no redis-server binary (apt-get install redis-server; .ci/run does)"),
              # (the campaigns' process trees, and a SIGKILL: beside the other tests that watch processes)
              pytest.mark.xdist_group("processes")]


@pytest.fixture
def server(tmp_path):
    s = bench.RedisServer(tmp_path / "redis")
    yield s
    s.stop()


def a_program() -> dict:
    """A valid program (a corpus entry's), for records that must pass the checks."""
    with open(ROOT / "corpus" / "crash-34e61a1c5827.json") as f:
        entry = json.load(f)
    return entry["program"]


def env_for_cli():
    return {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "SHARDFUZZ_DEBUG", "SHARDFUZZ_TEST_FAULT")}


def cli(args, cwd, timeout=120):
    return subprocess.run([sys.executable, "-m", "fuzz", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**env_for_cli(), "PYTHONPATH": str(ROOT)})


# ------------------------------------------------------------------------------ URLs
@pytest.mark.parametrize("url, words", [
    ("redis://", "names no host"),
    ("redis://127.0.0.1:6379/zero", "must be a number"),
    ("redis://127.0.0.1:99999/0", "not a Redis URL"),
    ("redis://127.0.0.1:6379/0?db=1", "unknown URL parameter"),
    ("redis://127.0.0.1:6379/0?prefix=a*b", "?prefix="),
    ("redis://127.0.0.1:6379/0#x", "fragment"),
])
def test_a_malformed_url_is_refused_in_one_line(url, words):
    from fuzz.distributed import RedisInputError, parse_url

    with pytest.raises(RedisInputError) as e:
        parse_url(url)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_url_is_parsed_and_shown_without_its_password():
    from fuzz.distributed import parse_url

    a = parse_url("rediss://:p%40ss@127.0.0.1:7000/3?prefix=camp-1")
    assert (a.host, a.port, a.db, a.password, a.tls, a.prefix) == ("127.0.0.1", 7000, 3, "p@ss", True, "camp-1")
    assert a.display() == "rediss://:***@127.0.0.1:7000/3?prefix=camp-1" and "p@ss" not in a.display()
    assert a.key("findings") == "camp-1:findings"
    b = parse_url("redis://127.0.0.1")
    assert (b.port, b.db, b.prefix, b.password) == (6379, 0, "shardfuzz", None)


# ------------------------------------------------------------------------------ bad input at the start: exit 2
def _foreign_key(server):
    server.client().set("shardfuzz:something", "not ours")


def _foreign_type(server):
    server.client().set("shardfuzz:findings", "a string, not a list")


def _foreign_meta(server):
    server.client().set("shardfuzz:meta", "{}")


def _foreign_records(server):
    from fuzz.distributed import FORMAT

    server.client().set("shardfuzz:meta", json.dumps(FORMAT))
    server.client().rpush("shardfuzz:findings", b"\x80\x04pickle")


def _no_meta(server):
    server.client().rpush("shardfuzz:findings", json.dumps({"signature": "s", "machine": "m"}))


@pytest.mark.parametrize("case, words", [
    ("unreachable", "cannot reach Redis at 127.0.0.1:"),
    ("wrong password", "refused the password"),
    ("no password", "wants a password"),
    ("bad database", "has no database 99"),
    (_foreign_key, "not shardfuzz's"),
    (_foreign_type, "is a string, not a list"),
    (_foreign_meta, "that shardfuzz did not write"),
    (_foreign_records, "is not a shardfuzz findings record"),
    (_no_meta, "but no shardfuzz:meta"),
])
def test_bad_redis_is_exit_2_and_one_line(tmp_path, case, words):
    """run and status: exit 2, one line saying what is wrong and what to do, never the password, nothing started."""
    password = "s3cret" if case in ("wrong password", "no password") else None
    server = bench.RedisServer(tmp_path / "redis", password=password)
    try:
        url = server.url()
        if case == "unreachable":
            url = f"redis://127.0.0.1:{bench.free_port()}/0"
        elif case == "wrong password":
            url = server.url(password="wrong-pw")
        elif case == "no password":
            url = server.url(password="")
        elif case == "bad database":
            url = server.url(db=99)
        else:
            case(server)
        for args in (["run", "--time", "5", "--database", url], ["status", url]):
            r = cli(args, tmp_path)
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
            assert r.returncode == 2, r.stderr
            assert len(lines) == 1 and lines[0].startswith("shardfuzz: ") and words in lines[0], r.stderr
            assert "Traceback" not in r.stderr and "wrong-pw" not in r.stderr and "s3cret" not in r.stderr
            assert not (tmp_path / ".shardfuzz" / "findings.jsonl").exists() or args[0] == "status"
    finally:
        server.stop()


def test_another_prefix_on_the_same_database_is_another_campaign(server):
    """Foreign data under one prefix does not stop a campaign under another (?prefix=NAME)."""
    from fuzz.distributed import RedisInputError, open_url

    server.client().set("shardfuzz:something", "not ours")
    with pytest.raises(RedisInputError):
        open_url(server.url())
    address, client = open_url(server.url(prefix="camp2"))
    assert client.get("camp2:meta") is not None


# ------------------------------------------------------------------------------ records and claims
def test_a_signature_is_claimed_once_and_records_are_read_by_the_others(server):
    from fuzz.distributed import Store

    a = Store(server.url(), machine="a-1", echo=lambda line: None)
    b = Store(server.url(), machine="b-2", echo=lambda line: None)
    assert a.claim("S") and a.claim("S")  # (the claimant's, again)
    assert not b.claim("S")
    assert b.claim("T") and not a.claim("T")
    a.push({"signature": "S", "oracle": "internal-error", "kind": "k", "message": "m", "program": {},
            "source": "print('never pushed')"})
    got = b.read_new()
    assert [(r["signature"], r["machine"]) for r in got] == [("S", "a-1")] and a.read_new() == []
    assert b"never pushed" not in b"".join(server.client().lrange("shardfuzz:findings", 0, -1))
    assert b.read_new() == []  # (read once)


def test_writers_at_once_lose_no_record(server):
    """(b) N writer processes push M records each through Store at once: all N*M there, in each writer's order."""
    r = bench.load(server.url(), writers=4, records=150)
    assert r["failed"] == 0 and r["records"] == 600
    assert r["found"] == 600 and r["lost"] == 0 and r["duplicates"] == 0 and r["out_of_order"] == 0, r


def test_untrusted_records_are_skipped_with_a_warning(server, tmp_path):
    """(d) Malformed JSON, a pickle, a hostile program, a hostile machine name: each skipped with one warning line;
    a hostile source is never used (rendered again from the checked program); status still works."""
    from fuzz.distributed import Store, clean_record
    from fuzz.render import release_caps, render

    good = {"signature": "internal-error: builtins.ValueError: good", "machine": "m-1", "oracle": "internal-error",
            "kind": "builtins.ValueError", "message": "good", "count": 2, "reduced": True, "jax_version": "0.10.2",
            "program": a_program(), "source": "import os; os.system('echo pwned')"}
    from fuzz.distributed import open_url

    open_url(server.url())  # (marks the prefix as shardfuzz's)
    client = server.client()
    client.rpush("shardfuzz:findings", json.dumps(good))
    bad = [b"{not json", b"\x80\x04\x95pickle.", json.dumps([1, 2]),
           json.dumps({**good, "signature": "hostile program", "program": {"calls": "__import__('os').system('x')"}}),
           json.dumps({**good, "signature": "a key the schema refuses", "program": {**a_program(), "x": "y"}}),
           json.dumps({**good, "signature": "hostile machine", "machine": "m\nshardfuzz: fake line"}),
           json.dumps({**good, "signature": "bad count", "count": "9"}),
           json.dumps({**good, "signature": "x" * 3000})]
    client.rpush("shardfuzz:findings", *bad)
    warnings = []
    store = Store(server.url(), machine="reader-1", echo=warnings.append)
    got = store.read_new()
    assert [r["signature"] for r in got] == [good["signature"]]
    assert got[0]["source"] == render(good["program"], release_caps("0.10.2")) and "pwned" not in got[0]["source"]
    assert len(warnings) == len(bad) and all(w.startswith("shardfuzz: skipped a record of redis://") for w in warnings)
    assert all("\n" not in w for w in warnings)
    with pytest.raises(ValueError):
        clean_record(bad[3])
    report = tmp_path / "status.json"
    r = cli(["status", server.url(), "--report", str(report)], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("skipped a record") == len(bad) and "Traceback" not in r.stderr
    data = json.loads(report.read_text())
    assert [f["signature"] for f in data["findings"]] == [good["signature"]] and data["records_skipped"] == len(bad)
    assert "pwned" not in report.read_text() and "fake line" not in r.stdout


# ------------------------------------------------------------------------------ a campaign's side, without JAX


def stub_campaign(monkeypatch, url, path, **kw):
    import fuzz.campaign

    monkeypatch.setattr(fuzz.campaign, "Runner", StubRunner)
    c = fuzz.campaign.Campaign(findings_path=str(path), database=url, avoid_known=False, look_past=False, **kw)
    c.start = time.monotonic()
    return c


def test_a_finding_another_machine_claimed_is_a_peer_hit(server, tmp_path, monkeypatch):
    mine = Finding("internal-error", "builtins.ValueError", "found here")
    theirs = Finding("internal-error", "builtins.ValueError", "found there first")
    other = stub_campaign(monkeypatch, server.url(), tmp_path / "o.jsonl")
    other.runner.found = [theirs]
    other.run_program(a_program())
    c = stub_campaign(monkeypatch, server.url(), tmp_path / "f.jsonl")
    c.runner.found = [theirs, mine]
    c.run_program(a_program())
    c.run_program(a_program())
    assert list(c.records) == [mine.signature] and c.peer_hits == {theirs.signature: 2}
    assert theirs.signature in c.known
    recs = [json.loads(x) for x in server.client().lrange("shardfuzz:findings", 0, -1)]
    assert sorted((r["signature"], r["machine"]) for r in recs) == sorted(
        [(theirs.signature, other.store.machine), (mine.signature, c.store.machine)])
    assert other.store.machine != c.store.machine
    for x in (c, other):
        x.close()
    assert {json.loads(v)["state"] for v in server.client().hgetall("shardfuzz:machines").values()} == {"finished"}


def test_a_lost_server_loses_no_finding_and_the_campaign_goes_on(server, tmp_path, monkeypatch):
    """Findings recorded while the server is down go to the local findings file, and to Redis once it is back."""
    from fuzz import findings as findings_file

    lines = []
    c = stub_campaign(monkeypatch, server.url(), tmp_path / "f.jsonl")
    c.store.echo = lines.append
    first, during, after = (Finding("internal-error", "builtins.ValueError", f"finding {w}")
                            for w in ("before", "during", "after"))
    c.runner.found = [first]
    c.run_program(a_program())
    server.stop()
    c.runner.found = [during]
    c.run_program(a_program())  # (no exception: the campaign goes on)
    c.db.save(b"k", b"v")  # (Hypothesis's database too)
    assert list(c.db.fetch(b"k")) == []
    assert not c.store.online and len(c.store.backlog) == 1
    assert sum("lost redis://" in ln for ln in lines) == 1
    assert during.signature in {r["signature"] for r in findings_file.read(str(tmp_path / "f.jsonl"))}
    server.start()  # (the same port; the append-only file brings the data back)
    assert c.store.retry() and c.store.backlog == []
    c.runner.found = [after]
    c.run_program(a_program())
    pushed = [json.loads(x)["signature"] for x in server.client().lrange("shardfuzz:findings", 0, -1)]
    assert pushed == [first.signature, during.signature, after.signature]
    assert any("is back" in ln for ln in lines)
    c.close()


# ------------------------------------------------------------------------------ (a) machines on one server
@pytest.mark.slow
def test_three_machines_share_one_campaign_and_a_killed_one_loses_nothing(server, tmp_path):
    """Three ``shardfuzz run --jobs 1 --time 40`` process trees on one Redis (faults injected: a share of
    programs raise one of 8 messages), the third SIGKILLed mid-run: every signature is recorded, shrunk and
    reduced by one machine only (its claimant), the Redis union is the union of the findings files, every
    finding any console announced is in Redis, and ``status`` merges them."""
    machines, _ = bench.run_machines(server, tmp_path, 3, 40, "raise:0.5", kill_after=20)
    survivors, victim = machines[:2], machines[2]
    for m in survivors:
        assert m.proc.returncode in (0, 1), m.stderr()
    assert victim.proc.returncode == -9 and victim.killed_at is not None
    a = bench.analyse(server.url(), machines)
    injected = [s for s in a["signatures"] if "injected fault" in s]
    assert len(injected) >= 3, a
    assert all(len(ms) == 1 for ms in a["recorders"].values()), a["recorders"]  # each bug recorded once
    assert all(len(ms) == 1 for ms in a["reductions"].values()), a["reductions"]  # and reduced once
    assert a["reductions"], "no finding was reduced"
    assert a["claims_held_by_other"] == []
    assert a["announced_lost"] == [] and a["killed_announced"] >= 1, a
    assert a["peer_hits"] > 0, "no machine met another's finding: sharing was not exercised"
    survivors_local = set()
    from fuzz import findings as findings_file

    for m in survivors:
        survivors_local |= {r["signature"] for r in findings_file.read(str(m.dir / ".shardfuzz" / "findings.jsonl"))}
    assert survivors_local <= set(a["signatures"]) <= set(a["local_union"])
    assert len(set(a["local_union"]) - set(a["signatures"])) <= 1  # (at most the one written as the kill came)
    report = tmp_path / "status.json"
    r = cli(["status", server.url(), "--report", str(report)], tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(report.read_text())
    assert {row["state"] for row in data["machines"]} == {"finished", "gone"}
    assert len(data["machines"]) == 3 and data["jobs"] == 3
    assert {f["signature"] for f in data["findings"]} <= set(a["signatures"])
    assert data["programs"] >= sum(m.report()["programs"] for m in survivors)


def test_the_raise_fault_keys_on_the_mesh_line():
    """SHARDFUZZ_TEST_FAULT=raise:SHARE (the three-machine test's findings): the same mesh line, the same
    message, whatever else the program holds (so a reduction keeps it); a share out of [0, 1] is refused."""
    from fuzz.faults import hook_from_spec

    hook = hook_from_spec("raise:1")
    a = hook("mesh = Mesh(devices, ('x',))\nCALLS = []\n")
    b = hook("import numpy\nmesh = Mesh(devices, ('x',))\nCALLS = [1]\n")
    word = a.split("injected fault ")[1].split("'")[0]
    assert f"injected fault {word}'" in b
    assert hook_from_spec("raise:0")("mesh = m\n") == "mesh = m\n"
    with pytest.raises(ValueError, match="raise:"):
        hook_from_spec("raise:2")
