// The API reference: Swagger UI (swagger-ui-bundle.js, loaded before this
// file) renders the instance's OpenAPI document. Everything the page loads
// comes from the instance that served it: the document is fetched here and
// handed to Swagger UI, the validator badge (which would send the document
// to a third party) is off, and "Try it out" sends requests to this same
// instance rather than to the example server the document names.
"use strict";

(function () {
  var root = document.getElementById("api-reference");
  var specURL = new URL(root.dataset.spec, document.baseURI);

  function fail(message) {
    root.textContent = "";
    var p = document.createElement("p");
    p.className = "flashline-docs flashline-docs-error";
    p.textContent = message;
    root.appendChild(p);
  }

  fetch(specURL, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then(function (r) {
      if (!r.ok) {
        throw new Error(specURL.pathname + " answered " + r.status);
      }
      return r.json();
    })
    .then(function (spec) {
      spec.servers = [{ url: new URL(".", specURL).href.replace(/\/$/, ""), description: "this instance" }];
      window.ui = SwaggerUIBundle({
        spec: spec,
        domNode: root,
        layout: "BaseLayout",
        presets: [SwaggerUIBundle.presets.apis],
        deepLinking: true,
        docExpansion: "list",
        defaultModelsExpandDepth: 0,
        filter: true,
        displayRequestDuration: true,
        validatorUrl: null,
        // The tokens typed into "Authorize" stay in this tab's memory.
        persistAuthorization: false,
      });
      root.dataset.rendered = "true";
    })
    .catch(function (err) {
      fail("The API reference could not be loaded: " + err.message + ".");
    });
})();
