// Copy to config.js (next to index.html) for a static deployment and set apiBase to the deployed HTTP API
// (the stack output, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com). No trailing slash needed.
// Served by the local stack (`make run`), /config.js is generated instead: apiBase "" = same origin.
// A ?api=https://... query parameter, or the Settings field on either page (saved in localStorage),
// overrides this value.
window.DFD_CONFIG = {
  apiBase: "https://abc123.execute-api.eu-west-1.amazonaws.com",
};
