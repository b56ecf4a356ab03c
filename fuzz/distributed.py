"""One campaign across many machines: the example database and the findings in one Redis server.

``shardfuzz run --database redis://HOST:PORT/N`` (``rediss://`` for TLS; a password as
``redis://:PASSWORD@HOST:PORT/N`` or ``redis://USER:PASSWORD@…``, or in the environment
variable ``SHARDFUZZ_REDIS_PASSWORD``; ``?prefix=NAME`` for another campaign on the same
database) keeps Hypothesis's example database in Redis
(:class:`hypothesis.extra.redis.RedisExampleDatabase`) and pushes every findings record
there too, as it is appended to the local findings file (:mod:`fuzz.findings`, still
written as always). ``shardfuzz status URL`` prints the merged live report.

Keys, all under the prefix P (default ``shardfuzz``; see docs/distributed.md):

- ``P:meta`` (string): ``{"format": "shardfuzz-redis", "version": 1}``; a prefix whose
  keys shardfuzz did not write is refused at the start (:func:`check`);
- ``P:findings`` (list): one JSON findings record per item (RPUSH), the local findings
  file's records (no ``source``) plus ``machine``; read in order, the last record of a
  signature of a machine wins, ``{"signature", "superseded_by"}`` records move one;
- ``P:claims`` (hash): signature -> ``{"machine", "time"}``, set once (HSETNX) by the
  machine that records the finding: it alone shrinks and reduces it, the others count
  its hits as peer hits (:meth:`Store.claim`);
- ``P:machines`` (hash): machine -> its last stats (JSON); ``P:alive:MACHINE`` (string,
  TTL :data:`ALIVE_TTL`): set at each heartbeat, gone soon after a machine dies;
- ``P:examples:…`` (sets) and the channel ``P:examples-changes``: Hypothesis's.

Trust: everything read from Redis is untrusted input. Records are JSON (never pickle),
bounded in size and checked field by field (:func:`clean_record`): programs as a corpus
entry's (:func:`fuzz.program.validate_program`, schema and typing rules of the release
named), a ``source`` is never read but rendered again from the checked program. A record
that fails is skipped with one warning line. Hypothesis reads its examples as choice
sequences it parses itself; a program drawn from them is type-checked as any drawn one.

Failures: at the start a bad URL, an unreachable server, a refused password or a
prefix holding other data is a :class:`RedisInputError` (one line: what is wrong, what to
do; ``shardfuzz`` exits 2). Later, a lost connection never stops the campaign: records
wait in memory (they are in the local findings file already) and are pushed, in order,
once the server answers again (the heartbeat thread retries every
:data:`HEARTBEAT_PERIOD` seconds); claims are then taken as this machine's.
"""
from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass

import click

FORMAT = {"format": "shardfuzz-redis", "version": 1}
DEFAULT_PREFIX = "shardfuzz"
PASSWORD_ENV = "SHARDFUZZ_REDIS_PASSWORD"  # the password, when it is not in the URL
HEARTBEAT_PERIOD = 2.0  # seconds between two heartbeats (and retries of a lost connection)
ALIVE_TTL = 15  # seconds a machine counts as live after its last heartbeat
CONNECT_TIMEOUT = 3.0  # seconds to connect to the server
SOCKET_TIMEOUT = 10.0  # seconds a command may wait for its answer
MAX_RECORD_BYTES = 1 << 21  # a findings record read from Redis longer than this is skipped (2 MiB)
MAX_WARNINGS = 20  # warnings about skipped records printed per process; the rest are counted
SCAN_LIMIT = 100_000  # keys under the prefix looked at by check()
CHUNK = 500  # records per RPUSH / LRANGE
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MACHINE = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


class RedisInputError(ValueError):
    """A Redis URL or server that cannot be used: the message says what is wrong and what to do (one line)."""


@dataclass(frozen=True)
class Address:
    """Where a distributed campaign lives: server, database number, credentials and key prefix."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    tls: bool
    prefix: str

    def display(self) -> str:
        """The URL without the password (for reports and messages)."""
        auth = ""
        if self.username or self.password:
            auth = f"{urllib.parse.quote(self.username or '', safe='')}{':***' if self.password else ''}@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = "" if self.prefix == DEFAULT_PREFIX else f"?prefix={self.prefix}"
        return f"{'rediss' if self.tls else 'redis'}://{auth}{host}:{self.port}/{self.db}{query}"

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix,) + parts)


def is_url(text) -> bool:
    """Whether a ``--database`` value names a Redis server (``redis://`` or ``rediss://``), not a directory."""
    return isinstance(text, str) and text.lower().startswith(("redis://", "rediss://"))


def parse_url(url: str) -> Address:
    """The :class:`Address` of ``redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/N][?prefix=NAME]``.

    PORT defaults to 6379 and N (the database number, 0-15 on a default server) to 0;
    the password may also come from ``SHARDFUZZ_REDIS_PASSWORD``. Raises
    :class:`RedisInputError` for anything else (the message never holds the password).
    """
    example = "redis://HOST:PORT/N (e.g. redis://127.0.0.1:6379/0, a password as redis://:PASSWORD@HOST:PORT/N)"
    try:
        u = urllib.parse.urlsplit(url)
        port = u.port
    except ValueError as e:
        raise RedisInputError(f"--database: not a Redis URL ({_no_secret(str(e), url)}); give {example}") from None
    if u.scheme.lower() not in ("redis", "rediss"):
        raise RedisInputError(f"--database: {u.scheme}:// is not redis:// or rediss://; give {example}")
    if not u.hostname:
        raise RedisInputError(f"--database: the URL names no host; give {example}")
    path = u.path.strip("/")
    if path and not path.isdigit():
        raise RedisInputError(f"--database: the database number must be a number (0, 1, ...), not "
                              f"{path[:40]!r}; give {example}")
    if u.fragment:
        raise RedisInputError(f"--database: a Redis URL has no #fragment; give {example}")
    prefix = DEFAULT_PREFIX
    for name, value in urllib.parse.parse_qsl(u.query, keep_blank_values=True):
        if name != "prefix":
            raise RedisInputError(f"--database: unknown URL parameter {name[:40]!r} (only ?prefix=NAME); "
                                  f"give {example}")
        if not _PREFIX.fullmatch(value):
            raise RedisInputError(f"--database: ?prefix= takes 1-64 letters, digits, '_', '.' or '-', not "
                                  f"{value[:40]!r}")
        prefix = value
    password = urllib.parse.unquote(u.password) if u.password is not None else os.environ.get(PASSWORD_ENV) or None
    username = urllib.parse.unquote(u.username) if u.username else None
    return Address(host=u.hostname, port=port or 6379, db=int(path or 0), username=username, password=password,
                   tls=u.scheme.lower() == "rediss", prefix=prefix)


def _no_secret(text: str, url: str) -> str:
    """``text`` without the password part of ``url``."""
    netloc = urllib.parse.urlsplit(url).netloc if "://" in url else ""
    if "@" in netloc:
        text = text.replace(netloc.rsplit("@", 1)[0], "***")
    return text


def connect(address: Address):
    """A ``redis.Redis`` client of ``address`` (no connection is made yet). Raises RedisInputError
    when the ``redis`` package is missing."""
    try:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
    except ImportError:
        raise RedisInputError("the redis package is not installed; pip install 'hypothesis[redis]' "
                              "(or reinstall shardfuzz)") from None
    return redis.Redis(host=address.host, port=address.port, db=address.db, username=address.username,
                       password=address.password, ssl=address.tls, socket_connect_timeout=CONNECT_TIMEOUT,
                       socket_timeout=SOCKET_TIMEOUT, retry=Retry(NoBackoff(), 1), decode_responses=False)


def _why(e: Exception) -> str:
    return " ".join(str(e).split())[:200] or type(e).__name__


def _expected_type(address: Address, key: str) -> bytes | None:
    """The Redis type shardfuzz gives key ``key`` (under the prefix), or None for a key it never writes."""
    fixed = {address.key("meta"): b"string", address.key("findings"): b"list", address.key("claims"): b"hash",
             address.key("machines"): b"hash"}
    if key in fixed:
        return fixed[key]
    if key.startswith(address.key("alive", "")):
        return b"string"
    if key.startswith(address.key("examples", "")):
        return b"set"
    return None


def check(address: Address, client=None):
    """Check that ``address`` can hold a campaign, mark the prefix as shardfuzz's; returns the client.

    Raises :class:`RedisInputError` (one line) when the server cannot be reached, refuses
    the password or the database number, or when keys under the prefix are not
    shardfuzz's (another program's data: a wrong ``?prefix=`` or database number): a key
    shardfuzz never writes, one of another type, a ``P:meta`` that is not
    :data:`FORMAT`, keys without ``P:meta``, or a ``P:findings`` whose first item is not
    a findings record (later items that are not are skipped as they are read).
    """
    client = client or connect(address)  # (RedisInputError without the redis package)
    import redis

    where = f"{address.host}:{address.port}"
    shown = address.display()
    try:
        client.ping()
        meta = client.get(address.key("meta"))
        if meta is not None:
            try:
                ours = json.loads(meta) == FORMAT
            except ValueError:
                ours = False
            if not ours:
                raise RedisInputError(f"{shown} holds a key {address.key('meta')} that shardfuzz did not write: "
                                      f"another program's data; pass another database number or ?prefix=NAME")
        keys: list = []
        for raw in client.scan_iter(match=_glob(address.prefix) + ":*", count=1000):
            keys.append(raw)
            if len(keys) >= SCAN_LIMIT:
                break
        for start in range(0, len(keys), 1000):  # (their types, 1000 to a round trip)
            pipe = client.pipeline(transaction=False)
            for raw in keys[start:start + 1000]:
                pipe.type(raw)
            for raw, got in zip(keys[start:start + 1000], pipe.execute()):
                _check_key(address, raw, got, meta is not None)
        first = client.lindex(address.key("findings"), 0)
        if first is not None and not _looks_like_record(first):
            raise RedisInputError(f"{shown}: the first item of {address.key('findings')} is not a shardfuzz findings "
                                  f"record: another program's data; pass another database number or ?prefix=NAME")
        if meta is None:
            client.set(address.key("meta"), json.dumps(FORMAT), nx=True)
    except redis.AuthenticationError as e:
        if address.password is None:
            raise RedisInputError(f"Redis at {where} wants a password; give it as redis://:PASSWORD@{where}/"
                                  f"{address.db} or in ${PASSWORD_ENV}") from None
        raise RedisInputError(f"Redis at {where} refused the password ({_why(e)}); give the right one as "
                              f"redis://:PASSWORD@{where}/{address.db} or in ${PASSWORD_ENV}") from None
    except redis.ConnectionError as e:
        raise RedisInputError(f"cannot reach Redis at {where} ({_why(e)}); start the server there "
                              f"or fix the --database URL") from None
    except redis.TimeoutError as e:
        tls = " (rediss:// needs a server that speaks TLS there)" if address.tls else ""
        raise RedisInputError(f"Redis at {where} did not answer within {SOCKET_TIMEOUT:.0f} s ({_why(e)}){tls}; "
                              f"check the server or fix the --database URL") from None
    except redis.ResponseError as e:
        msg = _why(e)
        if "NOAUTH" in msg or "WRONGPASS" in msg or "AUTH" in msg.split()[0:1]:
            raise RedisInputError(f"Redis at {where} wants a password ({msg}); give it as "
                                  f"redis://:PASSWORD@{where}/{address.db} or in ${PASSWORD_ENV}") from None
        if "DB index" in msg:
            raise RedisInputError(f"Redis at {where} has no database {address.db} ({msg}); pass a smaller "
                                  f"database number") from None
        raise RedisInputError(f"Redis at {where} refused a command ({msg}); check the server and the "
                              f"--database URL") from None
    except redis.RedisError as e:
        raise RedisInputError(f"Redis at {where}: {_why(e)}; check the server and the --database URL") from None
    return client


def _check_key(address: Address, raw: bytes, got: bytes, marked: bool) -> None:
    """Raise RedisInputError unless key ``raw`` of type ``got`` is one shardfuzz writes (``marked``: the prefix
    has shardfuzz's meta key)."""
    key = raw.decode(errors="replace")
    want = _expected_type(address, key)
    if got == b"none":  # (expired meanwhile)
        return
    shown = address.display()
    if want is None or got != want:
        what = f"a {got.decode(errors='replace')} {key[:80]!r}" if want is None else \
            f"{key[:80]!r} is a {got.decode(errors='replace')}, not a {want.decode()}"
        raise RedisInputError(f"{shown} holds data that is not shardfuzz's under {address.prefix}: ({what}); "
                              f"pass another database number or ?prefix=NAME")
    if not marked:
        raise RedisInputError(f"{shown} holds keys under {address.prefix}: ({key[:80]!r}) but no "
                              f"{address.key('meta')}: not shardfuzz's; pass another database number or "
                              f"?prefix=NAME")


def _looks_like_record(raw: bytes) -> bool:
    """Whether ``raw`` is a JSON object with a string ``signature`` and ``machine`` (a shardfuzz record's
    shape; :func:`clean_record` checks the rest when it is read)."""
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(rec, dict) and isinstance(rec.get("signature"), str) and isinstance(rec.get("machine"), str)


def _glob(text: str) -> str:
    """``text`` with Redis glob characters escaped (a prefix is letters, digits, '_', '.', '-': none)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def open_url(url: str) -> tuple:
    """(Address, checked client) of a ``--database`` URL. Raises RedisInputError."""
    address = parse_url(url)
    return address, check(address)


# ------------------------------------------------------------------------------ untrusted records
class RecordError(ValueError):
    """A record read from Redis that is not a shardfuzz record (the message says why, in a few words)."""


_STR_FIELDS = {"oracle": 200, "kind": 300, "message": 4000, "details": 4000, "campaign_started": 40,
               "jax_version": 40, "jaxlib_version": 40, "run": 100}


def clean_record(raw) -> dict:
    """A findings record read from Redis (bytes or str of JSON), checked; raises :class:`RecordError`.

    Kept: ``signature`` (a string of at most 2000 characters), ``machine`` (letters,
    digits, ``_.:-``), ``superseded_by`` (for a move), or the report fields of a finding
    (:meth:`fuzz.campaign.Campaign.finding_entry`) with their types checked, strings cut
    to bounds; ``program`` and ``history_programs`` checked as a corpus entry's programs
    (:func:`fuzz.program.validate_program` with the typing rules of the record's
    ``jax_version``); ``source`` rendered again from the checked program (what was stored
    is never used). Unknown keys are dropped.
    """
    from fuzz.program import validate_program
    from fuzz.render import release_caps, render
    from fuzz.typecheck import ProgramError

    if isinstance(raw, (bytes, bytearray)):
        if len(raw) > MAX_RECORD_BYTES:
            raise RecordError(f"longer than {MAX_RECORD_BYTES} bytes")
        try:
            raw = raw.decode()
        except UnicodeDecodeError:
            raise RecordError("not UTF-8") from None
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        raise RecordError("not JSON") from None
    if not isinstance(rec, dict):
        raise RecordError("not a JSON object")
    sig, machine = rec.get("signature"), rec.get("machine")
    if not isinstance(sig, str) or not 0 < len(sig) <= 2000:
        raise RecordError("no signature string")
    if not isinstance(machine, str) or not _MACHINE.fullmatch(machine):
        raise RecordError("no machine name")
    if "superseded_by" in rec:
        new = rec["superseded_by"]
        if not isinstance(new, str) or not 0 < len(new) <= 2000:
            raise RecordError("superseded_by is not a signature")
        return {"signature": sig, "superseded_by": new, "machine": machine}
    out = {"signature": sig, "machine": machine}
    for key, limit in _STR_FIELDS.items():
        value = rec.get(key, "")
        if value is None and key in ("run",):
            continue
        if not isinstance(value, str):
            raise RecordError(f"{key} is not a string")
        out[key] = value[-limit:] if key == "details" else value[:limit]
    for key in ("count", "reduction_runs"):
        value = rec.get(key, 0)
        if type(value) is not int or not 0 <= value < 2 ** 53:
            raise RecordError(f"{key} is not a count")
        out[key] = value
    for key in ("first_seconds", "reduction_seconds"):
        value = rec.get(key, 0.0)
        if type(value) not in (int, float) or not 0 <= value < 1e9:
            raise RecordError(f"{key} is not a number of seconds")
        out[key] = float(value)
    for key in ("shrunk", "reduced", "look_past"):
        value = rec.get(key, False)
        if type(value) is not bool:
            raise RecordError(f"{key} is not true or false")
        out[key] = value
    call = rec.get("call")
    if call is not None and (type(call) is not int or not 0 <= call < 1000):
        raise RecordError("call is not an index")
    out["call"] = call
    seed, job = rec.get("seed"), rec.get("job")
    out["seed"] = seed if type(seed) is int else None
    if job is not None:
        out["job"] = job if type(job) is int else None
    program, history = rec.get("program"), rec.get("history_programs", [])
    if not isinstance(program, dict):
        raise RecordError("program is not an object")
    if not isinstance(history, list) or len(history) > 16:
        raise RecordError("history_programs is not a short list")
    caps = release_caps(out["jax_version"] or None)
    try:
        for p in ([program] if program else []) + history:
            validate_program(p, caps)
        source = render(program, caps) if program else ""
    except (ProgramError, ValueError, RecursionError, TypeError, KeyError) as e:
        raise RecordError(f"invalid program ({' '.join(str(e).split())[:120]})") from None
    out.update(program=program, history_programs=history, history=[], source=source)
    return out


class _Warner:
    """One line on stderr per skipped record (at most MAX_WARNINGS, then a count)."""

    def __init__(self, where: str, echo=None):
        self.where = where
        self.count = 0
        self.echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))

    def __call__(self, what: str) -> None:
        self.count += 1
        if self.count <= MAX_WARNINGS:
            self.echo(f"shardfuzz: skipped a record of {self.where}: {what} (not shardfuzz's, or damaged)")
        elif self.count == MAX_WARNINGS + 1:
            self.echo(f"shardfuzz: more records of {self.where} skipped; the report counts them")


def _read_list(client, key: str, start: int, stop: int | None = None) -> list:
    """Items ``start`` … ``stop`` - 1 (None: the end) of list ``key``, read CHUNK at a time (list of bytes)."""
    out: list = []
    while stop is None or start < stop:
        end = start + CHUNK - 1 if stop is None else min(stop, start + CHUNK) - 1
        items = client.lrange(key, start, end)
        out.extend(items)
        if len(items) < end - start + 1:
            break
        start = end + 1
    return out


# ------------------------------------------------------------------------------ one machine's store
_STORES = iter(range(1, 1 << 62))  # stores made in this process


def machine_name() -> str:
    """A new name in the campaign for a store of this process: ``HOST-PID`` (HOST cut to letters,
    digits, ``_.-``), ``HOST-PID.N`` for the process's N-th store after the first."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:100] or "host"
    n = next(_STORES)
    return f"{host}-{os.getpid()}" + (f".{n}" if n > 1 else "")


class Store:
    """One campaign process's side of a distributed campaign (see the module docstring).

    ``url``: the ``--database`` URL (checked again here: raises RedisInputError at the
    start as :func:`check` does); ``machine``: this process's name (default
    :func:`machine_name`); ``run``, ``job``: of ``shardfuzz run --jobs N``; ``echo``: how
    a warning line is printed (default: stderr). Never raises after construction: a
    lost connection queues records (:attr:`backlog`) until the server answers again.
    """

    def __init__(self, url: str, machine: str | None = None, run: str | None = None, job: int = 0, echo=None,
                 client=None):
        self.address = parse_url(url)
        self.client = check(self.address, client)
        self.machine = machine or machine_name()
        self.run, self.job = run, job
        self.echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
        self.warn = _Warner(self.address.display(), self.echo)
        self.lock = threading.RLock()
        self.backlog: list = []  # JSON lines not pushed yet (the server was not reachable)
        self.pushed = 0
        self.online = True
        self.offset = 0  # items of P:findings read so far (read_new)
        self.stats = lambda: {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost_at: float | None = None

    # ----------------------------------------------------------------- the connection
    def _lost(self, e: Exception) -> None:
        if self.online:
            self.online = False
            self.lost_at = time.monotonic()
            self.echo(f"shardfuzz: lost {self.address.display()} ({_why(e)}); findings go on to the local findings "
                      f"file and are pushed once the server is back")

    def _errors(self):
        import redis

        return (redis.RedisError, OSError)

    def _flush(self) -> None:
        """Push the backlog in order (under the lock); on an error keep what was not pushed."""
        while self.backlog:
            chunk = self.backlog[:CHUNK]
            self.client.rpush(self.address.key("findings"), *chunk)
            del self.backlog[:len(chunk)]
            self.pushed += len(chunk)

    def retry(self) -> bool:
        """Try the server again now: push the backlog; True when it answered (online again)."""
        with self.lock:
            try:
                self.client.ping()
                self._flush()
            except self._errors() as e:
                self._lost(e)
                return False
            if not self.online:
                self.online = True
                self.echo(f"shardfuzz: {self.address.display()} is back; the findings records kept meanwhile are "
                          f"pushed")
            return True

    # ----------------------------------------------------------------- findings
    def push(self, record: dict) -> bool:
        """Append a findings record (its ``source`` left out, ``machine`` added) to ``P:findings``.

        True when it is in Redis on return; False when the server is not reachable: it
        waits in :attr:`backlog` (pushed in order, before any later record, once the
        server is back).
        """
        rec = {k: v for k, v in record.items() if k != "source"}
        rec["machine"] = self.machine
        line = json.dumps(rec, default=str, separators=(",", ":"))
        with self.lock:
            self.backlog.append(line)
            if not self.online:
                return False
            try:
                self._flush()
            except self._errors() as e:
                self._lost(e)
                return False
            return True

    def claim(self, signature: str) -> bool:
        """Claim ``signature`` for this machine (HSETNX ``P:claims``): True when it is this machine's
        (now or before) or the server is not reachable; False when another machine holds it."""
        if not self.online:
            return True
        value = json.dumps({"machine": self.machine, "time": round(time.time(), 3)})
        try:
            if self.client.hsetnx(self.address.key("claims"), signature, value):
                return True
            holder = self.client.hget(self.address.key("claims"), signature)
        except self._errors() as e:
            self._lost(e)
            return True
        try:
            owner = json.loads(holder).get("machine") if holder else None
        except (ValueError, AttributeError):
            owner = None  # (an unreadable claim: someone else's)
        return owner == self.machine

    def read_new(self) -> list:
        """The findings records of other machines pushed since the last call, checked (:func:`clean_record`);
        a record that fails is skipped with one warning. [] when the server is not reachable."""
        if not self.online:
            return []
        key = self.address.key("findings")
        try:
            if self.client.llen(key) < self.offset:  # (the list was emptied: read it again)
                self.offset = 0
            items = _read_list(self.client, key, self.offset)
        except self._errors() as e:
            self._lost(e)
            return []
        self.offset += len(items)
        out = []
        for raw in items:
            try:
                rec = clean_record(raw)
            except RecordError as e:
                self.warn(str(e))
                continue
            if rec["machine"] != self.machine:
                out.append(rec)
        return out

    # ----------------------------------------------------------------- the example database
    def example_database(self):
        """Hypothesis's example database in Redis, under ``P:examples:`` (a lost connection: nothing
        fetched, nothing saved, the campaign goes on)."""
        from hypothesis.extra.redis import RedisExampleDatabase

        db = RedisExampleDatabase(self.client, key_prefix=self.address.key("examples", "").encode(),
                                  listener_channel=self.address.key("examples-changes"))
        return _Tolerant(db, self)

    # ----------------------------------------------------------------- heartbeats
    def heartbeat(self, state: str = "running") -> bool:
        """Write this machine's stats (``P:machines``) and its ``P:alive:`` key (TTL ALIVE_TTL); push the
        backlog. True when the server answered."""
        stats = {**self.stats(), "machine": self.machine, "host": socket.gethostname()[:100], "pid": os.getpid(),
                 "run": self.run, "job": self.job, "state": state, "last_seen": round(time.time(), 3),
                 "unpushed": len(self.backlog)}
        if not self.retry():
            return False
        try:
            pipe = self.client.pipeline()
            pipe.hset(self.address.key("machines"), self.machine, json.dumps(stats, default=str))
            if state == "running":
                pipe.set(self.address.key("alive", self.machine), "1", ex=ALIVE_TTL)
            else:
                pipe.delete(self.address.key("alive", self.machine))
            pipe.execute()
        except self._errors() as e:
            self._lost(e)
            return False
        return True

    def start(self, stats) -> None:
        """Heartbeat every HEARTBEAT_PERIOD seconds in a daemon thread; ``stats()``: a dict of JSON values
        (programs, generated, findings, started, seconds, programs_per_second, ...)."""
        self.stats = stats
        self.heartbeat()

        def beat():
            while not self._stop.wait(HEARTBEAT_PERIOD):
                try:
                    self.heartbeat()
                except Exception:  # (a stats callback caught mid-update: the next beat)
                    pass

        self._thread = threading.Thread(target=beat, name="shardfuzz-heartbeat", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the heartbeats, push what is left, mark this machine finished. Says in one line when
        records could not be pushed (they are in the local findings file)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(SOCKET_TIMEOUT + 1)
        self.heartbeat("finished")
        if self.backlog:
            self.echo(f"shardfuzz: {len(self.backlog)} findings record(s) could not be pushed to "
                      f"{self.address.display()}; they are in the local findings file")
        try:
            self.client.close()
        except Exception:
            pass


def _tolerant_method(name):
    def method(self, *args):
        if not self.store.online:
            return None
        try:
            return getattr(self.db, name)(*args)
        except self.store._errors() as e:
            self.store._lost(e)
            return None

    method.__name__ = name
    method.__doc__ = f"The Redis database's ``{name}``; nothing when the server is not reachable."
    return method


def _hypothesis_base():
    from hypothesis.database import ExampleDatabase

    return ExampleDatabase


class _Tolerant(_hypothesis_base()):
    """Hypothesis's RedisExampleDatabase, but a lost connection fetches nothing and saves nothing."""

    def __init__(self, db, store: Store):
        super().__init__()
        self.db, self.store = db, store

    def __repr__(self) -> str:
        return f"RedisExampleDatabase({self.store.address.display()})"

    def fetch(self, key: bytes):
        if not self.store.online:
            return iter(())
        try:
            return iter(list(self.db.fetch(key)))
        except self.store._errors() as e:
            self.store._lost(e)
            return iter(())

    save = _tolerant_method("save")
    delete = _tolerant_method("delete")
    move = _tolerant_method("move")


# ------------------------------------------------------------------------------ the merged report
def collect(address: Address, client, echo=None) -> dict:
    """What the server holds of a campaign: {"machines": {name: stats}, "alive": set of names,
    "records": [checked records in push order], "skipped": count, "claims": {signature: machine}}.

    Raises redis.RedisError when the server fails mid-read. Records that fail
    :func:`clean_record` are skipped with a warning each (``echo``).
    """
    warn = _Warner(address.display(), echo)
    machines: dict = {}
    for name, value in client.hgetall(address.key("machines")).items():
        name = name.decode(errors="replace")
        try:
            stats = json.loads(value)
        except ValueError:
            stats = None
        if not _MACHINE.fullmatch(name) or not isinstance(stats, dict):
            warn("a machine's stats that are not JSON")
            continue
        machines[name] = {k: stats.get(k) for k in ("programs", "generated", "findings", "started", "seconds",
                                                    "programs_per_second", "last_seen", "state", "seed", "peer_hits",
                                                    "jax_version", "unpushed")
                          if isinstance(stats.get(k), (int, float, str)) and not isinstance(stats.get(k), bool)}
    alive = {n for n in machines if client.exists(address.key("alive", n))}
    records = []
    for raw in _read_list(client, address.key("findings"), 0):
        try:
            records.append(clean_record(raw))
        except RecordError as e:
            warn(str(e))
    claims = {}
    for sig, value in client.hgetall(address.key("claims")).items():
        try:
            claims[sig.decode()] = json.loads(value)["machine"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            warn("a claim that is not JSON")
    return {"machines": machines, "alive": alive, "records": records, "skipped": warn.count, "claims": claims}


FILE_ONLY = ("campaign_started", "seed", "jax_version", "jaxlib_version", "run", "job", "machine")


def merged_report(held: dict, now: float | None = None) -> dict:
    """The merged report of what :func:`collect` read: :func:`fuzz.reports.merge_reports` over
    the machines (each one "job", recovered from its records), plus ``machines`` (per
    machine: ``machine``, ``live``, ``state``, ``programs``, ``programs_per_second``,
    ``findings``, ``last_seen_seconds_ago``), ``records_skipped`` and ``claims``."""
    from fuzz.reports import merge_reports

    now = time.time() if now is None else now
    names = list(held["machines"])
    per: dict = {}
    for rec in held["records"]:
        if rec["machine"] not in names:
            names.append(rec["machine"])
        per.setdefault(rec["machine"], []).append(rec)
    results, rows = [], []
    for i, name in enumerate(names):
        stats = held["machines"].get(name, {})
        latest: dict = {}
        aliases = {}
        for rec in per.get(name, []):
            latest[rec["signature"]] = rec
            if "superseded_by" in rec:
                aliases[rec["signature"]] = rec["superseded_by"]
        findings = [{k: v for k, v in r.items() if k not in FILE_ONLY} for r in latest.values()
                    if "superseded_by" not in r]
        report = {"findings": findings, "programs": int(stats.get("programs") or 0),
                  "generated": int(stats.get("generated") or 0), "seconds": stats.get("seconds"),
                  "jax_version": stats.get("jax_version") or next((r.get("jax_version") for r in per.get(name, [])
                                                                  if r.get("jax_version")), None)}
        results.append({"job": i, "seed": stats.get("seed"), "report": report,
                        "started": stats.get("started") if isinstance(stats.get("started"), (int, float)) else None,
                        "peer_hits": {}, "aliases": aliases, "error": "", "recovered": True})
        last = stats.get("last_seen")
        live = name in held["alive"]
        rows.append({"machine": name, "live": live,
                     "state": "running" if live else ("finished" if stats.get("state") == "finished" else "gone"),
                     "programs": report["programs"], "programs_per_second": stats.get("programs_per_second", 0.0),
                     "findings": len(findings), "unpushed": stats.get("unpushed", 0),
                     "last_seen_seconds_ago": round(now - last, 1) if isinstance(last, (int, float)) else None})
    if not results:
        return {"machines": [], "findings": [], "programs": 0, "records_skipped": held["skipped"], "claims": 0}
    starts = [r["started"] for r in results if r["started"]]
    ends = [s.get("last_seen") for s in held["machines"].values() if isinstance(s.get("last_seen"), (int, float))]
    seconds = max(ends) - min(starts) if starts and ends and max(ends) > min(starts) else 0.0
    report = merge_reports(results, seconds)
    report["machines"] = rows
    report["records_skipped"] = held["skipped"]
    report["claims"] = len(held["claims"])
    for row, stat in zip(rows, report["job_stats"]):
        stat["machine"] = row["machine"]
    return report


@click.command("status")
@click.argument("url")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Write the merged JSON report here.")
def status(url, report_path):
    """Show a distributed campaign (``run --database redis://HOST:PORT/N``): machines, programs/s, findings.

    Exit 2 for a bad URL, an unreachable server, a refused password or foreign data.
    """
    import redis

    from fuzz.util import UsageError, atomic_write_text

    if not is_url(url):
        raise UsageError(f"{url[:80]!r} is not a Redis URL; give redis://HOST:PORT/N, as passed to run --database")
    try:
        address, client = open_url(url)
        held = collect(address, client, lambda line: click.echo(line, err=True))
    except RedisInputError as e:
        raise UsageError(str(e))
    except redis.RedisError as e:
        raise UsageError(f"lost {parse_url(url).display()} while reading it ({_why(e)}); try again")
    report = merged_report(held)
    report["database"] = address.display()
    click.echo(f"{address.display()}: {sum(r['live'] for r in report['machines'])} live of "
               f"{len(report['machines'])} machine(s), {report['programs']} programs, "
               f"{len(report['findings'])} distinct finding(s)")
    for row in report["machines"]:
        seen = "never" if row["last_seen_seconds_ago"] is None else f"{row['last_seen_seconds_ago']:.0f} s ago"
        click.echo(f"  {row['machine']}: {row['state']}, {row['programs_per_second'] or 0:.2f} programs/s, "
                   f"{row['programs']} programs, {row['findings']} finding(s), last seen {seen}"
                   + (f", {row['unpushed']} record(s) not pushed yet" if row["unpushed"] else ""))
    for i, f in enumerate(report["findings"], 1):
        click.echo(f"  finding {i}: {f['signature'][:150]} ({f['count']} hit(s), "
                   f"{'reduced' if f.get('reduced') else 'not reduced'})")
    if held["skipped"]:
        click.echo(f"  {held['skipped']} record(s) skipped: not shardfuzz's, or damaged")
    if report_path:
        try:
            atomic_write_text(report_path, json.dumps(report, indent=1, default=str))
        except OSError as e:
            raise UsageError(f"cannot write the report to {report_path} ({e.strerror or e}); choose another --report")
        click.echo(f"report: {report_path}")
