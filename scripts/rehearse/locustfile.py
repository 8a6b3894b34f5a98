"""A flash sale's crowd, played on Locust: every user is one shopper.

Each shopper goes through the funnel of a waiting-room sale as the
waiting-room page and docs/clients.md do it, speaking only Flashline's HTTP
contract:

1. arrives at its own moment (before the open, spread over --spread seconds,
   or --after-share of the crowd in the --after-spread seconds after it) and
   takes a ticket (GET /sales/{id}/ticket), solving the ticket's challenge
   (SHA-256 of "nonce:solution" with `bits` leading zero bits) as the page's
   Web Worker does;
2. waits its turn: polls GET /sales/{id}/status at the pace the answers give
   (pollAfterMs; after a failure, 1 s doubling with jitter, never sooner than
   Retry-After), until admitted or sold out for good. All of it is in
   Shopper.wait_turn, so that a stream (server-sent events, a long poll) can
   replace the polls there alone. --abandon-share of the crowd leaves at a
   random moment of its wait and never comes back;
3. reserves with its admission token and one Idempotency-Key for the
   attempt, retried with the same key after 429, 503, 409
   request_in_progress and network errors (exponential backoff with full
   jitter, base 250 ms, cap 8 s, never sooner than Retry-After). In a sale
   with variants (--variants) it reserves one chosen at random among those
   the room's last answer did not list sold out, and on 409
   variant_sold_out switches to another (a key of its own), until it holds
   one or every variant is gone;
4. with a hold, pays: the payment side's signed event (POST /payments/events,
   Flashline-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">), then
   reads its reservation every 2 s or so until it is confirmed.

What each shopper saw (its reservation ids, when it was admitted, when it
heard "sold out", ...) is one JSON object; workers send them to the master
in Locust messages ("shoppers"), and the master writes them, one a line, to
--observations. The master stops the run once every shopper has reported
(or at --deadline seconds after the open), so the checker
(scripts/rehearse/rehearse.py) can hold them against what the sale says.

Settings (custom arguments: the master forwards them to its workers):
--sale-id, --opens-at (Unix seconds), --spread, --after-share,
--after-spread, --abandon-share, --payments-url (where the payment side
sends its events; default the shoppers' host), --targets (several base URLs
the shoppers spread over; default --host), --deadline, --observations,
--variants (the sale's variants' SKUs, comma-separated; none: a sale
without variants).
Secrets from the environment of every process, master and workers:
FLASHLINE_JWT_SECRET (customer tokens are minted here: HS256, sub and exp)
and FLASHLINE_PAYMENT_WEBHOOK_SECRET.

Locust 2.12 (Debian's python3-locust) or later; nothing else beyond the
standard library.
"""

import base64
import hashlib
import hmac
import json
import os
import random
import resource
import time
import uuid

import gevent
import locust.runners
from locust import FastHttpUser, events, task
from locust.runners import MasterRunner, WorkerRunner

# Debian's python3-locust 2.12.1 is built with an empty version string, and
# a master refuses a worker that reports none as "an old (pre 2.0) worker":
# master and workers all load this file, so they all say the same instead.
if not locust.runners.__version__:
    locust.runners.__version__ = "2.12.1+debian"

# The master declares a worker missing once it has not heard
# HEARTBEAT_LIVENESS of its heartbeats (one a second), and stops the test
# when the last worker goes missing. Locust's 3 is four seconds of a
# worker's event loop held up, which a busy machine gives: on a saturated
# two-core CI machine both workers missed theirs while they spawned 1,500
# shoppers each, and the master stopped the rehearsal 1.6 s after the spawn
# with a quarter of the crowd unreported. A worker here is this machine's
# own process, not a lost one: it is given a minute, and the run is bounded
# by --deadline anyway. (TestRehearsal pauses both workers for longer than
# Locust's four seconds.) Set on the master, where it is read; a Locust
# without the setting fails here rather than runs with the short one.
if not isinstance(getattr(locust.runners, "HEARTBEAT_LIVENESS", None), int):
    raise RuntimeError("locust.runners.HEARTBEAT_LIVENESS is gone: this Locust is not one locustfile.py knows")
locust.runners.HEARTBEAT_LIVENESS = 60

# --- customer tokens and signatures, by hand (no JWT library needed) ---


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def customer_token(secret: str, customer: str, ttl: int = 3600) -> str:
    """An HS256 customer JWT with the claims Flashline reads: sub and exp."""
    now = int(time.time())
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = b64url(json.dumps({"sub": customer, "iat": now, "exp": now + ttl}, separators=(",", ":")).encode())
    signing_input = f"{header}.{claims}".encode()
    sig = hmac.new(secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url(sig)}"


def payment_signature(secret: str, body: bytes, at: int) -> str:
    """Flashline-Signature for body sent at Unix time at (webhook.Sign)."""
    mac = hmac.new(secret.encode(), str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


def leading_zero_bits(digest: bytes) -> int:
    n = 0
    for b in digest:
        if b:
            return n + 8 - b.bit_length()
        n += 8
    return n


def solve(nonce: str, bits: int) -> str:
    """The smallest decimal solution, as the page's worker finds it."""
    if bits <= 0:
        return "0"
    prefix = (nonce + ":").encode()
    n = 0
    while True:
        s = str(n).encode()
        if leading_zero_bits(hashlib.sha256(prefix + s).digest()) >= bits:
            return s.decode()
        n += 1


def retry_after(r) -> float:
    try:
        return float((r.headers or {}).get("Retry-After") or 0)
    except (TypeError, ValueError):
        return 0.0


def error_code(r) -> str:
    try:
        return r.json()["error"]["code"]
    except Exception:
        return ""


# --- the crowd's settings ---


@events.init_command_line_parser.add_listener
def _(parser):
    g = parser.add_argument_group("rehearsal")
    g.add_argument("--sale-id", default="", help="the waiting-room sale (required)")
    g.add_argument("--opens-at", type=float, default=0, help="the sale's opening, Unix seconds (required)")
    g.add_argument("--spread", type=float, default=10, help="seconds before the open over which the early crowd arrives")
    g.add_argument("--after-share", type=float, default=0.2, help="share of the crowd arriving after the open")
    g.add_argument("--after-spread", type=float, default=5, help="seconds after the open over which the late crowd arrives")
    g.add_argument("--abandon-share", type=float, default=0.1, help="share of the crowd that leaves while waiting")
    g.add_argument("--targets", default="", help="comma-separated base URLs the shoppers spread over (default: --host)")
    g.add_argument("--payments-url", default="", help="base URL the payment side sends its events to (default: the shopper's)")
    g.add_argument("--deadline", type=float, default=60, help="seconds after the open when shoppers still waiting give up and the run stops")
    g.add_argument("--observations", default="shoppers.jsonl", help="the master's JSON-lines file of what every shopper saw")
    g.add_argument("--no-stream", dest="stream", action="store_false", help="wait in line by polling status, not on the status stream")
    g.add_argument("--variants", default="", help="the sale's variants' SKUs, comma-separated (none: a sale without variants)")


def settings(env):
    o = env.parsed_options
    if not o.sale_id or not o.opens_at:
        raise RuntimeError("rehearsal: --sale-id and --opens-at are required")
    return o


# --- what the shoppers saw, from the workers to the master ---

OUTBOX: list = []  # reports waiting to be sent (a worker) or written (alone)
LIVE: dict = {}  # customer -> report of the shoppers still on their way


class Observations:
    """The master's (or a lone process's) file of reports, one per shopper."""

    def __init__(self, path):
        self.file = open(path, "w", encoding="utf-8")
        self.customers = set()

    def write(self, reports):
        for r in reports:
            if r["customer"] in self.customers:
                continue  # a report sent again at the stop
            self.customers.add(r["customer"])
            self.file.write(json.dumps(r, separators=(",", ":")) + "\n")
        self.file.flush()


OBS: "Observations | None" = None

# What this process spent: requests sent and shoppers played (the
# capacity plan's Locust workers: docs/operations.md).
SPENT = {"requests": 0, "shoppers": 0}


def spent():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return dict(SPENT, cpuSeconds=ru.ru_utime + ru.ru_stime, maxRssKiB=ru.ru_maxrss, pid=os.getpid())


def flush(env, final=False):
    """Sends (or writes) the reports made so far; at the stop, also those
    of shoppers still on their way, marked unfinished."""
    reports = OUTBOX[:]
    del OUTBOX[:]
    if final:
        for r in LIVE.values():
            r = dict(r)
            r["outcome"] = r.get("outcome") or "unfinished"
            reports.append(r)
    if not reports:
        return
    if isinstance(env.runner, WorkerRunner):
        env.runner.send_message("shoppers", reports)
    elif OBS is not None:
        OBS.write(reports)


@events.init.add_listener
def on_init(environment, **_):
    global OBS
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        def sender():
            while True:
                gevent.sleep(0.5)
                flush(environment)

        gevent.spawn(sender)
        return
    OBS = Observations(environment.parsed_options.observations)
    if isinstance(runner, MasterRunner):
        runner.register_message("shoppers", lambda environment, msg, **kw: OBS.write(msg.data))
        runner.register_message("spent", lambda environment, msg, **kw: WORKERS.append(msg.data))
    else:  # one process on its own (no --master): the shoppers are here
        def writer():
            while True:
                gevent.sleep(0.5)
                flush(environment)

        gevent.spawn(writer)


@events.test_start.add_listener
def on_test_start(environment, **_):
    if isinstance(environment.runner, WorkerRunner):
        return
    gevent.spawn(watch_the_end, environment)


def watch_the_end(env):
    """Stops the run when every shopper has reported, or at the deadline."""
    o = settings(env)
    want = o.num_users
    end = o.opens_at + o.deadline + 10
    while len(OBS.customers) < want and time.time() < end:
        gevent.sleep(0.5)
    # A master's stop asks its workers to stop and waits for them: their
    # last shoppers' reports arrive before they say they have stopped.
    env.runner.stop()
    if isinstance(env.runner, MasterRunner):
        # Workers send their request statistics every 3 s, stopped or not:
        # wait for the last of them before quitting, or the last seconds'
        # requests would be missing from the report.
        gevent.sleep(4)
    flush(env, final=True)
    env.runner.quit()


@events.test_stop.add_listener
def on_test_stop(environment, **_):
    if isinstance(environment.runner, WorkerRunner):
        flush(environment, final=True)
        environment.runner.send_message("spent", spent())


WORKERS: list = []  # what each worker spent, as they said at the stop


@events.quitting.add_listener
def on_quitting(environment, **_):
    if OBS is not None:
        OBS.file.close()
        procs = WORKERS if isinstance(environment.runner, MasterRunner) else [spent()]
        with open(environment.parsed_options.observations + ".workers.json", "w", encoding="utf-8") as f:
            json.dump(procs, f)
    # Refusals the crowd is told to retry are failures in Locust's tables
    # (to count them), not a failed run; an exception in a shopper is.
    environment.process_exit_code = 2 if environment.runner.exceptions else 0


# --- the shopper ---


class Done(Exception):
    """The shopper's way through the funnel ends here."""


class Shopper(FastHttpUser):
    network_timeout = 15.0  # an edge gives up on its origin after 15 s
    connection_timeout = 5.0
    max_retries = 1  # attempts per request (geventhttpclient): retries are the shopper's own
    host = "http://127.0.0.1:8080"

    def on_start(self):
        o = settings(self.environment)
        self.o = o
        targets = [t.strip().rstrip("/") for t in (o.targets or self.host).split(",") if t.strip()]
        self.base = random.choice(targets)
        self.pay_base = (o.payments_url or self.base).rstrip("/")
        self.sale = o.sale_id
        self.variants = [v for v in (o.variants or "").split(",") if v]
        self.gone = set()  # variants the room listed, or a reservation answered, sold out
        self.customer = f"rh-{uuid.uuid4().hex[:20]}"
        self.jwt_secret = os.environ["FLASHLINE_JWT_SECRET"]
        self.pay_secret = os.environ.get("FLASHLINE_PAYMENT_WEBHOOK_SECRET", "")
        self.auth = {"Authorization": "Bearer " + customer_token(self.jwt_secret, self.customer)}
        self.give_up = o.opens_at + o.deadline
        if random.random() < o.after_share:
            self.arrival = o.opens_at + random.random() * o.after_spread
        else:
            self.arrival = o.opens_at - random.random() * o.spread
        self.leave_at = None
        if random.random() < o.abandon_share:
            # leaves at a random moment between its arrival and a few
            # seconds after the late crowd came
            self.leave_at = self.arrival + random.random() * max(1.0, o.opens_at + o.after_spread + 5 - self.arrival)
        self.report = {
            "customer": self.customer, "arrival": self.arrival, "spawnedLate": time.time() > self.arrival,
            "abandons": self.leave_at is not None, "outcome": "", "reservations": [],
            "polls": 0, "retries": 0,
        }
        LIVE[self.customer] = self.report
        SPENT["shoppers"] += 1
        self.finished = False

    def wait_time(self):
        # A shopper goes through once, then idles until the stop (in its
        # wait, where a stop ends it at once).
        return 3600 if self.finished else 0

    @task
    def shop(self):
        if self.finished:
            return
        r = self.report
        try:
            gevent.sleep(max(0.0, self.arrival - time.time()))
            self.funnel()
        except Done as d:
            r["outcome"] = str(d)
        finally:
            self.finished = True
            self.client.client.close()  # the tab is closed: its connections too
            if not r["outcome"]:
                r["outcome"] = "unfinished"
            LIVE.pop(self.customer, None)
            OUTBOX.append(r)

    def funnel(self):
        ticket = self.take_ticket()
        admission = self.wait_turn(ticket)
        reservation = self.reserve(admission)
        self.pay(reservation)

    # -- 1. the ticket --

    def take_ticket(self):
        backoff = Backoff()
        while True:
            self.check_time()
            r = self.call("GET", f"{self.base}/sales/{self.sale}/ticket", "GET /sales/{id}/ticket",
                          expected={(409, "sold_out")})
            if r.status_code == 200:
                t = r.json()
                self.report["ticket"] = time.time()
                self.report["position"] = t.get("position")
                ch = t.get("challenge")
                # The page starts solving as soon as it holds the ticket.
                t["solution"] = solve(ch["nonce"], ch["bits"]) if ch else ""
                return t
            if r.status_code == 409 and error_code(r) == "sold_out":
                raise Done("sold out at the ticket")  # came after the last unit: told at once
            if not self.retryable(r):
                raise Done(f"ticket refused: {r.status_code} {error_code(r)}")
            self.report["retries"] += 1
            self.sleep(backoff.next(retry_after(r)))

    # -- 2. the wait: everything about learning one's turn is here --

    def wait_turn(self, ticket) -> str:
        """Waits in line with ticket until admitted (returns the admission
        token) or sold out for good (raises Done): on the status stream, as
        the waiting page does, or by polls when the stream is refused or
        --no-stream."""
        if self.o.stream:
            admission = self.stream_turn(ticket)
            if admission:
                return admission
        return self.poll_turn(ticket)

    def stream_turn(self, ticket):
        """The status stream (GET .../status/stream, server-sent events):
        each event is a status answer, sent when it changes. Returns the
        admission token, raises Done, or returns None to poll instead (the
        stream refused, or ended twice in a row with nothing said)."""
        token = ticket["token"]
        silent = 0
        while True:
            self.check_time()
            SPENT["requests"] += 1
            self.report["streams"] = self.report.get("streams", 0) + 1
            solution = ticket["solution"]
            params = f"token={token}" + (f"&solution={solution}" if solution else "")
            r = self.open_stream(f"{self.base}/sales/{self.sale}/status/stream?{params}")
            if r is None or r.status_code != 200:
                return None
            try:
                admission, events = self.read_stream(r, ticket)
            finally:
                if hasattr(r.stream, "release"):
                    r.stream.release()
            if admission:
                return admission
            silent = 0 if events else silent + 1
            if silent >= 2:
                return None
            self.sleep(0.1 + random.random() * 0.2)

    def open_stream(self, url):
        """Opens a status stream: the response, or None when no connection
        was made. Locust's FastHttpSession cannot answer a stream whose
        connection failed (2.12 reads the headers of the error it made
        instead, an AttributeError in the shopper): that failure is counted
        here as Locust counts a failed request, and the shopper polls, as the
        page does when its EventSource cannot connect."""
        name = "GET /sales/{id}/status/stream"
        start = time.perf_counter()
        try:
            return self.client.get(url, name=name, headers=dict(self.auth), stream=True)
        except AttributeError:
            events.request.fire(request_type="GET", name=name, response_time=(time.perf_counter() - start) * 1000,
                                response_length=0, response=None, context={},
                                exception=ConnectionError("no answer: the stream's connection failed"))
            self.report["stalled"] = self.report.get("stalled", 0) + 1
            return None

    def read_stream(self, r, ticket):
        """Reads one stream to its end: (the admission token, events read),
        or raises Done; no token when it ended without one (connect again:
        its lifetime, or a challenge now solved)."""
        events = 0
        while True:
            left = min(self.give_up, self.leave_at if self.leave_at is not None and "admitted" not in self.report else self.give_up) - time.time()
            line = None
            with gevent.Timeout(max(0.01, left), False):
                try:
                    line = r.stream.readline(b"\n")  # SSE lines end in LF (its default is CRLF)
                except OSError:
                    # Silent past network_timeout (the server's heartbeat is
                    # due every 10 s; an overloaded one can be late) or
                    # broken: the page's EventSource connects again, and so
                    # does the shopper. Counted, not hidden.
                    self.report["stalled"] = self.report.get("stalled", 0) + 1
                    return None, events
            if line is None:
                self.check_time()  # the shopper's time is up: raises Done
                return None, events
            if not line:
                return None, events  # the stream ended
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if not line.startswith("data: "):
                continue  # "event: status", blank lines, ": comments"
            body = json.loads(line[6:])
            events += 1
            self.report["polls"] += 1
            state = body.get("state")
            self.saw_variants(body)
            if state == "admitted":
                self.report["admitted"] = time.time()
                return body["admissionToken"], events
            if state == "sold_out":
                self.heard_sold_out(body)
                if body.get("queueIsFull", True):
                    raise Done("sold out")
            elif state == "challenge_required":
                ch = body["challenge"]
                ticket["solution"] = solve(ch["nonce"], ch["bits"])
                return None, events  # connect again with the solution

    def poll_turn(self, ticket, first_wait=None) -> str:
        """Polls GET status at the pace the answers give."""
        token, solution = ticket["token"], ticket["solution"]
        wait = ticket.get("pollAfterMs", 1000) / 1000 if first_wait is None else first_wait
        backoff = Backoff()
        while True:
            self.sleep(wait)
            self.check_time()
            params = f"token={token}" + (f"&solution={solution}" if solution else "")
            r = self.call("GET", f"{self.base}/sales/{self.sale}/status?{params}", "GET /sales/{id}/status")
            self.report["polls"] += 1
            body = r.json() if r.status_code == 200 else {}
            if r.status_code != 200 or body.get("stale"):
                # the room cannot answer now: keep the ticket, back off
                if r.status_code not in (0, 200) and not self.retryable(r):
                    raise Done(f"status refused: {r.status_code} {error_code(r)}")
                if body.get("stale"):
                    self.report["stale"] = self.report.get("stale", 0) + 1
                self.report["retries"] += 1
                wait = backoff.next(max(retry_after(r), body.get("pollAfterMs", 0) / 1000))
                continue
            backoff.reset()
            state = body.get("state")
            self.saw_variants(body)
            if state == "waiting":
                wait = body.get("pollAfterMs", 1000) / 1000
            elif state == "challenge_required":
                ch = body["challenge"]
                solution, wait = solve(ch["nonce"], ch["bits"]), 0
            elif state == "admitted":
                self.report["admitted"] = time.time()
                return body["admissionToken"]
            elif state == "sold_out":
                self.heard_sold_out(body)
                if body.get("queueIsFull", True):
                    raise Done("sold out")
                wait = body.get("pollAfterMs", 5000) / 1000  # for now: holds may come back
            else:
                raise Done(f"status: unknown state {state!r}")

    # -- 3. the reservation --

    def reserve(self, admission) -> str:
        """Reserves a unit (of a variant, in a sale with variants: one at
        random among those not known gone, another on variant_sold_out)."""
        if not self.variants:
            return self.reserve_variant(admission, None)
        while True:
            left = [v for v in self.variants if v not in self.gone]
            if not left:
                self.heard_sold_out()  # every variant answered variant_sold_out or was listed gone
                raise Done("sold out at the reservation")
            variant = random.choice(left)
            rid = self.reserve_variant(admission, variant)
            if rid:
                return rid
            self.gone.add(variant)
            self.report["variantSoldOut"] = self.report.get("variantSoldOut", 0) + 1

    def reserve_variant(self, admission, variant):
        """Reserves a unit (of variant, unless None) with a key of its own:
        its id, or None when the variant was answered variant_sold_out."""
        key = str(uuid.uuid4())  # one key for this attempt, on every retry
        headers = {"Idempotency-Key": key, "X-Admission-Token": admission, "Content-Type": "application/json"}
        body = json.dumps({"quantity": 1} if variant is None else {"quantity": 1, "variant": variant}, separators=(",", ":"))
        backoff = Backoff(base=0.25, cap=8, low=0)
        for _ in range(12):
            r = self.call("POST", f"{self.base}/sales/{self.sale}/reservations", "POST /sales/{id}/reservations",
                          expected={(409, "sold_out"), (409, "variant_sold_out")}, data=body, headers=headers)
            code = error_code(r)
            if r.status_code == 201:
                receipt = r.json()
                rid = receipt["reservationId"]
                self.report["reservations"].append(rid)
                self.report.setdefault("reserved", time.time())
                if variant is not None:
                    # what was asked for, and what the receipt names
                    self.report["variant"] = variant
                    self.report["receiptVariant"] = receipt.get("variant")
                return rid
            if r.status_code == 409 and code == "variant_sold_out" and variant is not None:
                return None
            if r.status_code == 409 and code == "sold_out":
                self.heard_sold_out()  # the answer most of a crowd gets
                raise Done("sold out at the reservation")
            if r.status_code == 401:
                # the token expired: a fresh one, the same key
                self.auth = {"Authorization": "Bearer " + customer_token(self.jwt_secret, self.customer)}
            elif not (self.retryable(r) or code == "request_in_progress"):
                raise Done(f"reservation refused: {r.status_code} {code}")
            self.report["retries"] += 1
            self.sleep(backoff.next(retry_after(r)))
        raise Done("reservation: gave up after 12 attempts")

    # -- 4. payment --

    def pay(self, reservation):
        """The payment side confirms the hold with a signed event; the
        shopper then reads its reservation until it is an order."""
        if not self.pay_secret:
            raise Done("held (no payment secret: not paid)")
        self.sleep(random.uniform(0.5, 2.0))  # the shopper at the store's checkout
        ref = "pay_" + reservation.split("_", 1)[-1]
        body = json.dumps({"id": "evt_" + uuid.uuid4().hex, "type": "payment.succeeded",
                           "data": {"reservationId": reservation, "paymentReference": ref}},
                          separators=(",", ":")).encode()
        backoff = Backoff()
        for _ in range(8):
            headers = {"Flashline-Signature": payment_signature(self.pay_secret, body, int(time.time())),
                       "Content-Type": "application/json"}
            r = self.call("POST", f"{self.pay_base}/payments/events", "POST /payments/events",
                          data=body, headers=headers, auth=False)
            if r.status_code == 200:
                self.report["paid"] = time.time()
                self.report["payment"] = r.json().get("outcome")
                break
            if r.status_code and r.status_code < 500 and r.status_code != 429:
                raise Done(f"payment refused: {r.status_code} {error_code(r)}")
            self.sleep(backoff.next(retry_after(r)))  # the same event id: replayed if it was applied
        else:
            raise Done("payment: gave up")
        wait = 0.2
        while True:
            self.sleep(wait)
            wait = random.uniform(1.5, 2.5)  # every 2 s or so, jittered (docs/clients.md)
            r = self.call("GET", f"{self.base}/reservations/{reservation}", "GET /reservations/{id}")
            state = r.json()["state"] if r.status_code == 200 else ""
            if state == "confirmed":
                self.report["confirmed"] = time.time()
                self.report["orderId"] = r.json().get("orderId")
                raise Done("bought")
            if state and state != "pending":
                raise Done(f"paid, but the hold is {state}")
            if time.time() > self.give_up:
                raise Done(f"paid, {'still pending' if state else 'confirmation unseen'}")

    def call(self, method, url, name, expected=(), auth=True, headers=None, **kw):
        """One request, under name in Locust's statistics: a success when
        2xx or its (status, error code) is expected, else a failure named
        by them. Returned for the caller to read (after Locust counted it)."""
        SPENT["requests"] += 1
        h = dict(self.auth) if auth else {}
        h.update(headers or {})
        with self.client.request(method, url, name=name, headers=h, catch_response=True, **kw) as r:
            code = error_code(r) if r.status_code >= 300 else ""
            if 200 <= r.status_code < 300 or (r.status_code, code) in expected:
                r.success()
            else:
                r.failure(f"{r.status_code or 'no answer: ' + type(r.error).__name__} {code}".strip())
        return r

    # -- helpers --

    def heard_sold_out(self, status=None):
        """The shopper heard the sale is sold out; in a status answer of a
        sale with variants, one listing a variant not sold out is counted
        (soldOutEarly: the room must say sold_out only once every variant
        is gone)."""
        self.report.setdefault("soldOut", time.time())
        listed = (status or {}).get("variants") or []
        if any(v.get("availability") != "sold_out" for v in listed):
            self.report["soldOutEarly"] = self.report.get("soldOutEarly", 0) + 1

    def saw_variants(self, status):
        """Remembers the variants a status answer lists sold out (units do
        not come back in a rehearsal: every hold is paid)."""
        for v in status.get("variants") or []:
            if v.get("availability") == "sold_out":
                self.gone.add(v.get("sku"))

    def retryable(self, r) -> bool:
        """No answer, 429 or 5xx: keep what one holds and ask again later."""
        return r.status_code == 0 or r.status_code == 429 or r.status_code >= 500

    def check_time(self):
        now = time.time()
        if self.leave_at is not None and now >= self.leave_at and "admitted" not in self.report:
            raise Done("abandoned")
        if now >= self.give_up:
            raise Done("gave up at the deadline")

    def sleep(self, seconds):
        """Sleeps, but a shopper who would leave meanwhile leaves then."""
        until = time.time() + max(0.0, seconds)
        if self.leave_at is not None and "admitted" not in self.report:
            until = min(until, max(self.leave_at, time.time()))
        gevent.sleep(max(0.0, until - time.time()))


class Backoff:
    """Exponential backoff with jitter, never sooner than the floor given
    (Retry-After, the last pollAfterMs). The room's, as the page's: 1 s
    doubling, each wait a half to the whole of it, at most 30 s. The
    reservation's (docs/clients.md): full jitter, base 250 ms, cap 8 s."""

    def __init__(self, base=1.0, cap=30.0, low=0.5):
        self.base, self.cap, self.low, self.n = base, cap, low, 0

    def next(self, floor=0.0) -> float:
        w = min(self.cap, self.base * 2 ** self.n)
        w = random.uniform(self.low * w, w)
        self.n += 1
        return max(w, floor)

    def reset(self):
        self.n = 0
