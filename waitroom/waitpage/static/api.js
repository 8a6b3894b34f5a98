// The page's only network requests: the API (on this origin, or at the base
// URL an exported page names: sale.api, which answers cross-origin requests),
// with the customer's token, never cached, no cookies, no referrer. The HTTP
// contract is the README's API section.

import { sale, state } from "./state.js";

// api resolves (never rejects) to {status, headers, body, code, message},
// and to {status: 0, network: true, …} when no answer came. It keeps
// state.clockSkewMs from the answer's Date header.
export function api(method, path, extraHeaders, body) {
  const headers = { "Accept": "application/json" };
  if (state.jwt) headers["Authorization"] = "Bearer " + state.jwt;
  if (extraHeaders) for (const h in extraHeaders) headers[h] = extraHeaders[h];
  return window.fetch(sale.api + path, {
    method: method,
    headers: headers,
    body: body,
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer"
  }).then(function (resp) {
    const date = resp.headers.get("Date");
    if (date) {
      const skew = Date.parse(date) - Date.now();
      // The Date header has one-second resolution: ignore small skews.
      if (!isNaN(skew)) state.clockSkewMs = Math.abs(skew) > 2000 ? skew : 0;
    }
    return resp.text().then(function (text) {
      let data = null;
      try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
      const err = data && data.error ? data.error : {};
      return {
        status: resp.status,
        headers: resp.headers,
        body: data,
        code: err.code || "",
        message: err.message || (text && !data ? text.slice(0, 200) : "HTTP " + resp.status)
      };
    });
  }, function (e) {
    return { status: 0, network: true, headers: new Headers(), body: null, code: "network", message: String(e && e.message || e) };
  });
}

// retryAfterMs reads Retry-After (seconds or an HTTP date), never less than
// half a second and never more than two minutes; fallback when there is none.
export function retryAfterMs(r, fallback) {
  const v = r.headers.get("Retry-After");
  let ms = NaN;
  if (v) {
    if (/^\s*\d+\s*$/.test(v)) ms = parseInt(v, 10) * 1000;
    else ms = Date.parse(v) - (Date.now() + state.clockSkewMs);
  }
  if (isNaN(ms)) ms = fallback;
  return Math.min(120000, Math.max(500, ms));
}

// roomDown: the answer says the room cannot answer now (no answer at all,
// a 5xx, or 429): the page says "come back shortly" and asks again later.
export function roomDown(r) {
  return r.network || r.status >= 500 || r.status === 429;
}

// retryAfterOnly is the answer's Retry-After in ms, 0 when there is none.
export function retryAfterOnly(r) {
  const v = r.headers.get("Retry-After");
  if (!v) return 0;
  let ms = NaN;
  if (/^\s*\d+\s*$/.test(v)) ms = parseInt(v, 10) * 1000;
  else ms = Date.parse(v) - (Date.now() + state.clockSkewMs);
  return isNaN(ms) ? 0 : Math.min(120000, Math.max(0, ms));
}

// streamStatus reads the status stream at path (server-sent events: LF
// lines, "event: status" with the status JSON on its data line, ":"
// comments as heartbeats), handing each answer to onEvent as api() would
// give it ({status: 200, body, …}); onEvent returns false to stop reading.
// onBytes is called whenever anything arrives (the caller's silence
// watchdog). It resolves (never rejects) to {how, retryAfterMs}: how is
// "refused" (no event stream: a 503 past the instance's --max-streams, an
// error, a proxy that cannot stream; retryAfterMs its Retry-After, 0: none),
// "reconnect" (the server ended it with "event: reconnect": its shutdown
// or the stream's lifetime; retryAfterMs its "retry:"), "ended" (the server
// closed it), "stopped" (onEvent said so) or "failed"
// (no answer, broken, or aborted). fetch and the body's reader,
// not EventSource, which cannot send the Authorization header.
export function streamStatus(path, signal, onBytes, onEvent) {
  const headers = { "Accept": "text/event-stream" };
  if (state.jwt) headers["Authorization"] = "Bearer " + state.jwt;
  return window.fetch(sale.api + path, {
    method: "GET",
    headers: headers,
    cache: "no-store",
    credentials: "omit",
    referrerPolicy: "no-referrer",
    signal: signal
  }).then(function (resp) {
    const type = resp.headers.get("Content-Type") || "";
    if (resp.status !== 200 || !resp.body || type.indexOf("text/event-stream") !== 0) {
      if (resp.body) resp.body.cancel().catch(function () {});
      return { how: "refused", retryAfterMs: retryAfterOnly({ headers: resp.headers }) };
    }
    onBytes();
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "", data = [], event = "", retry = -1;
    const pump = function () {
      return reader.read().then(function (chunk) {
        if (chunk.done) return { how: "ended", retryAfterMs: 0 };
        onBytes();
        buf += decoder.decode(chunk.value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i).replace(/\r$/, "");
          buf = buf.slice(i + 1);
          if (line === "") {
            // The server's instruction to reconnect (at its shutdown, or
            // the stream's lifetime): connect again after retry ms.
            if (event === "reconnect") {
              reader.cancel().catch(function () {});
              return { how: "reconnect", retryAfterMs: Math.max(0, retry) };
            }
            event = "";
            if (!data.length) continue;
            let body = null;
            try { body = JSON.parse(data.join("\n")); } catch (e) { body = null; }
            data = [];
            if (body && onEvent({ status: 200, headers: resp.headers, body: body, code: "", message: "" }) === false) {
              reader.cancel().catch(function () {});
              return { how: "stopped", retryAfterMs: 0 };
            }
          } else if (line.indexOf("data:") === 0) {
            data.push(line.slice(5).replace(/^ /, ""));
          } else if (line.indexOf("event:") === 0) {
            event = line.slice(6).replace(/^ /, "");
          } else if (/^retry: ?\d+$/.test(line)) {
            retry = parseInt(line.slice(6), 10);
          } // comments and anything else: nothing to do
        }
        if (buf.length > 65536) { reader.cancel().catch(function () {}); return { how: "failed", retryAfterMs: 0 }; } // no line ends: not an event stream
        return pump();
      });
    };
    return pump();
  }).catch(function () { return { how: "failed", retryAfterMs: 0 }; });
}

let policyAnswer = null;

// fetchPolicy reads the sale's policy (what the page shows of the sale, and
// how the line works) once: a good answer is kept for the page's life, a
// failed one is asked again next time.
export function fetchPolicy() {
  if (!policyAnswer) {
    policyAnswer = api("GET", sale.base + "/policy").then(function (r) {
      if (r.status !== 200 || !r.body) policyAnswer = null;
      return r;
    });
  }
  return policyAnswer;
}
