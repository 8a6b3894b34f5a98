#!/usr/bin/python3
"""Rehearses a flash sale on Locust against running Flashline instances, and
checks what the sale says against what the shoppers saw.

  scripts/rehearse/rehearse.py --target http://edge:8080 --admin-target http://origin:8080 \\
      --users 3000 --units 300 --workers 2 --out /tmp/flashline-rehearsal

It creates a waiting-room sale through the admin API (opening --lead seconds
from now), runs a Locust master and --workers workers on this machine
(headless, --expect-workers) with locustfile.py beside it, and, once every
shopper has reported (or at --deadline seconds after the open), reads the
sale (GET /admin/sales/{id}) and every reservation a shopper was given (GET
/reservations/{id}, as its owner) and checks:

  - every shopper reported;
  - sold exactly the units (nothing available, pending + confirmed = units,
    as many distinct reservations as units, the invariant holds);
  - no customer with two holds;
  - every 201 a reservation (the ids are distinct, and each exists, is the
    owner's and is pending or confirmed);
  - every paid hold an order (confirmed = the shoppers who saw theirs
    confirmed);

and, for a sale with variants (--variants N: N variants of the units
split evenly, each shopper reserving one at random and switching to another
when theirs is answered variant_sold_out):

  - each variant sold exactly (nothing of it available, its pending +
    confirmed its units, as many reservations of it as its units; the
    variants add up to the units);
  - every receipt of the variant asked for (the 201 and the reservation
    read back name it);
  - sold_out told only once every variant was gone (no status answer said
    sold_out while listing a variant not sold out);

and prints, with those, "sold out" heard after the last unit was sold
(p50/p99), admissions per second, time in queue (p50/p90), the outcomes, and
what the Locust processes were run with. It writes Locust's CSV
(locust_*.csv) and HTML report (report.html), the shoppers' reports
(shoppers.jsonl), the summary (summary.json) and the processes' logs into
--out. Exit status 0 when every check passed, 1 when one failed, 2 when the
run itself failed.

Needs FLASHLINE_ADMIN_TOKEN, FLASHLINE_JWT_SECRET and
FLASHLINE_PAYMENT_WEBHOOK_SECRET (the instances'), and Locust (Debian's
python3-locust: /usr/bin/locust, or --locust / $LOCUST). Standard library
only: it runs under any python3; the Locust processes under Locust's own.
A store spreading the crowd over many machines runs this on one of them with
--remote-workers N --master-bind 0.0.0.0 (and --startup long enough to start
them), and the printed worker command, with the master's address, on the
others: docs/rehearsal.md.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def customer_token(secret, customer, ttl=3600):
    # The locustfile's, without importing Locust (gevent) here.
    import base64
    import hashlib
    import hmac

    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

    now = int(time.time())
    h = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    c = b64(json.dumps({"sub": customer, "iat": now, "exp": now + ttl}, separators=(",", ":")).encode())
    sig = hmac.new(secret.encode(), f"{h}.{c}".encode(), hashlib.sha256).digest()
    return f"{h}.{c}.{b64(sig)}"


def call(method, url, token, body=None, timeout=30):
    """One HTTP exchange; returns (status, decoded JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def locust_binary(given):
    for b in (given, os.environ.get("LOCUST"), "/usr/bin/locust", shutil.which("locust")):
        if b and os.path.exists(b):
            return b
    sys.exit("rehearse: no locust (install Debian's python3-locust: make locust)")


def pct(values, q):
    """The q-quantile (0-1) of values, nearest rank; None when empty."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def secs(x):
    return "-" if x is None else f"{x:.2f} s"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="the shoppers' base URL(s), comma-separated (edges, or instances)")
    p.add_argument("--admin-target", default="", help="an instance with the database, for the admin API (default: the first target)")
    p.add_argument("--payments-url", default="", help="where the payment side sends its events (default: the admin target)")
    p.add_argument("--users", type=int, default=3000, help="shoppers")
    p.add_argument("--units", type=int, default=300, help="units on sale")
    p.add_argument("--workers", type=int, default=2, help="Locust workers started on this machine")
    p.add_argument("--remote-workers", type=int, default=0,
                   help="workers more the master waits for, started on other machines with the printed worker command")
    p.add_argument("--master-bind", default="127.0.0.1", help="the address the master listens on for its workers (0.0.0.0: all)")
    p.add_argument("--master-port", type=int, default=0, help="the port the master listens on (0: a free one)")
    p.add_argument("--out", default="/tmp/flashline-rehearsal", help="the output folder")
    p.add_argument("--spread", type=float, default=5, help="seconds before the open over which the early crowd arrives")
    p.add_argument("--after-share", type=float, default=0.2, help="share of the crowd arriving after the open")
    p.add_argument("--after-spread", type=float, default=3, help="seconds after the open over which the late crowd arrives")
    p.add_argument("--abandon-share", type=float, default=0.1, help="share of the crowd that leaves while waiting")
    p.add_argument("--challenge-bits", type=int, default=8, help="the sale's challenge (0: none)")
    p.add_argument("--variants", type=int, default=0,
                   help="a sale of this many variants (1-100), the units split evenly (0: a sale without variants)")
    p.add_argument("--spawn-rate", type=float, default=0, help="shoppers spawned per second in all (default: all within 4 s)")
    p.add_argument("--startup", type=float, default=10, help="seconds for the Locust processes to start and connect")
    p.add_argument("--deadline", type=float, default=60, help="seconds after the open when shoppers still waiting give up")
    p.add_argument("--no-stream", action="store_true", help="shoppers wait in line by polling status, not on the status stream (the way before streams)")
    p.add_argument("--locust", default="", help="the locust program (default $LOCUST, else /usr/bin/locust, else on PATH)")
    a = p.parse_args()

    admin_token = os.environ.get("FLASHLINE_ADMIN_TOKEN", "")
    jwt_secret = os.environ.get("FLASHLINE_JWT_SECRET", "")
    if not admin_token or not jwt_secret or not os.environ.get("FLASHLINE_PAYMENT_WEBHOOK_SECRET"):
        sys.exit("rehearse: FLASHLINE_ADMIN_TOKEN, FLASHLINE_JWT_SECRET and FLASHLINE_PAYMENT_WEBHOOK_SECRET must be set")
    targets = [t.strip().rstrip("/") for t in a.target.split(",") if t.strip()]
    admin = (a.admin_target or targets[0]).rstrip("/")
    payments = (a.payments_url or admin).rstrip("/")
    locust = locust_binary(a.locust)
    os.makedirs(a.out, exist_ok=True)
    spawn_rate = a.spawn_rate or max(1.0, a.users / 4)
    ramp = a.users / spawn_rate

    # The sale: it opens once the workers have started, spawned everyone,
    # and the early crowd has arrived over --spread.
    opens_at = int(time.time() + a.startup + ramp + a.spread) + 1
    new_sale = {
        "sku": "sku_rehearsal", "title": "Rehearsal", "initialStock": a.units, "perCustomerLimit": 1,
        "admission": "waiting_room", "fairness": "randomized_at_open", "challengeBits": a.challenge_bits,
        "opensAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(opens_at)),
    }
    variants = split_variants(a.units, a.variants)
    if variants:
        # a sale with variants has each variant's stock, not initialStock
        del new_sale["initialStock"]
        new_sale["variants"] = variants
    status, sale = call("POST", admin + "/admin/sales", admin_token, new_sale)
    if status != 201:
        print(f"rehearse: creating the sale: {status} {sale}", file=sys.stderr)
        return 2
    sale_id = sale["saleId"]
    print(f"rehearse: sale {sale_id}: {a.units} units, opens at {sale['opensAt']} "
          f"({opens_at - time.time():.0f} s from now); {a.users} shoppers on {a.workers + a.remote_workers} worker(s)"
          + ("; variants " + ", ".join(f"{v['sku']} {v['stock']}" for v in variants) if variants else ""))

    port = a.master_port or free_port()
    expect = a.workers + a.remote_workers
    if expect < 1:
        sys.exit("rehearse: no workers (--workers, --remote-workers)")
    observations = os.path.join(a.out, "shoppers.jsonl")
    locustfile = os.path.join(HERE, "locustfile.py")
    run_time = int(opens_at - time.time() + a.deadline + 60)
    master = [locust, "-f", locustfile, "--master", "--headless", "--master-bind-host", a.master_bind,
              "--master-bind-port", str(port), "--expect-workers", str(expect),
              "--expect-workers-max-wait", str(int(a.startup + 30)),
              "-u", str(a.users), "-r", f"{spawn_rate:g}", "-t", f"{run_time}s",
              "-H", targets[0], "--targets", ",".join(targets), "--payments-url", payments,
              "--sale-id", sale_id, "--opens-at", str(opens_at), "--spread", f"{a.spread:g}",
              "--after-share", f"{a.after_share:g}", "--after-spread", f"{a.after_spread:g}",
              "--abandon-share", f"{a.abandon_share:g}", "--deadline", f"{a.deadline:g}",
              "--observations", observations, "--csv", os.path.join(a.out, "locust"),
              "--html", os.path.join(a.out, "report.html"), "--only-summary"] + (["--no-stream"] if a.no_stream else []) \
        + (["--variants", ",".join(v["sku"] for v in variants)] if variants else [])
    master_host = "127.0.0.1" if a.master_bind in ("127.0.0.1", "0.0.0.0", "*") else a.master_bind
    worker = [locust, "-f", locustfile, "--worker", "--master-host", master_host, "--master-port", str(port)]
    print("rehearse: master: " + " ".join(master))
    print(f"rehearse: worker: {' '.join(worker)}   (x{a.workers} here"
          + (f", x{a.remote_workers} on other machines, with the master's address and"
             " FLASHLINE_JWT_SECRET and FLASHLINE_PAYMENT_WEBHOOK_SECRET in their environment)" if a.remote_workers else ")"))
    env = dict(os.environ)
    procs = []
    logs = []
    try:
        mlog = open(os.path.join(a.out, "master.log"), "w")
        logs.append(mlog)
        m = subprocess.Popen(master, stdout=mlog, stderr=subprocess.STDOUT, env=env)
        procs.append(m)
        for i in range(a.workers):
            wlog = open(os.path.join(a.out, f"worker-{i + 1}.log"), "w")
            logs.append(wlog)
            procs.append(subprocess.Popen(worker, stdout=wlog, stderr=subprocess.STDOUT, env=env))
        try:
            code = m.wait(timeout=run_time + 60)
        except subprocess.TimeoutExpired:
            print("rehearse: the Locust master did not stop in time", file=sys.stderr)
            return 2
        for w in procs[1:]:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.terminate()
    finally:
        for q in procs:
            if q.poll() is None:
                q.terminate()
                try:
                    q.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    q.kill()
        for f in logs:
            f.close()
    if code != 0:
        print(f"rehearse: the Locust master exited {code} (an exception in a shopper?): see {a.out}/master.log",
              file=sys.stderr)

    return check(a, sale_id, opens_at, admin, admin_token, jwt_secret, observations, code)


def split_variants(units, n):
    """n variants V1..Vn of units split evenly (the first ones a unit more
    when it does not divide); [] for n 0."""
    if n <= 0:
        return []
    if n > 100 or n > units:
        sys.exit("rehearse: --variants must be 1-100 and at most --units")
    return [{"sku": f"V{i + 1}", "stock": units // n + (1 if i < units % n else 0)} for i in range(n)]


def variant_checks(sale, reports, read_back):
    """The checks of a sale with variants: each variant sold exactly, every
    receipt of the variant asked for, sold_out told only once every variant
    was gone. read_back is each reservation's variant as read back."""
    listed = sale.get("variants") or []
    held = {}
    for r in reports:
        if r.get("reservations"):
            held[r.get("variant")] = held.get(r.get("variant"), 0) + len(set(r["reservations"]))
    exact = all(v["available"] == 0 and v["pending"] + v["confirmed"] == v["initialStock"] == held.get(v["sku"], 0) for v in listed) \
        and sum(v["initialStock"] for v in listed) == sale["initialStock"] and set(held) <= {v["sku"] for v in listed}
    detail = "; ".join(f"{v['sku']}: available {v['available']}, pending {v['pending']}, confirmed {v['confirmed']}, "
                       f"{held.get(v['sku'], 0)} reservations seen, of {v['initialStock']}" for v in listed)
    if set(held) - {v["sku"] for v in listed}:
        detail += f"; reservations of no variant of the sale: {sorted(map(str, set(held) - {v['sku'] for v in listed}))}"
    wrong = [r["customer"] for r in reports if r.get("reservations") and r.get("receiptVariant") != r.get("variant")]
    wrong += [rid for rid, (asked, got) in read_back.items() if asked != got]
    early = sum(r.get("soldOutEarly", 0) for r in reports)
    switched = sum(r.get("variantSoldOut", 0) for r in reports)
    return [
        ("each variant sold exactly", bool(listed) and exact, detail or "the sale lists no variants"),
        ("every receipt of its variant", not wrong,
         f"{len(wrong)} receipts or reservations read back naming another variant" if wrong else
         f"all; {switched} variant_sold_out answers switched from"),
        ("sold_out only after the last variant", early == 0,
         f"{early} status answers said sold_out listing a variant not sold out" if early else "none earlier"),
    ]


def check(a, sale_id, opens_at, admin, admin_token, jwt_secret, observations, locust_code):
    reports = []
    if os.path.exists(observations):  # not when the master never started its run
        with open(observations, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    reports.append(json.loads(line))
    status, sale = call("GET", f"{admin}/admin/sales/{sale_id}", admin_token)
    if status != 200:
        print(f"rehearse: reading the sale: {status} {sale}", file=sys.stderr)
        return 2

    # What the shoppers were given, and what the service says of each.
    owners = {}
    two_holds = []
    for r in reports:
        ids = set(r["reservations"])
        if len(ids) > 1:
            two_holds.append(r["customer"])
        for i in ids:
            owners.setdefault(i, []).append(r["customer"])
    shared = [i for i, c in owners.items() if len(c) > 1]

    def read(item):
        rid, customer = item
        st, body = call("GET", f"{admin}/reservations/{rid}", customer_token(jwt_secret, customer))
        return rid, st, body

    missing = []
    states = {}
    asked = {i: r.get("variant") for r in reports for i in r["reservations"]}
    read_back = {}  # a sale with variants: reservation -> (asked for, read back)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for rid, st, body in pool.map(read, [(i, c[0]) for i, c in owners.items()]):
            if st != 200 or body.get("saleId") != sale_id or body.get("state") not in ("pending", "confirmed"):
                missing.append(f"{rid}: {st} {body}")
            else:
                states[body["state"]] = states.get(body["state"], 0) + 1
                if a.variants:
                    read_back[rid] = (asked.get(rid), body.get("variant"))

    bought = sum(1 for r in reports if "confirmed" in r)
    sold = sale["pending"] + sale["confirmed"]
    checks = [
        ("every shopper reported", len(reports) == a.users, f"{len(reports)} of {a.users}"),
        ("sold exactly the units",
         sale["available"] == 0 and sold == a.units and len(owners) == a.units and sale["invariant"]["ok"],
         f"available {sale['available']}, pending {sale['pending']}, confirmed {sale['confirmed']}, "
         f"{len(owners)} reservations seen, of {a.units} units; invariant ok: {sale['invariant']['ok']}"),
        ("no customer with two holds", not two_holds, f"{len(two_holds)} customers with two" if two_holds else "none"),
        ("every 201 a reservation", not shared and not missing,
         f"{len(owners)} ids, distinct: {not shared}, each the owner's and held: {not missing} {states}"),
        ("every paid hold an order", sale["confirmed"] == bought,
         f"confirmed {sale['confirmed']}, shoppers who saw their order {bought}"),
        ("no exception in a shopper", locust_code == 0, f"Locust master exit status {locust_code}"),
    ]
    if a.variants:
        checks += variant_checks(sale, reports, read_back)

    # Figures.
    reserved = [r["reserved"] for r in reports if "reserved" in r]
    last_sold = max(reserved) if reserved else None
    heard = [r["soldOut"] - last_sold for r in reports if "soldOut" in r and last_sold]
    admitted = sorted(r["admitted"] for r in reports if "admitted" in r)
    queue = [r["admitted"] - r["ticket"] for r in reports if "admitted" in r and "ticket" in r]
    queue_after_open = [r["admitted"] - max(r["ticket"], opens_at) for r in reports if "admitted" in r and "ticket" in r]
    per_second = {}
    for t in admitted:
        s = max(0, int(t - opens_at))
        per_second[s] = per_second.get(s, 0) + 1
    span = admitted[-1] - admitted[0] if len(admitted) > 1 else 0
    outcomes = {}
    for r in reports:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    polls = sum(r["polls"] for r in reports)
    try:
        with open(observations + ".workers.json", encoding="utf-8") as f:
            workers = json.load(f)
    except (OSError, ValueError):
        workers = []
    late = sum(1 for r in reports if r.get("spawnedLate"))
    stale = sum(r.get("stale", 0) for r in reports)
    summary = {
        "saleId": sale_id, "users": a.users, "units": a.units, "variants": a.variants, "workers": a.workers + a.remote_workers,
        "checks": [{"name": n, "ok": ok, "detail": d} for n, ok, d in checks],
        "ok": all(ok for _, ok, _ in checks),
        "sale": sale,
        "lastSoldAfterOpen": None if last_sold is None else last_sold - opens_at,
        "soldOutHeard": {"n": len(heard), "p50": pct(heard, .5), "p99": pct(heard, .99), "max": pct(heard, 1)},
        "admitted": {"n": len(admitted), "first": admitted[0] - opens_at if admitted else None,
                     "last": admitted[-1] - opens_at if admitted else None,
                     "perSecond": len(admitted) / span if span > 0 else None,
                     "bySecondAfterOpen": [per_second.get(s, 0) for s in range(max(per_second, default=-1) + 1)]},
        "timeInQueue": {"p50": pct(queue, .5), "p90": pct(queue, .9)},
        "timeInQueueAfterOpen": {"p50": pct(queue_after_open, .5), "p90": pct(queue_after_open, .9)},
        "locustWorkers": workers,
        "outcomes": outcomes, "statusPolls": polls, "staleAnswers": stale, "spawnedLate": late,
    }
    with open(os.path.join(a.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)

    print()
    print(f"rehearsal: {a.users} shoppers, {a.units} units" + (f" in {a.variants} variants" if a.variants else "")
          + f", {a.workers + a.remote_workers} workers, sale {sale_id}")
    for n, ok, d in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {n}: {d}")
    print(f"  last unit sold       {secs(summary['lastSoldAfterOpen'])} after the open")
    h = summary["soldOutHeard"]
    print(f"  sold out heard       {h['n']} shoppers, p50 {secs(h['p50'])}, p99 {secs(h['p99'])}, "
          f"last {secs(h['max'])} after the last unit sold")
    ad = summary["admitted"]
    rate = "-" if ad["perSecond"] is None else f"{ad['perSecond']:.0f}/s"
    print(f"  admitted             {ad['n']} ({ad['n'] / max(1, a.units):.1f}x the units), first {secs(ad['first'])}, last {secs(ad['last'])} after the open; "
          f"{rate} from the first to the last; by second: {' '.join(map(str, ad['bySecondAfterOpen'][:30]))}")
    print(f"  time in queue        p50 {secs(summary['timeInQueue']['p50'])}, p90 {secs(summary['timeInQueue']['p90'])} "
          f"from the ticket (after the open: p50 {secs(summary['timeInQueueAfterOpen']['p50'])}, "
          f"p90 {secs(summary['timeInQueueAfterOpen']['p90'])})")
    print(f"  outcomes             " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"  status answers       {polls} ({polls / max(1, len(reports)):.1f} a shopper; polls, or events on the status stream: {sum(r.get('streams', 0) for r in reports)} streams, {sum(r.get('stalled', 0) for r in reports)} of them silent or broken before their end)"
          + (f", {stale} of them stale (an edge without its origin)" if stale else "")
          + (f"; {late} shoppers spawned after their arrival time" if late else ""))
    if workers:
        req = sum(w["requests"] for w in workers)
        cpu = sum(w["cpuSeconds"] for w in workers)
        rss = max(w["maxRssKiB"] for w in workers)
        per = max(w["shoppers"] for w in workers)
        print(f"  Locust workers       {len(workers)}: {req} requests in {cpu:.1f} CPU-seconds "
              f"({req / max(cpu, 1e-9):.0f} requests per CPU-second); the largest {rss / 1024:.0f} MiB "
              f"at most for {per} shoppers")
    print(f"  files                {a.out}: report.html, locust_stats.csv, shoppers.jsonl, summary.json")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
