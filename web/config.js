// dfd web — page configuration, loaded by index.html and admin.html before the page scripts. It is the ONLY place
// the pages take the API's address and the sign-in service from (nothing in the page address or in browser storage
// can change them). See config.example.js for every setting, and README.md.
//
// As shipped, this file sets nothing: the pages call the API on their own origin and do not sign in. A deployment
// writes its own (the API requires sign-in: set auth). The local stack (`make run`) serves its own /config.js
// instead of this file.
window.DFD_CONFIG = {
  // apiBase: "https://abc123.execute-api.eu-west-1.amazonaws.com",
  // auth: { endpoint: "https://cognito-idp.eu-west-1.amazonaws.com/", clientId: "...", region: "eu-west-1" },
};
