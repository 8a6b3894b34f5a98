// After admission: reserve with the admission token and an Idempotency-Key
// kept across reloads (a retried or reloaded reservation is the same one),
// show the hold's countdown (it follows the server: the store may extend
// holds when payment is slow), pay; and the ends: paid, expired, cancelled,
// voided, limit reached.
//
// In a sale with variants the admitted shopper first chooses one
// (variants.js): the reservation names it, and a variant refused as sold
// out (variant_sold_out) is greyed and another may be chosen with the same
// admission, which is good for one reservation of any variant. The
// reservation and the order show the title of the one chosen.
//
// Paying depends on the sale. Where customers confirm ("confirmation":
// "customer"), Pay confirms the hold and the order exists at once. Where the
// payment confirms it (the default), the server answers payment_required:
// the page says it is waiting for the payment and asks how the reservation
// stands until the payment provider's event has confirmed it (or the hold
// ended).
//
// purchase.js and line.js import each other: see line.js.

import { store } from "./storage.js";
import { sale, state, schedule, stopAll, backoffMs } from "./state.js";
import { api, retryAfterMs } from "./api.js";
import { app, $, setState, showError, formatLeft } from "./ui.js";
import { rejectJWT } from "./account.js";
import { getTicket, showSoldOut } from "./line.js";
import { notify } from "./host.js";
import { t, dateTime } from "./i18n.js";
import { showChoice, hideChoice, markSoldOut, titleOf } from "./variants.js";

// reserve makes the reservation with the admission token kept, or goes back
// to the line when there is none. In a sale with variants it first asks
// which one, unless one was chosen for this admission already (a reload
// resends the same request).
export function reserve() {
  const adm = store.getJSON(state.keys.admission);
  if (!adm || !adm.token) return getTicket();
  const variants = Array.isArray(adm.variants) ? adm.variants : [];
  if (variants.length && !adm.variant) return choose(adm, "");
  hideChoice();
  setState("reserving", t("admitted.status"));
  $("admitted-text").textContent = t("admitted.reserving");
  let key = store.get(state.keys.idem);
  if (!key) {
    key = uuid();
    store.set(state.keys.idem, key);
  }
  api("POST", sale.base + "/reservations", {
    "Idempotency-Key": key,
    "X-Admission-Token": adm.token,
    "Content-Type": "application/json"
  }, JSON.stringify(adm.variant ? { variant: adm.variant, quantity: 1 } : { quantity: 1 })).then(function (r) {
    if (r.status >= 200 && r.status < 300 && r.body && r.body.reservationId) {
      state.attempts = 0;
      if (r.body.variant) r.body.variantTitle = titleOf(variants, r.body.variant);
      store.setJSON(state.keys.reservation, r.body);
      store.del(state.keys.admission);
      return showReserved(r.body);
    }
    const expired = adm.expiresAt <= Date.now();
    if (r.network || r.status === 503 || r.status === 429 || r.code === "request_in_progress") {
      $("admitted-text").textContent = t(r.code === "sale_paused_fail_closed" ? "admitted.pausedFailClosed" : "admitted.busy");
      // Same key on every retry: if an earlier try did reserve, the
      // answer is that reservation, replayed.
      return schedule(reserve, r.network ? backoffMs() : retryAfterMs(r, backoffMs()));
    }
    switch (r.code) {
      case "sold_out":
        store.del(state.keys.idem);
        return showSoldOut();
      case "variant_sold_out": {
        // Nothing was reserved: choosing another is a new request (a new
        // Idempotency-Key), with the same admission.
        store.del(state.keys.idem);
        const gone = adm.variant;
        delete adm.variant;
        if (!markSoldOut(variants, gone)) return showSoldOut();
        store.setJSON(state.keys.admission, adm);
        return choose(adm, t("variants.gone", { title: titleOf(variants, gone) }));
      }
      case "limit_reached": {
        stopAll();
        store.del(state.keys.admission);
        // The customer's own hold (made in a tab since closed, or on
        // another device) or order holds the limit: the answer carries it,
        // and the page shows it with its Pay step, as if made here.
        const held = r.body && r.body.reservation;
        if (held && held.variant) held.variantTitle = titleOf(variants, held.variant);
        if (held && held.reservationId && held.state === "pending") {
          store.del(state.keys.idem);
          store.setJSON(state.keys.reservation, held);
          return resumeReservation(held, getTicket);
        }
        if (held && held.reservationId && held.state === "confirmed") {
          return paid({ orderId: held.orderId || "", reservationId: held.reservationId, variant: held.variant, variantTitle: held.variantTitle });
        }
        return setState("limit_reached", t("limit.status"));
      }
      case "sale_not_open":
        if (expired) { store.del(state.keys.admission); return getTicket(); }
        $("admitted-text").textContent = t("admitted.paused");
        return schedule(reserve, retryAfterMs(r, 3000));
      case "admission_invalid":
      case "admission_required":
        // Used, expired or not ours: back to the line with our ticket.
        store.del(state.keys.admission);
        setState("loading", t("admitted.ranOut"));
        return getTicket();
      case "idempotency_key_reused":
        if (state.idemResets++ < 1) { store.del(state.keys.idem); return reserve(); }
        break;
    }
    if (r.status === 401) return rejectJWT();
    showError(r.message);
  });
}

// choose shows the sale's variants of admission adm (note: why the shopper
// chooses again, "" none); the one chosen is kept with the admission, then
// reserved.
function choose(adm, note) {
  stopAll();
  // The panel first: the choice puts the focus in it, which a hidden
  // element cannot take.
  setState("choosing", t("variants.status"));
  showChoice(adm.variants, note, function (sku) {
    const now = store.getJSON(state.keys.admission);
    if (!now || !now.token) return getTicket();
    now.variant = sku;
    store.setJSON(state.keys.admission, now);
    reserve();
  });
}

// resumeReservation shows the kept reservation at once, then asks the
// server how it stands; onGone runs when the server does not know it.
export function resumeReservation(res, onGone) {
  showReserved(res);
  api("GET", "/reservations/" + encodeURIComponent(res.reservationId)).then(function (r) {
    if (r.status === 200 && r.body) {
      switch (r.body.state) {
        case "pending": {
          // Expired here meanwhile, or Pay was pressed: a confirm in flight
          // decides, and one answered set awaitingPayment on the kept hold.
          if (!holding() || paying) return;
          return showReserved(merge(kept(res), r.body));
        }
        case "confirmed":
          return paid({ orderId: r.body.orderId || "", reservationId: res.reservationId });
        case "expired":
          return showExpired();
        case "cancelled":
          return showCancelled();
        case "voided":
          return showVoided();
      }
    } else if (r.status === 404) {
      store.del(state.keys.reservation);
      store.del(state.keys.idem);
      onGone();
    } else if (r.status === 401) {
      rejectJWT();
    }
    // Otherwise keep what we stored; paying will tell.
  });
}

// How often the page asks how a hold stands: while it waits for the
// customer (the store may have extended it), and while it waits for the
// payment.
const REFRESH_RESERVED_MS = 15000;
const REFRESH_PAYMENT_MS = 2000;

// paying: a confirm is in flight.
let paying = false;

// kept is the hold as the page keeps it now, else res (an answer that arrives later
// than a confirm's must not undo what the confirm's answer recorded).
function kept(res) {
  return store.getJSON(state.keys.reservation) || res;
}

// holding: the page shows a hold (waiting for the customer or the payment).
function holding() {
  return app.dataset.state === "reserved" || app.dataset.state === "awaiting_payment";
}

// merge is the kept reservation with what the server says of it now.
function merge(res, body) {
  const merged = {
    reservationId: res.reservationId,
    saleId: body.saleId || res.saleId,
    quantity: body.quantity || res.quantity,
    state: "pending",
    expiresAt: body.expiresAt || res.expiresAt,
    awaitingPayment: !!res.awaitingPayment
  };
  const variant = res.variant || body.variant;
  if (variant) {
    merged.variant = variant;
    merged.variantTitle = res.variantTitle || variant;
  }
  store.setJSON(state.keys.reservation, merged);
  return merged;
}

// showReserved shows the reservation and counts down to its expiry, by the
// server's clock; a hold whose payment was started shows that it waits for
// the payment.
function showReserved(res) {
  stopAll();
  $("reservation-id").textContent = res.reservationId;
  showVariant("reserved-variant", res);
  const expires = Date.parse(res.expiresAt);
  const el = $("expires-at");
  el.dateTime = res.expiresAt;
  el.textContent = isNaN(expires) ? res.expiresAt : dateTime(expires - state.clockSkewMs, { timeStyle: "medium" });
  $("pay-error").hidden = true;
  const btn = $("pay");
  if (res.awaitingPayment) {
    btn.disabled = true;
    btn.setAttribute("aria-busy", "true");
    btn.textContent = t("reserved.awaiting");
    $("pay-waiting").hidden = false;
    setState("awaiting_payment", t("reserved.awaitingStatus", { time: el.textContent }));
  } else {
    btn.disabled = false;
    btn.textContent = t("reserved.pay");
    btn.removeAttribute("aria-busy");
    $("pay-waiting").hidden = true;
    setState("reserved", t("reserved.status", { time: el.textContent }));
  }
  schedule(refresh, res.awaitingPayment ? REFRESH_PAYMENT_MS : REFRESH_RESERVED_MS);
  notify("onReserved", res);
  if (isNaN(expires)) return;
  const tick = function () {
    const left = expires - (Date.now() + state.clockSkewMs);
    $("countdown").textContent = formatLeft(Math.max(0, left));
    if (left <= 0) timeUp();
  };
  tick();
  state.countdownTimer = window.setInterval(tick, 250);
}

// refresh asks how the kept hold stands: a later expiresAt (the store
// extended it) moves the countdown; an order, an expiry or a cancellation
// ends the wait.
function refresh() {
  const res = store.getJSON(state.keys.reservation);
  if (!res || !holding() || paying) return;
  api("GET", "/reservations/" + encodeURIComponent(res.reservationId)).then(function (r) {
    if (!holding() || paying) return; // a confirm sent meanwhile decides
    if (r.status === 200 && r.body) {
      state.attempts = 0;
      switch (r.body.state) {
        case "pending": {
          // The hold as kept now: a confirm answered since this was sent
          // may have set awaitingPayment.
          const now = kept(res);
          const merged = merge(now, r.body);
          if (merged.expiresAt !== now.expiresAt) return showReserved(merged);
          return schedule(refresh, now.awaitingPayment ? REFRESH_PAYMENT_MS : REFRESH_RESERVED_MS);
        }
        case "confirmed":
          return paid({ orderId: r.body.orderId || "", reservationId: res.reservationId });
        case "expired":
          return showExpired();
        case "cancelled":
          return showCancelled();
        case "voided":
          return showVoided();
      }
    }
    if (r.status === 401) return rejectJWT();
    // Busy, offline, or not known (yet): ask again later.
    schedule(refresh, Math.max(backoffMs(), res.awaitingPayment ? REFRESH_PAYMENT_MS : REFRESH_RESERVED_MS));
  });
}

// timeUp: the countdown reached zero. The server decides: the store may
// have extended the hold, or the payment may have come in just in time.
function timeUp() {
  const res = store.getJSON(state.keys.reservation);
  window.clearInterval(state.countdownTimer);
  state.countdownTimer = 0;
  if (!res) return showExpired();
  api("GET", "/reservations/" + encodeURIComponent(res.reservationId)).then(function (r) {
    if (!holding()) return;
    if (r.status === 200 && r.body) {
      if (r.body.state === "confirmed") return paid({ orderId: r.body.orderId || "", reservationId: res.reservationId });
      if (r.body.state === "pending" && Date.parse(r.body.expiresAt) > Date.now() + state.clockSkewMs) {
        return showReserved(merge(kept(res), r.body));
      }
      if (r.body.state === "voided") return showVoided();
      if (r.body.state === "cancelled") return showCancelled();
    }
    showExpired();
  });
}

// pay confirms the kept reservation. Confirming twice gives the same order,
// so a busy or lost answer is retried. In a sale confirmed by payment the
// answer is payment_required: the page then waits for the payment.
export function pay() {
  const res = store.getJSON(state.keys.reservation);
  if (!res) return;
  // On a shop's page, Pay hands the hold to the shop's checkout first
  // (embed.js: an event, and the redirect the shop named); false: the shop
  // took over, and the page stays as it is.
  if (notify("onCheckout", res) === false) return;
  // No refresh while the confirm is in flight: its answer decides what the
  // page shows next (a refresh that moved the countdown would put the Pay
  // button back while the confirm is on its way).
  window.clearTimeout(state.timer);
  paying = true;
  const btn = $("pay");
  btn.disabled = true;
  btn.setAttribute("aria-busy", "true");
  btn.textContent = t("reserved.paying");
  $("pay-error").hidden = true;
  api("POST", "/reservations/" + encodeURIComponent(res.reservationId) + "/confirm").then(function (r) {
    paying = false;
    if (r.status === 200 && r.body && r.body.orderId) {
      state.attempts = 0;
      return paid({ orderId: r.body.orderId, reservationId: r.body.reservationId || res.reservationId });
    }
    if (!holding()) return; // expired meanwhile
    if (r.network || r.status === 503 || r.status === 429) {
      btn.textContent = t("reserved.payingRetry");
      return schedule(pay, r.network ? backoffMs() : retryAfterMs(r, backoffMs()));
    }
    if (r.code === "payment_required") {
      state.attempts = 0;
      res.awaitingPayment = true;
      store.setJSON(state.keys.reservation, res);
      return showReserved(res);
    }
    if (r.code === "reservation_expired") return showExpired();
    if (r.code === "reservation_cancelled") return showCancelled();
    if (r.code === "reservation_voided") return showVoided();
    if (r.status === 401) return rejectJWT();
    btn.disabled = false;
    btn.removeAttribute("aria-busy");
    btn.textContent = t("reserved.pay");
    $("pay-error").textContent = r.message;
    $("pay-error").hidden = false;
    schedule(refresh, REFRESH_RESERVED_MS);
  });
}

// forgetAttempt drops the reservation attempt: a new one is a new request.
export function forgetAttempt() {
  store.del(state.keys.reservation);
  store.del(state.keys.admission);
  store.del(state.keys.idem);
}

function showExpired() {
  stopAll();
  forgetAttempt();
  setState("expired", t("expired.status"));
}

function showCancelled() {
  stopAll();
  forgetAttempt();
  setState("cancelled", t("cancelled.status"));
}

// showVoided: the store voided the order after it was made (a refund, or an
// order it will not honour).
function showVoided() {
  stopAll();
  forgetAttempt();
  store.del(state.keys.order);
  setState("voided", t("voided.status"));
}

// showVariant shows the title of the variant of rec (a reservation or an
// order) in element id, or hides it for a sale without variants.
function showVariant(id, rec) {
  const title = rec.variantTitle || rec.variant || "";
  $(id + "-title").textContent = title;
  $(id).hidden = title === "";
}

// paid keeps the order and shows it, with the variant of the hold it
// confirmed.
function paid(order) {
  const res = store.getJSON(state.keys.reservation);
  if (!order.variant && res && res.reservationId === order.reservationId && res.variant) {
    order.variant = res.variant;
    order.variantTitle = res.variantTitle || res.variant;
  }
  store.setJSON(state.keys.order, order);
  showPaid(order);
}

export function showPaid(order) {
  stopAll();
  store.del(state.keys.admission);
  $("order-id").textContent = order.orderId;
  showVariant("paid-variant", order);
  setState("paid", t("paid.status", { id: order.orderId }));
  notify("onOrder", order);
}

// uuid is a random (version 4) UUID for the Idempotency-Key.
function uuid() {
  if (window.crypto && typeof window.crypto.randomUUID === "function") return window.crypto.randomUUID();
  // crypto.randomUUID needs a secure context; getRandomValues does not.
  const b = new Uint8Array(16);
  window.crypto.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  let s = "";
  for (let i = 0; i < 16; i++) {
    s += (b[i] + 0x100).toString(16).slice(1);
    if (i === 3 || i === 5 || i === 7 || i === 9) s += "-";
  }
  return s;
}
