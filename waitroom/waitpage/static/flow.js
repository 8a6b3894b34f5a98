// The flow the waiting-room page (wait.js) and a shop's page (embed.js,
// embed-main.js) both run: begin (re)starts it from what is kept, and the
// buttons say what each does. The rest is in one file per concern:
//
//   host.js      where the flow runs: the page, or a shop's page (the hooks)
//   storage.js   what survives a reload (localStorage, per sale and customer)
//   state.js     the sale, the page's mutable state in one object, the pending step
//   api.js       the API calls
//   ui.js        the page's states on screen
//   account.js   the customer's token: sign in, the account chooser
//   line.js      the ticket, the status polls, the proof of work
//   purchase.js  reserve, the hold's countdown, pay, and the ends
//   variants.js  a sale with variants: the admitted shopper's choice
//   lottery.js   a lottery sale: register, the draw's outcome, buy when drawn
//   i18n.js      the shopper's language: the words, numbers and times
//
// They are ES modules (<script type="module">, imports between files of this
// origin), not classic scripts sharing a global: each file names what it uses
// and the browser links them before anything runs (a missing name fails the
// load at once, not at the first click), nothing is global, and they are
// strict and deferred without saying so. They need nothing the page did not
// have: script-src 'self' covers imports, the assets are served as
// text/javascript, and relative imports resolve under the same versioned,
// immutable asset path as this file. wait.html preloads every one
// (rel=modulepreload) so that they load in parallel.

import { store, keysFor } from "./storage.js";
import { sale, state, stopAll } from "./state.js";
import { $, setState } from "./ui.js";
import { claims, hasSubject, isExpired, showSignin, signIn, chooseAccount } from "./account.js";
import { loadPolicy, getTicket, dropTicket } from "./line.js";
import { reserve, resumeReservation, pay, forgetAttempt, showPaid } from "./purchase.js";
import { lotteryOrLine } from "./lottery.js";
import { t } from "./i18n.js";

// begin (re)starts the flow from what is kept: the order, the reservation,
// the admission, or the place in line.
export function begin() {
  stopAll();
  state.attempts = 0;
  state.ticketResets = 0;
  state.jwt = store.get(sale.jwtKey);
  loadPolicy(); // read once per page (fetchPolicy): the product, the opening, the rules
  if (!state.jwt) return showSignin();
  const c = claims(state.jwt);
  if (!hasSubject(c)) {
    store.del(sale.jwtKey);
    state.jwt = null;
    return showSignin(t("signin.unreadable"));
  }
  if (isExpired(c)) {
    store.del(sale.jwtKey);
    state.jwt = null;
    return showSignin(t("signin.expired"));
  }
  $("account-id").textContent = c.sub;
  $("account-line").hidden = false;
  state.keys = keysFor(sale.id, c.sub);
  state.ticket = store.get(state.keys.ticket);
  const pow = store.getJSON(state.keys.pow);
  state.solution = pow && pow.nonce && pow.solution ? { nonce: pow.nonce, value: pow.solution } : null;

  const order = store.getJSON(state.keys.order);
  if (order && order.orderId) return showPaid(order);
  const res = store.getJSON(state.keys.reservation);
  if (res && res.reservationId) return resumeReservation(res, begin);
  const adm = store.getJSON(state.keys.admission);
  if (adm && adm.token && adm.expiresAt > Date.now()) return reserve();
  setState("loading", t("loading.text"));
  lotteryOrLine(getTicket);
}

$("signin-form").addEventListener("submit", function (ev) {
  ev.preventDefault();
  if (signIn()) begin();
});
$("account-keep").addEventListener("click", function () {
  chooseAccount(false);
  begin();
});
$("account-switch").addEventListener("click", function () {
  chooseAccount(true);
  begin();
});
$("pay").addEventListener("click", pay);
$("rejoin").addEventListener("click", function () {
  dropTicket();
  store.del(state.keys.pow);
  forgetAttempt();
  begin();
});
$("retry").addEventListener("click", begin);

