// The Worker's modules called one function at a time, for
// modules_test.go: each POST names an exported function and a list of
// cases (each a list of arguments, in JSON), and the answer is what the
// function returned for each, in JSON (a BigInt as its decimal string), for
// the Go test to compare with the Go code the module follows. Run on
// workerd with the Worker's own modules; never deployed.

import {
  admissionID, b64url, challengeNonce, customerOf, draw, drawRank, fromB64, jsonString, jwtKeyOf,
  parseKeyring, parseTicket, signTicket, verifyChallenge,
} from "./tokens.js";
import { asksFrom, rank } from "./room.js";
import { customerOrigin } from "./watermarks.js";
import { Lines } from "./reports.js";

// A ticket as JSON carries its draw as a decimal string.
const ticket = (t) => ({ ...t, draw: BigInt(t.draw) });

const functions = {
  jsonString: (k, s, html) => jsonString(s, html),
  b64url: (k, bytes) => b64url(fromB64(bytes)),
  draw: (k, seed, sale, customer) => draw(fromB64(seed), sale, customer),
  drawRank: (k, d, n) => drawRank(BigInt(d), n),
  signTicket: (k, t) => signTicket(k.keyring, ticket(t)),
  parseTicket: (k, token, nowS) => parseTicket(k.keyring, token, nowS),
  admissionID: (k, t) => admissionID(ticket(t)),
  challengeNonce: (k, t) => challengeNonce(k.keyring.signer, ticket(t)),
  verifyChallenge: (k, t, solution, bits) => verifyChallenge(k.keyring, ticket(t), solution, bits),
  customerOf: (k, authorization, nowS) => customerOf(k.jwtKey, authorization, nowS),
  rank: (k, sale, t) => rank(sale, ticket(t)),
  customerOrigin: (k, key, n) => customerOrigin(key, n),
  asksFrom: (k, sale, t) => asksFrom(sale, ticket(t)),
  // lines plays steps ([ms, customer, state, waitedMs, askingMs], or
  // [ms] alone: a sweep) on one isolate's Lines of sale "s", and gives its
  // report's "queue" member.
  lines: (k, steps) => {
    let now = 0;
    const lines = new Lines(() => now);
    for (const [ms, customer, state, waitedMs, askingMs] of steps) {
      now = ms;
      if (customer === undefined) lines.sweep();
      else lines.answered("s", customer, state, waitedMs, askingMs);
    }
    return lines.queueJSON(new Map([["s", {}]]));
  },
};

const encode = (v) => JSON.stringify(v === undefined ? null : v, (_, x) => (typeof x === "bigint" ? x.toString() : x));

export default {
  async fetch(request, env) {
    if (request.method !== "POST") return new Response('{"status":"ok"}'); // /healthz, as the Worker's
    const k = { keyring: await parseKeyring(env.FLASHLINE_WAITROOM_KEYS, env.FLASHLINE_JWT_SECRET), jwtKey: await jwtKeyOf(env.FLASHLINE_JWT_SECRET) };
    let call;
    try {
      call = await request.json();
    } catch (e) {
      return new Response(encode({ error: "not JSON: " + e }), { status: 400 });
    }
    const fn = functions[call.fn];
    if (!fn) return new Response(encode({ error: "no function " + call.fn }), { status: 404 });
    const results = [];
    for (const args of call.cases) {
      try {
        results.push(await fn(k, ...args));
      } catch (e) {
        results.push({ threw: String(e) });
      }
    }
    return new Response(encode({ results }), { headers: { "Content-Type": "application/json" } });
  },
};
