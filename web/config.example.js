// Example of config.js for a static deployment: copy it over config.js (next to index.html) and fill in the stack
// outputs. config.js is the only place the pages take these addresses from: a link cannot point them elsewhere.
//
//   apiBase          the HTTP API (stack output ApiUrl). "" or unset = the pages' own origin; else an http(s) URL
//                    or a path starting with /. No trailing slash needed.
//   auth             the Cognito user pool the pages sign in with (InitiateAuth, USER_PASSWORD_AUTH). Unset = no
//                    sign-in (only for an API without authentication).
//     endpoint       the cognito-idp endpoint, https://cognito-idp.<region>.amazonaws.com/ on AWS (may be left out
//                    when region is set); locally the emulator's URL
//     clientId       the user pool's app client id (stack output; a client without a secret, with
//                    ALLOW_USER_PASSWORD_AUTH and ALLOW_REFRESH_TOKEN_AUTH)
//     region         the pool's region, e.g. eu-west-1
//     hint           optional line shown above the sign-in form (the local stack names its users there)
//
// The local stack (`make run`) generates /config.js itself in exactly this shape.
window.DFD_CONFIG = {
  apiBase: "https://abc123.execute-api.eu-west-1.amazonaws.com",
  auth: {
    endpoint: "https://cognito-idp.eu-west-1.amazonaws.com/",
    clientId: "1example23456789abcdefghij",
    region: "eu-west-1",
  },
};
