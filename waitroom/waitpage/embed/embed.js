/* Flashline's buy button, for a shop's own page:

     <div id="drop"></div>
     <script src="https://flashline.example/embed.js" data-sale="sale_…"
             data-token="shopFlashlineToken" data-target="#drop"
             data-checkout-url="/checkout?hold={reservationId}"></script>

   data-sale      the sale (required)
   data-token     the name of a function of the page that returns the
                  customer's Flashline token (a JWT), or a promise of it
   data-target    a selector of the element to render in (default: a new
                  element right after this script tag)
   data-api       the API's base URL (default: where this script came from)
   data-lang      the shopper's language, a BCP 47 tag (de, pt-BR); when the
                  button does not speak it: the browser's languages, then
                  the deployment's default, then English
   data-checkout-url  where Pay sends the shopper, {reservationId} and
                  {saleId} filled in (default: stay, and wait for the payment);
                  an http(s) or relative URL, anything else (javascript:,
                  data:) ignored with a console warning

   It renders the sale's state in a shadow root (styled through --flashline-*
   custom properties) with the modules of the waiting-room page, loaded from
   Flashline's origin (embed-main.js says what the page gets back). One
   button per page. This file is a classic script: it is the one that knows
   its own tag (document.currentScript). */
(function () {
  "use strict";
  // checkoutTemplate is data-checkout-url if the browser may go there: an
  // http(s) URL, or a relative one (resolved against the shop's page);
  // otherwise "" (Pay waits for the payment) and a warning. A javascript:
  // URL would run in the shop's origin when the shopper presses Pay.
  function checkoutTemplate(v) {
    if (!v) return "";
    var u = null;
    try { u = new URL(v, document.baseURI); } catch (e) { u = null; }
    if (u && (u.protocol === "http:" || u.protocol === "https:")) return v;
    console.warn("flashline: data-checkout-url " + JSON.stringify(v) + " is ignored: only an http(s) or relative URL");
    return "";
  }
  var script = document.currentScript;
  if (!script || window.__flashlineEmbed) return;
  var d = script.dataset;
  var src = new URL(script.src, window.location.href);
  // Flashline's base: this script's URL without /embed.js (an API served
  // under a prefix keeps it).
  var base = src.origin + src.pathname.replace(/\/embed\.js$/, "");
  var assets = base + "{{ASSETS}}";
  var mount = d.target ? document.querySelector(d.target) : null;
  if (!mount) {
    mount = document.createElement("div");
    script.parentNode.insertBefore(mount, script.nextSibling);
  }
  mount.classList.add("flashline-embed");
  var root = mount.attachShadow({ mode: "open" });
  root.innerHTML = '<link rel="stylesheet" href="' + assets + '/wait.css">' +
    '<link rel="stylesheet" href="' + assets + '/embed.css">' +
    '<link rel="stylesheet" href="' + assets + '/look.css">' +
    {{MARKUP}}.split("@@ASSETS@@").join(assets);
  window.__flashlineEmbed = {
    root: root,
    mount: mount,
    sale: d.sale || "",
    api: d.api || {{API}} || base,
    tokenCallback: d.token || "",
    lang: d.lang || "",
    checkoutURL: checkoutTemplate(d.checkoutUrl || ""),
    started: false
  };
  import(assets + "/embed-main.js").catch(function (e) {
    root.getElementById("error-text").textContent = "The sale could not be loaded: " + (e && e.message || e);
    root.getElementById("app").lang = "en"; // shown (wait.css hides the button until its words are set)
    var panels = root.querySelectorAll("section[id^='state-']");
    for (var i = 0; i < panels.length; i++) panels[i].hidden = panels[i].id !== "state-error";
  });
})();
