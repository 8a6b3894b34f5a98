// The page's only network requests: the API, on this origin, with the
// customer's token, never cached, no cookies, no referrer. The HTTP contract
// is the README's API section.

import { state } from "./state.js";

// api resolves (never rejects) to {status, headers, body, code, message},
// and to {status: 0, network: true, …} when no answer came. It keeps
// state.clockSkewMs from the answer's Date header.
export function api(method, path, extraHeaders, body) {
  const headers = { "Accept": "application/json" };
  if (state.jwt) headers["Authorization"] = "Bearer " + state.jwt;
  if (extraHeaders) for (const h in extraHeaders) headers[h] = extraHeaders[h];
  return window.fetch(path, {
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
