// Example of config.js for a static deployment: copy it over config.js (next to index.html) and set apiBase to
// the deployed HTTP API (the stack output, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com). No trailing
// slash needed. The config.js in the repository sets nothing (same origin), so a deployment without changes
// works against an API on the same origin and the browser never requests a missing file.
// Served by the local stack (`make run`), /config.js is generated instead: apiBase "" = same origin.
// A ?api=https://... query parameter, or the Settings field on either page (saved in localStorage),
// overrides this value.
window.DFD_CONFIG = {
  apiBase: "https://abc123.execute-api.eu-west-1.amazonaws.com",
};
