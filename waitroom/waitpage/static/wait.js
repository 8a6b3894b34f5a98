// The waiting-room page: get a ticket, wait in line (solving the proof-of-work
// challenge in a worker when the sale asks for one), reserve when admitted,
// then pay. The HTTP contract is the README's API section.
//
// This file starts the page: the sale from the address, the customer's token
// from what is kept, or from the link (#token=…) once the customer said so. The flow itself is flow.js's,
// the one a shop's page runs too (embed.js).

import { store } from "./storage.js";
import { sale } from "./state.js";
import { $, showError, showLogo } from "./ui.js";
import { usable, askAccount } from "./account.js";
import { begin } from "./flow.js";
import { load, t } from "./i18n.js";

// start reads the sale from the address and the token from the link.
function start() {
  if (!sale.known) return showError(t("error.notSale"));
  $("sale-id").textContent = sale.id;
  const frag = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  const fromURL = frag.get("token");
  if (fromURL) {
    // Take the token out of the address bar (and so out of history and
    // anything the customer copies from it), whichever token is kept.
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    // A link's token is never taken without asking (unless it is the one
    // kept already): a link someone else sent would otherwise make the
    // visitor wait in line and buy as them.
    const stored = store.get(sale.jwtKey);
    if (stored !== fromURL) return askAccount(stored && usable(stored) ? stored : null, fromURL);
  }
  begin();
}

// The words first (the shopper's language), then the flow. (A promise,
// not a top-level await: browsers that load modules but predate it still
// run the page.)
load().then(function () {
  showLogo();
  start();
});
