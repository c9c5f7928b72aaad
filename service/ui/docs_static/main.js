// The interactive documentation: Swagger UI, from the gateway's own files, over the OpenAPI
// document the page names (data-openapi). An external script, as the page's CSP runs no inline one.
"use strict";

window.addEventListener("DOMContentLoaded", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapi,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null, // Swagger UI's default sends the document's URL to a validator of another site
    oauth2RedirectUrl: window.location.origin + root.dataset.oauth2Redirect,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
