// Starts Swagger UI (web/vendor/swagger-ui) on the API's OpenAPI document, served beside this page
// (docs.html: no inline script, the pages' CSP allows none). "Authorize" takes an access token: scripts/token
// prints one. "Try it out" calls the API the pages call: config.js's apiBase (this origin when empty).
"use strict";
window.addEventListener("DOMContentLoaded", () => {
  const apiBase = ((window.DFD_CONFIG && window.DFD_CONFIG.apiBase) || "").replace(/\/+$/, "");
  const spec = new URL("openapi.yaml", window.location.href).href;
  window.SwaggerUIBundle({
    url: spec,
    dom_id: "#swagger-ui",
    deepLinking: true,
    requestInterceptor: (request) => {
      if (apiBase && request.url !== spec && request.url.startsWith(window.location.origin + "/")) {
        request.url = apiBase + request.url.slice(window.location.origin.length);
      }
      return request;
    },
  });
});
