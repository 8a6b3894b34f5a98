// The waiting-room page: get a ticket, wait in line (solving the proof-of-work
// challenge in a worker when the sale asks for one), reserve when admitted,
// then pay. The HTTP contract is the README's API section.
//
// This file starts the page: the sale from the address, the customer's token
// from the link (#token=…) or what is kept. The flow itself is flow.js's,
// the one a shop's page runs too (embed.js).

import { store } from "./storage.js";
import { sale } from "./state.js";
import { $, showError } from "./ui.js";
import { usable, askAccount } from "./account.js";
import { begin } from "./flow.js";

// start reads the sale from the address and the token from the link.
function start() {
  if (!sale.known) return showError("This is not a sale's waiting-room address.");
  $("sale-id").textContent = sale.id;
  const frag = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  const fromURL = frag.get("token");
  if (fromURL) {
    // Take the token out of the address bar (and so out of history and
    // anything the customer copies from it), whichever token is kept.
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    const stored = store.get(sale.jwtKey);
    if (stored && stored !== fromURL && usable(stored)) return askAccount(stored, fromURL);
    store.set(sale.jwtKey, fromURL);
  }
  begin();
}

start();
