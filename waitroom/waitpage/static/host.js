// Where the flow runs. On the waiting-room page (wait.html) these are the
// defaults: the page's own document, the sale and the API read from the page
// (state.js). On a shop's page (embed.js, embed-main.js) they are set before
// any other module of the flow is loaded: the elements live in a shadow
// root in the shop's page, the sale and the API's base URL come from the
// script tag, and the hooks hand the reservation to the shop's page.

export const host = Object.seal({
  embedded: false,  // true: a shop's page, not the waiting-room page
  root: document,   // where the flow's elements are (getElementById)
  saleId: "",       // the sale ("": state.js reads it from the page)
  api: "",          // the API's base URL ("": state.js reads it from the page)
  lang: "",         // the language the shop asks for (data-lang; i18n.js)
  onReserved: null, // function (reservation): a hold is shown
  onCheckout: null, // function (reservation): Pay was pressed; false: do no more
  onOrder: null     // function (order): the order is shown
});

// notify calls one of the hooks, if set, and never lets it break the flow.
export function notify(name, value) {
  const fn = host[name];
  if (typeof fn !== "function") return undefined;
  try {
    return fn(value);
  } catch (e) {
    if (window.console) window.console.error("flashline: " + name + ": ", e);
    return undefined;
  }
}
