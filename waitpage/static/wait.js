// The waiting-room page: get a ticket, wait in line (solving the proof-of-work
// challenge in a worker when the sale asks for one), reserve when admitted,
// then pay. The HTTP contract is the README's API section.
//
// Everything the page must survive a reload with is kept in localStorage per
// sale and customer: the ticket (so a reload keeps its place), the
// Idempotency-Key (so a retried or reloaded reservation is the same one), the
// admission token while a reservation is being made, the reservation and the
// order.
//
// The root element #app carries the state in data-state: loading, signin,
// choose_account, waiting, paused, admitted, reserving, reserved, paid,
// sold_out, limit_reached, expired, cancelled, error.
//
// A token in the link (#token=...) is stored only when no usable token is
// stored yet or it is the same one; when it differs from a usable stored
// token, the page asks (choose_account) before replacing it, so that a link
// someone else sent cannot silently make the customer queue and buy as them.
(function () {
  "use strict";

  var app = document.getElementById("app");
  function $(id) { return document.getElementById(id); }

  // ---- storage (falls back to memory when localStorage is blocked) ----
  var memory = {};
  var store = {
    get: function (k) {
      try { return window.localStorage.getItem(k); } catch (e) { return Object.prototype.hasOwnProperty.call(memory, k) ? memory[k] : null; }
    },
    set: function (k, v) {
      try { window.localStorage.setItem(k, v); } catch (e) { memory[k] = v; }
    },
    del: function (k) {
      try { window.localStorage.removeItem(k); } catch (e) { delete memory[k]; }
    },
    getJSON: function (k) {
      var v = store.get(k);
      if (!v) return null;
      try { return JSON.parse(v); } catch (e) { return null; }
    },
    setJSON: function (k, v) { store.set(k, JSON.stringify(v)); }
  };

  // ---- the sale and the customer ----
  var match = window.location.pathname.match(/^\/sales\/([^/]+)\/wait\/?$/);
  var saleId = match ? decodeURIComponent(match[1]) : "";
  var saleBase = "/sales/" + encodeURIComponent(saleId);
  var jwtKey = "flashline.jwt." + saleId;

  var jwt = null;      // the customer's bearer token
  var keys = null;     // localStorage keys for this sale and customer
  var ticket = null;   // the waiting-room ticket token
  var challenge = null; // {nonce, bits} being solved or solved
  var solution = null; // {nonce, value}
  var worker = null;
  var awaitingSolution = false;
  var pollAfterMs = 1000;
  var lastPollAt = 0;
  var timer = 0;       // the one pending step of the flow
  var countdownTimer = 0;
  var clockSkewMs = 0; // server clock minus ours, from the Date header
  var attempts = 0;    // consecutive retries of the current step
  var ticketResets = 0;
  var policyShown = false;
  var linkToken = null; // the link's token while the customer chooses

  function keysFor(sub) {
    var p = "flashline." + saleId + "." + sub + ".";
    return {
      ticket: p + "ticket",
      pow: p + "pow",
      idem: p + "idempotencyKey",
      admission: p + "admission",
      reservation: p + "reservation",
      order: p + "order"
    };
  }

  // ---- states ----
  var sectionOf = { reserving: "admitted" };

  function setState(name, announce) {
    var section = "state-" + (sectionOf[name] || name);
    var panels = app.querySelectorAll("section[id^='state-']");
    for (var i = 0; i < panels.length; i++) panels[i].hidden = panels[i].id !== section;
    var changed = app.dataset.state !== name;
    app.dataset.state = name;
    // The status line is the aria-live region: it changes when the state
    // does (or when told), not on every poll, so a screen reader is not
    // flooded with position updates.
    if (announce && (changed || $("status-text").textContent !== announce)) $("status-text").textContent = announce;
    if (name !== "waiting" && name !== "paused" && name !== "loading") $("challenge").hidden = true;
  }

  function stopAll() {
    window.clearTimeout(timer);
    timer = 0;
    stopCountdown();
    if (worker) { worker.terminate(); worker = null; }
    awaitingSolution = false;
  }

  function schedule(fn, ms) {
    window.clearTimeout(timer);
    timer = window.setTimeout(fn, Math.max(0, ms));
  }

  function backoffMs() {
    var ms = Math.min(8000, 500 * Math.pow(2, attempts));
    attempts++;
    return ms * (0.5 + Math.random() / 2);
  }

  function showError(message) {
    stopAll();
    $("error-text").textContent = message || "Something went wrong.";
    setState("error", "Error: " + (message || "something went wrong"));
  }

  // ---- HTTP ----
  function api(method, path, extraHeaders, body) {
    var headers = { "Accept": "application/json" };
    if (jwt) headers["Authorization"] = "Bearer " + jwt;
    if (extraHeaders) for (var h in extraHeaders) headers[h] = extraHeaders[h];
    return window.fetch(path, {
      method: method,
      headers: headers,
      body: body,
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer"
    }).then(function (resp) {
      var date = resp.headers.get("Date");
      if (date) {
        var skew = Date.parse(date) - Date.now();
        // The Date header has one-second resolution: ignore small skews.
        if (!isNaN(skew)) clockSkewMs = Math.abs(skew) > 2000 ? skew : 0;
      }
      return resp.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        var err = data && data.error ? data.error : {};
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
  // fallback's floor of half a second and never more than two minutes.
  function retryAfterMs(r, fallback) {
    var v = r.headers.get("Retry-After");
    var ms = NaN;
    if (v) {
      if (/^\s*\d+\s*$/.test(v)) ms = parseInt(v, 10) * 1000;
      else ms = Date.parse(v) - (Date.now() + clockSkewMs);
    }
    if (isNaN(ms)) ms = fallback;
    return Math.min(120000, Math.max(500, ms));
  }

  function uuid() {
    if (window.crypto && typeof window.crypto.randomUUID === "function") return window.crypto.randomUUID();
    // crypto.randomUUID needs a secure context; getRandomValues does not.
    var b = new Uint8Array(16);
    window.crypto.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var s = "";
    for (var i = 0; i < 16; i++) {
      s += (b[i] + 0x100).toString(16).slice(1);
      if (i === 3 || i === 5 || i === 7 || i === 9) s += "-";
    }
    return s;
  }

  // claims decodes the JWT payload (not verified: the server does that; the
  // page only needs the customer id to keep its storage apart).
  function claims(token) {
    var parts = token.split(".");
    if (parts.length !== 3) return null;
    try {
      var b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
      while (b64.length % 4) b64 += "=";
      var bin = window.atob(b64);
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      return null;
    }
  }

  function hasSubject(c) { return !!c && typeof c.sub === "string" && c.sub !== ""; }
  function isExpired(c) { return typeof c.exp === "number" && c.exp * 1000 < Date.now(); }

  // usable is whether token is one begin() would go on with.
  function usable(token) {
    var c = token ? claims(token) : null;
    return hasSubject(c) && !isExpired(c);
  }

  // ---- formatting ----
  function formatWait(s) {
    if (typeof s !== "number" || s < 0) return "—";
    if (s < 60) return "under 1 min";
    var m = Math.round(s / 60);
    if (m < 60) return "about " + m + " min";
    return "about " + Math.floor(m / 60) + " h " + (m % 60) + " min";
  }

  function formatPosition(p) {
    return typeof p === "number" ? p.toLocaleString() : "—";
  }

  function two(n) { return (n < 10 ? "0" : "") + n; }

  function formatLeft(ms) {
    var s = Math.max(0, Math.ceil(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return (h ? h + ":" + two(m) : String(m)) + ":" + two(s % 60);
  }

  // ---- sign in ----
  function showSignin(reason) {
    stopAll();
    $("account-line").hidden = true;
    if (reason) $("signin-reason").textContent = reason;
    setState("signin", reason || "Sign in to join the line.");
  }

  $("signin-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var v = $("jwt-input").value.trim().replace(/^Bearer\s+/i, "");
    if (!v) return;
    $("jwt-input").value = "";
    store.set(jwtKey, v);
    begin();
  });

  // ---- a link with another account's token ----
  // tokenNote says what is wrong with a token, or (withExpiry: to tell two
  // tokens of one account apart) until when it is valid.
  function tokenNote(c, withExpiry) {
    if (!hasSubject(c)) return "This token cannot be read.";
    if (typeof c.exp !== "number") return "";
    if (isExpired(c)) return "This token has expired.";
    return withExpiry ? "Valid until " + new Date(c.exp * 1000).toLocaleString() + "." : "";
  }

  // askAccount shows the choice between the stored token (usable) and the
  // link's (whatever it is); nothing is stored until the customer chooses.
  function askAccount(stored, offered) {
    stopAll();
    linkToken = offered;
    var cur = claims(stored), off = claims(offered);
    var same = hasSubject(off) && off.sub === cur.sub;
    $("account-current").textContent = cur.sub;
    $("account-current-note").textContent = tokenNote(cur, same);
    $("account-link").textContent = hasSubject(off) ? off.sub : "(unknown account)";
    $("account-link-note").textContent = tokenNote(off, same);
    $("account-text").textContent = same
      ? "The link you opened carries another access token for the same account."
      : "The link you opened carries the access token of a different account. If someone sent you this link, the account may be theirs: with it, you would wait in line and buy as them.";
    setState("choose_account", "This link carries a different access token. Choose which account to use.");
    $("account-title").focus();
  }

  $("account-keep").addEventListener("click", function () {
    linkToken = null;
    begin();
  });
  $("account-switch").addEventListener("click", function () {
    if (linkToken) store.set(jwtKey, linkToken);
    linkToken = null;
    begin();
  });

  // ---- policy ----
  function showPolicy(text) {
    if (!text) return;
    $("policy-text").textContent = text;
    $("policy-box").hidden = false;
    policyShown = true;
  }

  function loadPolicy() {
    api("GET", saleBase + "/policy").then(function (r) {
      if (r.status === 200 && r.body) showPolicy(r.body.description || r.body.policy);
    });
  }

  // ---- the flow ----
  function begin() {
    stopAll();
    attempts = 0;
    ticketResets = 0;
    jwt = store.get(jwtKey);
    if (!policyShown) loadPolicy();
    if (!jwt) return showSignin();
    var c = claims(jwt);
    if (!hasSubject(c)) {
      store.del(jwtKey);
      jwt = null;
      return showSignin("That token could not be read. Paste the access token your store gave you.");
    }
    if (isExpired(c)) {
      store.del(jwtKey);
      jwt = null;
      return showSignin("Your access token has expired. Get a new one from the store.");
    }
    $("account-id").textContent = c.sub;
    $("account-line").hidden = false;
    keys = keysFor(c.sub);
    ticket = store.get(keys.ticket);
    var pow = store.getJSON(keys.pow);
    solution = pow && pow.nonce && pow.solution ? { nonce: pow.nonce, value: pow.solution } : null;

    var order = store.getJSON(keys.order);
    if (order && order.orderId) return showPaid(order);
    var res = store.getJSON(keys.reservation);
    if (res && res.reservationId) return resumeReservation(res);
    var adm = store.getJSON(keys.admission);
    if (adm && adm.token && adm.expiresAt > Date.now()) return reserve();
    setState("loading", "Getting your place in line…");
    getTicket();
  }

  function getTicket() {
    var url = saleBase + "/ticket" + (ticket ? "?token=" + encodeURIComponent(ticket) : "");
    var sentTicket = !!ticket;
    api("GET", url).then(function (r) {
      if (r.status === 200 && r.body && r.body.token) {
        attempts = 0;
        ticket = r.body.token;
        store.set(keys.ticket, ticket);
        if (typeof r.body.pollAfterMs === "number" && r.body.pollAfterMs > 0) pollAfterMs = r.body.pollAfterMs;
        if (!policyShown && typeof r.body.policy === "string") showPolicy(r.body.policy);
        showWaiting(r.body);
        if (r.body.challenge) ensureSolving(r.body.challenge);
        lastPollAt = Date.now();
        schedule(poll, pollAfterMs);
        return;
      }
      if (r.network) return schedule(getTicket, backoffMs());
      if (r.status === 401) return rejectJWT();
      if (r.status === 429 || r.status === 503) {
        if (r.code === "sale_paused_fail_closed") showPaused();
        return schedule(getTicket, retryAfterMs(r, backoffMs()));
      }
      if (sentTicket && renewTicket(r)) return;
      handleError(r, getTicket);
    });
  }

  function dropTicket() {
    ticket = null;
    store.del(keys.ticket);
  }

  // renewTicket handles a 4xx that means the server will not take our ticket
  // (another sale or customer, tampered, expired): it drops the ticket and asks
  // for a new one, a few times at most. False when r is some other answer.
  function renewTicket(r) {
    if (r.status < 400 || r.status >= 500 || r.code === "not_found" || r.code === "sold_out" ||
        r.code === "sale_not_open" || ticketResets >= 3) return false;
    ticketResets++;
    dropTicket();
    getTicket();
    return true;
  }

  function poll() {
    if (!ticket) return getTicket();
    var url = saleBase + "/status?token=" + encodeURIComponent(ticket);
    var sentSolution = !!(solution && challenge && solution.nonce === challenge.nonce) ||
      !!(solution && !challenge);
    if (sentSolution) url += "&solution=" + encodeURIComponent(solution.value);
    lastPollAt = Date.now();
    api("GET", url).then(function (r) {
      if (r.status === 200 && r.body) {
        attempts = 0;
        ticketResets = 0;
        var b = r.body;
        switch (b.state) {
          case "waiting":
            if (typeof b.pollAfterMs === "number" && b.pollAfterMs > 0) pollAfterMs = b.pollAfterMs;
            if (b.paused) showPaused(b.position);
            else showWaiting(b);
            return schedule(poll, pollAfterMs);
          case "challenge_required":
            if (app.dataset.state === "loading") showWaiting({});
            var ch = b.challenge || {};
            if (sentSolution && solution.nonce === ch.nonce) {
              // The server did not take our answer for this very challenge:
              // solve nothing new, just ask again at the usual pace.
              return schedule(poll, pollAfterMs);
            }
            ensureSolving(ch);
            if (solution && solution.nonce === ch.nonce) return schedule(poll, nextPollIn());
            awaitingSolution = true; // the worker's answer schedules the poll
            return;
          case "admitted":
            store.setJSON(keys.admission, {
              token: b.admissionToken,
              expiresAt: Date.now() + (typeof b.expiresIn === "number" ? b.expiresIn : 120) * 1000
            });
            if (worker) { worker.terminate(); worker = null; }
            return reserve();
          case "sold_out":
            return showSoldOut();
          default:
            return schedule(poll, pollAfterMs);
        }
      }
      if (r.network) return schedule(poll, Math.max(pollAfterMs, backoffMs()));
      if (r.status === 401) return rejectJWT();
      if (r.status === 429 || r.status === 503) {
        if (r.code === "sale_paused_fail_closed") showPaused();
        return schedule(poll, retryAfterMs(r, Math.max(pollAfterMs, backoffMs())));
      }
      if (renewTicket(r)) return;
      handleError(r, poll);
    });
  }

  function nextPollIn() {
    return lastPollAt + pollAfterMs - Date.now();
  }

  function showWaiting(b) {
    if (typeof b.position === "number") $("position").textContent = formatPosition(b.position);
    if ("estimatedWaitSeconds" in b) $("eta").textContent = formatWait(b.estimatedWaitSeconds);
    setState("waiting", "You are in line. Keep this page open.");
  }

  function showPaused(position) {
    if (typeof position === "number") {
      $("paused-position").textContent = formatPosition(position);
      $("paused-position-wrap").hidden = false;
    }
    setState("paused", "The sale is paused. You keep your place.");
  }

  function showSoldOut() {
    stopAll();
    store.del(keys.admission);
    setState("sold_out", "Sold out.");
  }

  function rejectJWT() {
    store.del(jwtKey);
    jwt = null;
    showSignin("The store did not accept your access token. Paste a new one.");
  }

  // handleError deals with the answers every step shares; retry is the step
  // to run again when the answer says "later".
  function handleError(r, retry) {
    switch (r.code) {
      case "sold_out":
        return showSoldOut();
      case "sale_not_open":
        showPaused();
        return schedule(retry, retryAfterMs(r, 10000));
      case "not_found":
        return showError("This sale does not exist.");
      default:
        return showError(r.message);
    }
  }

  // ---- proof of work ----
  function ensureSolving(ch) {
    if (!ch || typeof ch.nonce !== "string" || typeof ch.bits !== "number") return;
    if (challenge && challenge.nonce === ch.nonce && (worker || (solution && solution.nonce === ch.nonce))) return;
    challenge = { nonce: ch.nonce, bits: ch.bits };
    if (solution && solution.nonce === ch.nonce) return;
    solution = null;
    if (worker) worker.terminate();
    $("challenge").hidden = false;
    $("challenge-progress").textContent = "";
    try {
      worker = new Worker(app.dataset.worker);
    } catch (e) {
      return showError("This browser cannot run the check the sale needs (Web Workers are off).");
    }
    worker.onmessage = function (ev) {
      var d = ev.data || {};
      if (!challenge || d.nonce !== challenge.nonce) return;
      if (d.type === "progress") {
        $("challenge-progress").textContent = d.tries.toLocaleString() + " tries";
      } else if (d.type === "solved") {
        solution = { nonce: d.nonce, value: d.solution };
        store.setJSON(keys.pow, { nonce: d.nonce, solution: d.solution });
        worker.terminate();
        worker = null;
        $("challenge-progress").textContent = "done";
        $("challenge").hidden = true;
        if (awaitingSolution) {
          awaitingSolution = false;
          schedule(poll, nextPollIn());
        }
      } else if (d.type === "error") {
        showError("The browser check failed: " + d.message);
      }
    };
    worker.onerror = function (ev) {
      showError("The browser check failed: " + (ev.message || "worker error"));
    };
    worker.postMessage({ nonce: challenge.nonce, bits: challenge.bits });
  }

  // ---- reserve ----
  var idemResets = 0;

  function reserve() {
    var adm = store.getJSON(keys.admission);
    if (!adm || !adm.token) return getTicket();
    setState("reserving", "It's your turn. Reserving your item…");
    $("admitted-text").textContent = "Reserving your item…";
    var key = store.get(keys.idem);
    if (!key) {
      key = uuid();
      store.set(keys.idem, key);
    }
    api("POST", saleBase + "/reservations", {
      "Idempotency-Key": key,
      "X-Admission-Token": adm.token,
      "Content-Type": "application/json"
    }, JSON.stringify({ quantity: 1 })).then(function (r) {
      if (r.status >= 200 && r.status < 300 && r.body && r.body.reservationId) {
        attempts = 0;
        store.setJSON(keys.reservation, r.body);
        store.del(keys.admission);
        return showReserved(r.body);
      }
      var expired = adm.expiresAt <= Date.now();
      if (r.network || r.status === 503 || r.status === 429 || r.code === "request_in_progress") {
        if (r.code === "sale_paused_fail_closed") $("admitted-text").textContent = "The sale is paused for a moment; your turn is kept while it lasts…";
        else $("admitted-text").textContent = "Busy — trying again…";
        // Same key on every retry: if an earlier try did reserve, the
        // answer is that reservation, replayed.
        return schedule(reserve, r.network ? backoffMs() : retryAfterMs(r, backoffMs()));
      }
      switch (r.code) {
        case "sold_out":
          store.del(keys.idem);
          return showSoldOut();
        case "limit_reached":
          stopAll();
          store.del(keys.admission);
          return setState("limit_reached", "You have reached the limit for this sale.");
        case "sale_not_open":
          if (expired) { store.del(keys.admission); return getTicket(); }
          $("admitted-text").textContent = "The sale is paused; your turn is kept while it lasts…";
          return schedule(reserve, retryAfterMs(r, 3000));
        case "admission_invalid":
        case "admission_required":
          // Used, expired or not ours: back to the line with our ticket.
          store.del(keys.admission);
          setState("loading", "Your turn ran out. Getting back in line…");
          return getTicket();
        case "idempotency_key_reused":
          if (idemResets++ < 1) { store.del(keys.idem); return reserve(); }
          break;
      }
      if (r.status === 401) return rejectJWT();
      showError(r.message);
    });
  }

  // ---- reserved, pay ----
  function resumeReservation(res) {
    showReserved(res);
    api("GET", "/reservations/" + encodeURIComponent(res.reservationId)).then(function (r) {
      if (r.status === 200 && r.body) {
        switch (r.body.state) {
          case "pending":
            if (app.dataset.state !== "reserved") return; // expired here meanwhile
            var merged = {
              reservationId: res.reservationId,
              saleId: r.body.saleId || res.saleId,
              quantity: r.body.quantity || res.quantity,
              state: "pending",
              expiresAt: r.body.expiresAt || res.expiresAt
            };
            store.setJSON(keys.reservation, merged);
            return showReserved(merged);
          case "confirmed":
            var order = { orderId: r.body.orderId || "", reservationId: res.reservationId };
            store.setJSON(keys.order, order);
            return showPaid(order);
          case "expired":
            return showExpired();
          case "cancelled":
            return showCancelled();
        }
      } else if (r.status === 404) {
        store.del(keys.reservation);
        store.del(keys.idem);
        begin();
      } else if (r.status === 401) {
        rejectJWT();
      }
      // Otherwise keep what we stored; paying will tell.
    });
  }

  function stopCountdown() {
    window.clearInterval(countdownTimer);
    countdownTimer = 0;
  }

  function showReserved(res) {
    stopAll();
    $("reservation-id").textContent = res.reservationId;
    var expires = Date.parse(res.expiresAt);
    var el = $("expires-at");
    el.dateTime = res.expiresAt;
    el.textContent = isNaN(expires) ? res.expiresAt : new Date(expires - clockSkewMs).toLocaleTimeString();
    $("pay").disabled = false;
    $("pay").textContent = "Pay";
    $("pay").removeAttribute("aria-busy");
    $("pay-error").hidden = true;
    setState("reserved", "Reserved for you until " + el.textContent + ". Pay before the time runs out.");
    if (isNaN(expires)) return;
    var tick = function () {
      var left = expires - (Date.now() + clockSkewMs);
      $("countdown").textContent = formatLeft(left);
      if (left <= 0) showExpired(true);
    };
    tick();
    countdownTimer = window.setInterval(tick, 250);
  }

  function currentReservation() {
    return store.getJSON(keys.reservation);
  }

  function pay() {
    var res = currentReservation();
    if (!res) return;
    var btn = $("pay");
    btn.disabled = true;
    btn.setAttribute("aria-busy", "true");
    btn.textContent = "Paying…";
    $("pay-error").hidden = true;
    api("POST", "/reservations/" + encodeURIComponent(res.reservationId) + "/confirm").then(function (r) {
      if (r.status === 200 && r.body && r.body.orderId) {
        attempts = 0;
        var order = { orderId: r.body.orderId, reservationId: r.body.reservationId || res.reservationId };
        store.setJSON(keys.order, order);
        return showPaid(order);
      }
      if (app.dataset.state !== "reserved") return; // expired meanwhile
      if (r.network || r.status === 503 || r.status === 429) {
        // Confirming twice gives the same order, so retrying is safe.
        btn.textContent = "Paying… (retrying)";
        return schedule(pay, r.network ? backoffMs() : retryAfterMs(r, backoffMs()));
      }
      if (r.code === "reservation_expired") return showExpired();
      if (r.code === "reservation_cancelled") return showCancelled();
      if (r.status === 401) return rejectJWT();
      btn.disabled = false;
      btn.removeAttribute("aria-busy");
      btn.textContent = "Pay";
      $("pay-error").textContent = r.message;
      $("pay-error").hidden = false;
    });
  }

  function forgetAttempt() {
    store.del(keys.reservation);
    store.del(keys.admission);
    store.del(keys.idem); // a new attempt is a new request
  }

  function showExpired(checkServer) {
    var res = currentReservation();
    stopAll();
    forgetAttempt();
    setState("expired", "Your reservation expired.");
    if (checkServer && res) {
      // Paid from another tab just in time? The server knows.
      api("GET", "/reservations/" + encodeURIComponent(res.reservationId)).then(function (r) {
        if (r.status === 200 && r.body && r.body.state === "confirmed") {
          var order = { orderId: r.body.orderId || "", reservationId: res.reservationId };
          store.setJSON(keys.order, order);
          showPaid(order);
        }
      });
    }
  }

  function showCancelled() {
    stopAll();
    forgetAttempt();
    setState("cancelled", "Your reservation was cancelled.");
  }

  function showPaid(order) {
    stopAll();
    store.del(keys.admission);
    $("order-id").textContent = order.orderId;
    setState("paid", "Paid — order " + order.orderId + ".");
  }

  $("pay").addEventListener("click", pay);
  $("rejoin").addEventListener("click", function () {
    dropTicket();
    store.del(keys.pow);
    forgetAttempt();
    begin();
  });
  $("retry").addEventListener("click", begin);

  // ---- start ----
  if (!match) {
    showError("This is not a sale's waiting-room address.");
    return;
  }
  $("sale-id").textContent = saleId;
  var frag = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  var fromURL = frag.get("token");
  if (fromURL) {
    // Take the token out of the address bar (and so out of history and
    // anything the customer copies from it), whichever token is kept.
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    var stored = store.get(jwtKey);
    if (stored && stored !== fromURL && usable(stored)) return askAccount(stored, fromURL);
    store.set(jwtKey, fromURL);
  }
  begin();
})();
