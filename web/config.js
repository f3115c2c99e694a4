// dfd web — optional page settings, loaded by index.html and admin.html before the page scripts.
//
// As shipped, this file sets nothing, and the pages call the API on their own origin. For a static deployment
// (S3 website or any static host) with the API elsewhere, set apiBase to the deployed HTTP API, e.g. the stack
// output https://abc123.execute-api.eu-west-1.amazonaws.com (no trailing slash needed) — see config.example.js
// and README.md. The local stack (`make run`) serves its own /config.js instead of this file.
// A ?api=https://... query parameter, or the Settings field on either page (saved in localStorage), overrides
// this value.
window.DFD_CONFIG = {
  // apiBase: "https://abc123.execute-api.eu-west-1.amazonaws.com",
};
