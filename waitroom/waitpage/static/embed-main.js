// The flow on a shop's page: embed.js (the script tag the shop includes)
// made the elements in a shadow root and loads this module from Flashline's
// origin; this sets where the flow runs (host.js) and then loads the flow,
// the same modules the waiting-room page runs (flow.js and what it
// imports), so that they read the sale, the API and the elements from here.
//
// What the shop's page gets, on the element that holds the button (its
// events bubble out of the shadow root):
//
//   flashline:reserved  {reservationId, saleId, quantity, expiresAt}  a hold is shown
//   flashline:checkout  the same, when the shopper presses Pay; cancelable:
//                       preventDefault() keeps the page as it is (the shop's
//                       checkout opens in place); otherwise, with
//                       data-checkout-url, the browser goes there
//                       ({reservationId} and {saleId} filled in), and without
//                       it the button waits for the payment's webhook
//   flashline:order     {orderId, reservationId}  the payment confirmed the hold
//
// In a sale with variants each also carries variant: the SKU the shopper
// chose (the button shows the choice once admitted).
//
// The customer's token comes from the shop: data-token names a function of
// the shop's page (a global) that returns it, or a promise of it.

import { host } from "./host.js";

const cfg = window.__flashlineEmbed;

function emit(name, detail, cancelable) {
  const ev = new CustomEvent(name, { detail: detail, bubbles: true, composed: true, cancelable: !!cancelable });
  cfg.mount.dispatchEvent(ev);
  return ev;
}

// holdOf is the hold as the shop's page gets it; in a sale with variants
// with the SKU of the one chosen (variant).
function holdOf(res) {
  const hold = { reservationId: res.reservationId, saleId: res.saleId || cfg.sale, quantity: res.quantity, expiresAt: res.expiresAt };
  if (res.variant) hold.variant = res.variant;
  return hold;
}

// checkoutURL fills the shop's template with the hold's ids (URL-escaped).
function checkoutURL(template, hold) {
  return template.split("{reservationId}").join(encodeURIComponent(hold.reservationId))
    .split("{saleId}").join(encodeURIComponent(hold.saleId));
}

let announced = "";

if (cfg && cfg.root && !cfg.started) {
  cfg.started = true;
  host.embedded = true;
  host.root = cfg.root;
  host.saleId = cfg.sale;
  host.api = cfg.api;
  host.lang = cfg.lang;
  host.onReserved = function (res) {
    if (announced === res.reservationId) return; // once per hold, not per refresh
    announced = res.reservationId;
    cfg.mount.dataset.reservationId = res.reservationId;
    emit("flashline:reserved", holdOf(res), false);
  };
  host.onCheckout = function (res) {
    const hold = holdOf(res);
    const ev = emit("flashline:checkout", hold, true);
    if (ev.defaultPrevented) return false;
    if (cfg.checkoutURL) {
      window.location.assign(checkoutURL(cfg.checkoutURL, hold));
      return false;
    }
    return undefined; // the flow's own: wait for the payment
  };
  host.onOrder = function (order) {
    cfg.mount.dataset.orderId = order.orderId;
    const detail = { orderId: order.orderId, reservationId: order.reservationId };
    if (order.variant) detail.variant = order.variant;
    emit("flashline:order", detail, false);
  };
  const [{ store }, { sale }, { $, showError }, { begin }, { load, t }] = await Promise.all([
    import("./storage.js"), import("./state.js"), import("./ui.js"), import("./flow.js"), import("./i18n.js")
  ]);
  await load(); // the shopper's language, before anything is shown
  $("sale-id").textContent = sale.id;
  if (!sale.known) {
    showError(t("error.noSale"));
  } else {
    const getToken = cfg.tokenCallback ? window[cfg.tokenCallback] : null;
    let token = "";
    try {
      token = typeof getToken === "function" ? await getToken() : "";
    } catch (e) {
      token = "";
    }
    if (typeof token === "string" && token !== "") store.set(sale.jwtKey, token.replace(/^Bearer\s+/i, ""));
    begin();
  }
}
