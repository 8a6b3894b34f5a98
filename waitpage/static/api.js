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
