/* dfd web — sign-in with the Cognito user pool named in config.js (window.DFD_CONFIG.auth), shared by both pages.
 *
 * Sign-in:  POST <auth.endpoint>  X-Amz-Target: AWSCognitoIdentityProviderService.InitiateAuth
 *           {AuthFlow: "USER_PASSWORD_AUTH", ClientId, AuthParameters: {USERNAME, PASSWORD}}
 *           → AuthenticationResult {AccessToken, IdToken, RefreshToken, ExpiresIn}
 * New password: an account made with a temporary password (AdminCreateUser) answers the sign-in with the
 *           challenge NEW_PASSWORD_REQUIRED; the form then asks for a new password (twice) and sends
 *           RespondToAuthChallenge {ChallengeName, ClientId, Session, ChallengeResponses: {USERNAME, NEW_PASSWORD}}
 *           → AuthenticationResult.
 * Refresh:  the same call with AuthFlow "REFRESH_TOKEN_AUTH" and {REFRESH_TOKEN}, at 80 % of ExpiresIn, before
 *           any request once the access token is (nearly) expired, and once when the API answers 401.
 * Tokens live in sessionStorage (this tab only, gone when it closes) under "dfd.auth".
 * The access token's payload is decoded for display only (user name, tenant, admin badge): the API decides.
 *
 * A page calls DFD.auth.start({onSignIn(identity, info), onSignOut(reason)}) once. onSignIn runs when the page
 * may call the API (identity is null when config.js configures no sign-in); info.userChanged is true when the
 * user is not the one signed in before. onSignOut(reason) runs with "signout" (the user signed out) or "expired"
 * (the session ended: a refused refresh or a 401 from the API).
 */
(function () {
  "use strict";

  var D = window.DFD;
  var STORAGE_KEY = "dfd.auth";
  var TIMEOUT_MS = 15000;
  var REFRESH_AT = 0.8; // of ExpiresIn
  var EXPIRY_MARGIN_MS = 30000; // an access token this close to its end is refreshed before it is used
  var RETRY_REFRESH_MS = 30000; // a background refresh that could not reach Cognito is tried again after this

  var cfg = D.config.auth;
  var session = null; // {accessToken, idToken, refreshToken, expiresAt, refreshAt}
  var refreshing = null; // the refresh in flight (one at a time)
  var refreshTimer = null;
  var handlers = { onSignIn: function () {}, onSignOut: function () {} };
  var lastUser = null; // the user signed in before (kept across an expired session, to tell if the user changed)
  var busy = false;
  var ui = {};
  var challenge = null; // {username, session}: the sign-in answered NEW_PASSWORD_REQUIRED, a new password is due

  // ---------------------------------------------------------------- storage and tokens

  function storageGet() {
    try {
      var raw = window.sessionStorage.getItem(STORAGE_KEY);
      var s = raw ? JSON.parse(raw) : null;
      if (s && typeof s.accessToken === "string" && typeof s.expiresAt === "number") return s;
    } catch (e) {
      /* unreadable or storage disabled */
    }
    return null;
  }

  function storageSet(s) {
    try {
      if (s) window.sessionStorage.setItem(STORAGE_KEY, JSON.stringify(s));
      else window.sessionStorage.removeItem(STORAGE_KEY);
    } catch (e) {
      /* storage disabled: the session lasts as long as the page */
    }
  }

  /** The JWT's payload, decoded for display only (its signature is the API's business). {} if unreadable. */
  function claims(token) {
    try {
      var part = String(token).split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      while (part.length % 4) part += "=";
      var bytes = Uint8Array.from(window.atob(part), function (c) {
        return c.charCodeAt(0);
      });
      var payload = JSON.parse(new TextDecoder().decode(bytes));
      return payload && typeof payload === "object" ? payload : {};
    } catch (e) {
      return {};
    }
  }

  /** {username, groups, tenant, tenants, isAdmin} from the access token: groups "tenant-<name>" and "admins". */
  function identity() {
    if (!session) return null;
    var c = claims(session.accessToken);
    var groups = c["cognito:groups"];
    if (typeof groups === "string") groups = groups.replace(/^\[|\]$/g, "").split(/[\s,]+/);
    groups = Array.isArray(groups) ? groups.filter(Boolean).map(String) : [];
    var tenants = groups
      .filter(function (g) {
        return g.indexOf("tenant-") === 0 && g.length > 7;
      })
      .map(function (g) {
        return g.slice(7);
      });
    return {
      username: String(c.username || c["cognito:username"] || c.sub || "unknown"),
      groups: groups,
      tenants: tenants,
      tenant: tenants.length === 0 ? "personal" : tenants.length === 1 ? tenants[0] : "ambiguous (" + tenants.join(", ") + ")",
      isAdmin: groups.indexOf("admins") !== -1,
    };
  }

  function store(result, previous) {
    var now = Date.now();
    var seconds = Number(result.ExpiresIn) > 0 ? Number(result.ExpiresIn) : 3600;
    session = {
      accessToken: result.AccessToken,
      idToken: result.IdToken || (previous && previous.idToken) || null,
      refreshToken: result.RefreshToken || (previous && previous.refreshToken) || null,
      expiresAt: now + seconds * 1000,
      refreshAt: now + seconds * 1000 * REFRESH_AT,
    };
    storageSet(session);
    scheduleRefresh();
  }

  function scheduleRefresh() {
    window.clearTimeout(refreshTimer);
    refreshTimer = null;
    if (!session || !session.refreshToken) return;
    var delay = Math.max(0, (session.refreshAt || session.expiresAt - EXPIRY_MARGIN_MS) - Date.now());
    refreshTimer = window.setTimeout(function () {
      refresh().catch(function (err) {
        if (err instanceof AuthError && err.kind === "network" && session) {
          window.clearTimeout(refreshTimer);
          refreshTimer = window.setTimeout(scheduleRefresh, RETRY_REFRESH_MS); // try again while it lasts
        }
      });
    }, Math.min(delay, 0x7fffffff));
  }

  // ---------------------------------------------------------------- Cognito

  /** kind: "refused" (Cognito said no: the message says why), "network", "config" or "unsupported". */
  function AuthError(kind, type, message) {
    this.name = "AuthError";
    this.kind = kind;
    this.type = type;
    this.message = message;
  }
  AuthError.prototype = Object.create(Error.prototype);
  AuthError.prototype.constructor = AuthError;

  function initiateAuth(flow, parameters) {
    return cognito("InitiateAuth", { AuthFlow: flow, ClientId: cfg.clientId, AuthParameters: parameters });
  }

  function respondNewPassword(username, password, cognitoSession) {
    return cognito("RespondToAuthChallenge", {
      ChallengeName: "NEW_PASSWORD_REQUIRED",
      ClientId: cfg.clientId,
      Session: cognitoSession,
      ChallengeResponses: { USERNAME: username, NEW_PASSWORD: password },
    });
  }

  /** One Cognito call: resolves AuthenticationResult, or {challenge, session} for NEW_PASSWORD_REQUIRED. */
  function cognito(action, payload) {
    var controller = new AbortController();
    var timer = window.setTimeout(function () {
      controller.abort();
    }, TIMEOUT_MS);
    return fetch(cfg.endpoint, {
      method: "POST",
      headers: {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "AWSCognitoIdentityProviderService." + action,
      },
      body: JSON.stringify(payload),
      signal: controller.signal,
      credentials: "omit",
      cache: "no-store",
    })
      .then(
        function (resp) {
          return resp.text().then(function (text) {
            var body = {};
            try {
              body = text ? JSON.parse(text) : {};
            } catch (e) {
              body = {};
            }
            if (resp.ok) {
              if (body.AuthenticationResult && body.AuthenticationResult.AccessToken) return body.AuthenticationResult;
              if (body.ChallengeName === "NEW_PASSWORD_REQUIRED" && body.Session) {
                return { challenge: body.ChallengeName, session: body.Session };
              }
              if (body.ChallengeName) {
                throw new AuthError(
                  "unsupported",
                  body.ChallengeName,
                  "This account needs a step this page does not support (" + body.ChallengeName +
                    "), for example a new password. Ask an administrator to set a permanent password."
                );
              }
              throw new AuthError("config", "BadResponse", "The sign-in service gave an answer without tokens.");
            }
            // AWS JSON errors: {"__type": "[namespace#]NotAuthorizedException", "message": "..."}
            var type = String(body.__type || resp.headers.get("x-amzn-ErrorType") || "HTTP " + resp.status);
            type = type.split("#").pop().split(":")[0];
            throw new AuthError("refused", type, String(body.message || body.Message || ""));
          });
        },
        function () {
          throw new AuthError(
            "network",
            "Network",
            "Could not reach the sign-in service at " + new URL(cfg.endpoint).host + ". Check your connection and try again."
          );
        }
      )
      .finally(function () {
        window.clearTimeout(timer);
      });
  }

  /** A user-facing sentence for a failed sign-in. */
  function signInMessage(err, username) {
    if (!(err instanceof AuthError)) return "Sign-in failed: " + (err && err.message ? err.message : String(err));
    if (err.kind !== "refused") return err.message;
    switch (err.type) {
      case "NotAuthorizedException":
        if (/incorrect username or password/i.test(err.message) || !err.message) return "Wrong username or password.";
        return "Sign-in refused: " + err.message;
      case "UserNotFoundException":
        return "There is no user named “" + username + "”. Check the username.";
      case "UserNotConfirmedException":
        return "This account is not confirmed yet. Ask an administrator to confirm it.";
      case "InvalidPasswordException":
        return "That password is not accepted: " + (err.message || "see the password policy") + ".";
      case "CodeMismatchException":
      case "ExpiredCodeException":
        return "The sign-in took too long. Enter your username and temporary password again.";
      case "PasswordResetRequiredException":
        return "This account's password has to be reset first. Ask an administrator.";
      case "TooManyRequestsException":
      case "LimitExceededException":
        return "Too many attempts. Wait a minute, then try again.";
      case "ResourceNotFoundException":
      case "InvalidParameterException":
      case "InvalidUserPoolConfigurationException":
        return "Sign-in is misconfigured (" + err.type + (err.message ? ": " + err.message : "") + "). Check config.js.";
      default:
        return "Sign-in failed (" + err.type + (err.message ? ": " + err.message : "") + ").";
    }
  }

  /** Refreshes the tokens (one refresh at a time). Rejects with AuthError; "refused" ends the session. */
  function refresh() {
    if (refreshing) return refreshing;
    if (!session || !session.refreshToken) {
      return Promise.reject(new AuthError("refused", "NoSession", "Not signed in."));
    }
    var previous = session;
    refreshing = initiateAuth("REFRESH_TOKEN_AUTH", { REFRESH_TOKEN: previous.refreshToken })
      .then(
        function (result) {
          if (!result.AccessToken) throw new AuthError("refused", "Challenge", "Sign in again.");
          if (session !== previous) throw new AuthError("refused", "SignedOut", "Signed out meanwhile.");
          store(result, previous);
          return session.accessToken;
        },
        function (err) {
          if (err instanceof AuthError && err.kind !== "network" && session === previous) {
            expire("Your session has ended. Sign in again.");
          }
          throw err;
        }
      )
      .finally(function () {
        refreshing = null;
      });
    return refreshing;
  }

  function notSignedIn() {
    return new D.ApiError(401, "unauthorized", "Not signed in, or the session has ended: sign in again", null);
  }

  /** The ApiError for a refresh that could not reach Cognito (no sign-out: the network may come back). */
  function asApiError(err) {
    if (err instanceof AuthError && err.kind === "network") return new D.ApiError(0, "network", err.message, null);
    return notSignedIn();
  }

  /** Resolves an access token that is not about to expire (refreshing first if needed). */
  function accessToken() {
    if (!session) return Promise.reject(notSignedIn());
    var now = Date.now();
    if (now < session.expiresAt - EXPIRY_MARGIN_MS) {
      if (now >= session.refreshAt && !refreshing) refresh().catch(function () {}); // due: refresh in the background
      return Promise.resolve(session.accessToken);
    }
    return refresh().catch(function (err) {
      throw asApiError(err);
    });
  }

  /** After the API answered 401 to `token`: a fresher token if another request got one meanwhile, else a refresh. */
  function refreshAfterRejection(token) {
    if (!session) return Promise.reject(notSignedIn());
    if (session.accessToken !== token) return Promise.resolve(session.accessToken);
    return refresh().catch(function (err) {
      throw asApiError(err);
    });
  }

  // ---------------------------------------------------------------- state changes

  function setState(state) {
    document.documentElement.setAttribute("data-auth", state);
  }

  function signedIn(how) {
    var who = identity();
    var changed = lastUser !== null && lastUser !== who.username;
    lastUser = who.username;
    renderAccount(who);
    showApp(true);
    setState("signed-in");
    if (how === "form") {
      D.announce("Signed in as " + who.username + ", tenant " + who.tenant + (who.isAdmin ? ", administrator" : "") + ".");
      var heading = document.querySelector("[data-focus-after-sign-in]");
      if (heading) heading.focus();
    }
    handlers.onSignIn(who, { userChanged: changed, restored: how === "restored" });
  }

  function signedOut(reason, message) {
    var wasSignedIn = document.documentElement.getAttribute("data-auth") === "signed-in";
    window.clearTimeout(refreshTimer);
    refreshTimer = null;
    session = null;
    storageSet(null);
    renderAccount(null);
    showApp(false);
    setState("signed-out");
    ui.password.value = "";
    ui.password.removeAttribute("aria-invalid");
    ui.username.removeAttribute("aria-invalid");
    newPasswordStep(null);
    showMessage(message || "", reason === "expired");
    if (reason === "signout") ui.username.value = ""; // the next person starts from an empty form
    if (reason === "expired" && lastUser && !ui.username.value) ui.username.value = lastUser;
    if (wasSignedIn) handlers.onSignOut(reason);
    (ui.username.value ? ui.password : ui.username).focus();
    if (reason === "signout") D.announce("Signed out.");
  }

  /** Ends the session (a refused refresh, or the API refused the token): back to the sign-in form. */
  function expire(message) {
    if (!cfg || !session) return;
    signedOut("expired", message || "Your session has ended. Sign in again.");
  }

  function signOut() {
    if (!cfg) return;
    signedOut("signout", "");
  }

  // ---------------------------------------------------------------- UI

  function $(id) {
    return document.getElementById(id);
  }

  function showApp(visible) {
    ui.app.hidden = !visible;
    ui.section.hidden = visible || !cfg;
    ui.pending.hidden = true;
  }

  function showMessage(text, isError) {
    ui.message.textContent = text;
    ui.message.hidden = !text;
    ui.message.classList.toggle("error-text", !!isError);
  }

  function renderAccount(who) {
    ui.account.hidden = !who;
    if (!who) return;
    ui.user.textContent = who.username;
    ui.tenant.textContent = who.tenant;
    // an administrator without a tenant group is named by the badge alone (its "tenant" is nobody's space)
    var tenantLine = ui.tenant.parentNode;
    if (tenantLine) tenantLine.hidden = who.isAdmin && who.tenants.length === 0;
    var separator = ui.account.querySelector(".account-sep");
    if (separator) separator.hidden = !!(tenantLine && tenantLine.hidden);
    ui.admin.hidden = !who.isAdmin;
  }

  /** The form's second step: new password fields (made here, so both pages get them) while `step` is set. */
  function newPasswordStep(step) {
    challenge = step;
    if (!ui.newPassword && step) {
      var wrap = document.createElement("div");
      wrap.className = "signin-new-password";
      wrap.setAttribute("data-testid", "signin-new-password");
      [
        ["signin-new-password-1", "New password"],
        ["signin-new-password-2", "Repeat the new password"],
      ].forEach(function (field) {
        var label = document.createElement("label");
        label.setAttribute("for", field[0]);
        label.textContent = field[1];
        var input = document.createElement("input");
        input.id = field[0];
        input.type = "password";
        input.autocomplete = "new-password";
        input.setAttribute("data-testid", field[0]);
        input.setAttribute("aria-describedby", "signin-message");
        wrap.appendChild(label);
        wrap.appendChild(input);
      });
      ui.form.insertBefore(wrap, ui.submit.parentNode === ui.form ? ui.submit : ui.submit.parentNode);
      ui.newPassword = wrap;
      ui.newPassword1 = wrap.querySelector("#signin-new-password-1");
      ui.newPassword2 = wrap.querySelector("#signin-new-password-2");
    }
    if (!ui.newPassword) return;
    ui.newPassword.hidden = !step;
    ui.newPassword1.value = "";
    ui.newPassword2.value = "";
    ui.username.readOnly = !!step;
    ui.password.readOnly = !!step;
    ui.submitText.textContent = step ? "Set password and sign in" : "Sign in";
  }

  function showHint() {
    if (!cfg.hint || ui.hint) return;
    ui.hint = document.createElement("p");
    ui.hint.className = "muted signin-hint";
    ui.hint.setAttribute("data-testid", "signin-hint");
    ui.hint.textContent = cfg.hint;
    ui.form.parentNode.insertBefore(ui.hint, ui.form);
  }

  function signInDone(result) {
    ui.password.value = "";
    newPasswordStep(null);
    store(result, null);
    showMessage("", false);
    signedIn("form");
  }

  function submitNewPassword() {
    var first = ui.newPassword1.value;
    if (!first || first !== ui.newPassword2.value) {
      ui.newPassword1.setAttribute("aria-invalid", "true");
      showMessage(!first ? "Choose a new password." : "The two new passwords differ.", true);
      ui.newPassword1.focus();
      return;
    }
    ui.newPassword1.removeAttribute("aria-invalid");
    showMessage("", false);
    setBusy(true);
    var step = challenge;
    respondNewPassword(step.username, first, step.session)
      .then(signInDone, function (err) {
        showMessage(signInMessage(err, step.username), true);
        if (err instanceof AuthError && err.type === "InvalidPasswordException") {
          ui.newPassword1.setAttribute("aria-invalid", "true");
          ui.newPassword1.focus();
          return;
        }
        newPasswordStep(null); // the challenge's session is spent: start again from the temporary password
        ui.password.focus();
      })
      .finally(function () {
        setBusy(false);
      });
  }

  function setBusy(on) {
    busy = on;
    ui.submit.setAttribute("aria-disabled", on ? "true" : "false");
    ui.submit.setAttribute("aria-busy", on ? "true" : "false");
    ui.submitText.textContent = on ? "Signing in…" : challenge ? "Set password and sign in" : "Sign in";
  }

  function onSubmit(ev) {
    ev.preventDefault();
    if (busy) return;
    if (challenge) {
      submitNewPassword();
      return;
    }
    var username = ui.username.value.trim();
    var password = ui.password.value;
    ui.username.removeAttribute("aria-invalid");
    ui.password.removeAttribute("aria-invalid");
    if (!username || !password) {
      var missing = !username ? ui.username : ui.password;
      missing.setAttribute("aria-invalid", "true");
      showMessage(!username ? "Enter your username." : "Enter your password.", true);
      missing.focus();
      return;
    }
    showMessage("", false);
    setBusy(true);
    initiateAuth("USER_PASSWORD_AUTH", { USERNAME: username, PASSWORD: password })
      .then(
        function (result) {
          if (result.challenge) {
            newPasswordStep({ username: username, session: result.session });
            showMessage("Choose a new password: the one you signed in with is temporary.", false);
            ui.newPassword1.focus();
            return;
          }
          signInDone(result);
        },
        function (err) {
          var text = signInMessage(err, username);
          showMessage(text, true);
          var field = null;
          if (err instanceof AuthError && err.type === "UserNotFoundException") field = ui.username;
          else if (err instanceof AuthError && err.type === "NotAuthorizedException") field = ui.password;
          if (field) {
            field.setAttribute("aria-invalid", "true");
            field.focus();
            field.select();
          }
        }
      )
      .finally(function () {
        setBusy(false);
      });
  }

  /** Wires the page's sign-in form and account bar, then decides the first state (see the file comment). */
  function start(pageHandlers) {
    handlers.onSignIn = pageHandlers.onSignIn || handlers.onSignIn;
    handlers.onSignOut = pageHandlers.onSignOut || handlers.onSignOut;
    ui = {
      app: $("app"),
      section: $("signin"),
      pending: $("auth-pending"),
      form: $("signin-form"),
      username: $("signin-username"),
      password: $("signin-password"),
      submit: $("signin-submit"),
      submitText: $("signin-submit").querySelector(".btn-text") || $("signin-submit"),
      message: $("signin-message"),
      account: $("account"),
      user: $("account-user"),
      tenant: $("account-tenant"),
      admin: $("account-admin"),
      signOut: $("sign-out"),
    };
    D.initConfigInfo();
    if (!cfg) {
      ui.section.hidden = true;
      ui.pending.hidden = true;
      ui.account.hidden = true;
      if (D.config.authRequired) {
        // auth was configured but is unusable: no sign-in, no API calls; #config-error says why.
        ui.app.hidden = true;
        setState("misconfigured");
        return;
      }
      ui.app.hidden = false;
      setState("disabled");
      handlers.onSignIn(null, { userChanged: false, restored: false });
      return;
    }
    ui.form.addEventListener("submit", onSubmit);
    showHint();
    ui.signOut.addEventListener("click", signOut);

    session = storageGet();
    if (!session) {
      signedOut("initial", "");
      return;
    }
    lastUser = identity().username;
    if (Date.now() < session.expiresAt - EXPIRY_MARGIN_MS) {
      scheduleRefresh();
      signedIn("restored");
      return;
    }
    // The stored access token has run out: refresh it before showing the page.
    ui.app.hidden = true;
    ui.section.hidden = true;
    ui.pending.hidden = false;
    setState("pending");
    refresh().then(
      function () {
        signedIn("restored");
      },
      function (err) {
        if (session) signedOut("expired", signInMessage(err, "") || "Your session has ended. Sign in again.");
      }
    );
  }

  D.auth = {
    enabled: function () {
      return !!cfg;
    },
    isSignedIn: function () {
      return !cfg || !!session;
    },
    start: start,
    identity: identity,
    accessToken: accessToken,
    refreshAfterRejection: refreshAfterRejection,
    expire: expire,
    signOut: signOut,
  };
})();
