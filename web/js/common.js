/* dfd web — helpers shared by the upload page and the admin dashboard.
 *
 * Configuration comes from config.js only (window.DFD_CONFIG, see config.example.js and README.md):
 *   apiBase  the HTTP API; "" (or unset) = the page's own origin, else an http(s) URL or a path starting with /
 *   auth     {endpoint, clientId, region}: the Cognito user pool's endpoint and app client (see js/auth.js);
 *            unset = the pages do not sign in (an API without authentication)
 * Nothing in the page address or in browser storage can change where the pages send files or credentials: a
 * link could otherwise point a user's uploads (or password) at someone else's server.
 */
(function () {
  "use strict";

  // An API address saved by earlier versions of these pages (a Settings field): never used, removed.
  try {
    window.localStorage.removeItem("dfd.apiBase");
  } catch (e) {
    /* storage disabled */
  }

  function normalizeBase(value) {
    return String(value || "").trim().replace(/\/+$/, "");
  }

  /** The URL as an absolute http(s) URL string, or null for anything else (javascript:, data:, blob:, junk). */
  function safeHttpUrl(value, base) {
    if (typeof value !== "string" || value === "") return null;
    var url;
    try {
      url = new URL(value, base || window.location.href);
    } catch (e) {
      return null;
    }
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  }

  /** Reads window.DFD_CONFIG once: {apiBase, auth: {endpoint, clientId, region} | null, errors: [...]}. */
  var config = (function readConfig() {
    var raw = window.DFD_CONFIG && typeof window.DFD_CONFIG === "object" ? window.DFD_CONFIG : {};
    var errors = [];
    var base = typeof raw.apiBase === "string" ? normalizeBase(raw.apiBase) : "";
    if (base !== "" && base.charAt(0) !== "/" && !safeHttpUrl(base)) {
      errors.push("config.js: apiBase must be an http(s) URL, a path starting with /, or empty");
      base = null;
    } else if (base.charAt(0) === "/" && base.charAt(1) === "/") {
      errors.push("config.js: apiBase must not start with // (write the scheme: https://...)");
      base = null;
    }
    var auth = null;
    if (raw.auth !== undefined && raw.auth !== null) {
      var a = raw.auth;
      var region = a && typeof a.region === "string" ? a.region.trim() : "";
      var endpoint = a && typeof a.endpoint === "string" ? a.endpoint.trim() : "";
      if (!endpoint && /^[a-z0-9-]+$/.test(region)) endpoint = "https://cognito-idp." + region + ".amazonaws.com/";
      var clientId = a && typeof a.clientId === "string" ? a.clientId.trim() : "";
      if (!safeHttpUrl(endpoint) || endpoint.indexOf("//") === -1) {
        errors.push("config.js: auth.endpoint must be the user pool's http(s) endpoint (or set auth.region)");
      } else if (!clientId) {
        errors.push("config.js: auth.clientId is missing");
      } else {
        // hint: a line shown above the sign-in form (the local stack names its users there)
        var hint = a && typeof a.hint === "string" ? a.hint.trim().slice(0, 300) : "";
        auth = { endpoint: safeHttpUrl(endpoint), clientId: clientId, region: region, hint: hint };
      }
      if (!auth) errors.push("Sign-in is not possible until config.js is fixed.");
    }
    return { apiBase: base, auth: auth, authRequired: raw.auth !== undefined && raw.auth !== null, errors: errors };
  })();

  function apiBase() {
    return config.apiBase === null ? "" : config.apiBase;
  }

  function apiUrl(path) {
    return apiBase() + path;
  }

  /** Error carrying the HTTP status and the API's {"error": {"code", "message"}}. status 0 = network. */
  function ApiError(status, code, message, body) {
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.message = message;
    this.body = body;
  }
  ApiError.prototype = Object.create(Error.prototype);
  ApiError.prototype.constructor = ApiError;

  /** One line for the UI: the API's message plus the HTTP status and error code when they add something. */
  function describeError(err) {
    if (!err) return "Unknown error";
    if (!(err instanceof ApiError)) return err.message || String(err);
    if (err.status === 0 || String(err.code).indexOf("http_") === 0) return err.message;
    return err.message + " (HTTP " + err.status + (err.code ? ", " + err.code : "") + ")";
  }

  function describeBase() {
    var base = apiBase();
    return base === "" ? window.location.origin : base;
  }

  var TIMEOUT_MS = 10000;

  /** One request to the API with an optional bearer token: resolves {status, body} for 2xx, else ApiError. */
  function request(method, path, payload, token) {
    var controller = new AbortController();
    var timedOut = false;
    var timer = window.setTimeout(function () {
      timedOut = true;
      controller.abort();
    }, TIMEOUT_MS);
    var init = { method: method, headers: { accept: "application/json" }, signal: controller.signal };
    if (token) init.headers.authorization = "Bearer " + token;
    if (payload !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    if (config.apiBase === null) {
      window.clearTimeout(timer);
      return Promise.reject(new ApiError(0, "config", config.errors.join(". "), null));
    }
    return fetch(apiUrl(path), init)
      .then(function (resp) {
        return resp.text().then(function (text) {
          var body = null;
          if (text) {
            try {
              body = JSON.parse(text);
            } catch (e) {
              body = null;
            }
          }
          if (resp.ok) return { status: resp.status, body: body };
          var err = body && body.error ? body.error : null;
          var code = err && err.code ? err.code : "http_" + resp.status;
          var message = err && err.message ? err.message : "HTTP " + resp.status + " " + (resp.statusText || "");
          throw new ApiError(resp.status, code, message.trim(), body);
        });
      })
      .catch(function (err) {
        if (err instanceof ApiError) throw err;
        if (timedOut) {
          throw new ApiError(
            0,
            "timeout",
            "The API at " + describeBase() + " did not answer within " + TIMEOUT_MS / 1000 + " s",
            null
          );
        }
        throw new ApiError(
          0,
          "network",
          "Network error: could not reach the API at " + describeBase() + " (is it running, and does CORS allow this page?)",
          null
        );
      })
      .finally(function () {
        window.clearTimeout(timer);
      });
  }

  /**
   * fetch JSON from the API. Resolves {status, body} for 2xx, rejects with ApiError otherwise. A request that
   * gets no complete answer within TIMEOUT_MS is aborted and rejects like a network error (status 0, code
   * "timeout"), so a hung request cannot stall a caller that waits for it.
   *
   * With sign-in configured (js/auth.js), every request carries "Authorization: Bearer <access token>". A 401 is
   * answered by refreshing the tokens and sending the request once more; a second 401 (or a refresh that fails)
   * signs the page out, which shows the sign-in form with a message, and rejects with the 401.
   */
  function apiFetch(method, path, payload) {
    var auth = window.DFD.auth;
    if (!auth || !auth.enabled()) {
      return request(method, path, payload, null).catch(function (err) {
        if (err instanceof ApiError && err.status === 401 && !config.authRequired) {
          err.message = "The API requires sign-in, but config.js has no auth settings";
        }
        throw err;
      });
    }
    function send(retried) {
      return auth.accessToken().then(function (token) {
        return request(method, path, payload, token).catch(function (err) {
          if (!(err instanceof ApiError) || err.status !== 401) throw err;
          if (!retried) {
            return auth.refreshAfterRejection(token).then(
              function () {
                return send(true);
              },
              function (refreshErr) {
                if (refreshErr instanceof ApiError && refreshErr.status === 0) throw refreshErr; // offline: no sign-out
                auth.expire("Your session has ended. Sign in again.");
                throw sessionError();
              }
            );
          }
          auth.expire("The API did not accept your sign-in (HTTP 401). Sign in again.");
          throw sessionError();
        });
      });
    }
    return send(false);
  }

  function sessionError() {
    return new ApiError(401, "unauthorized", "Not signed in, or the session has ended: sign in again", null);
  }

  var UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB"];

  function formatBytes(n) {
    n = Number(n);
    if (!isFinite(n)) return "—";
    if (Math.abs(n) < 1024) return n.toLocaleString() + " B";
    var i = -1;
    do {
      n /= 1024;
      i++;
    } while (Math.abs(n) >= 1024 && i < UNITS.length - 1);
    return n.toFixed(n >= 100 ? 0 : 1) + " " + UNITS[i];
  }

  function formatNumber(n) {
    n = Number(n);
    return isFinite(n) ? n.toLocaleString() : "—";
  }

  function formatPercent(ratio) {
    if (!isFinite(ratio)) return "—";
    return (ratio * 100).toFixed(1) + " %";
  }

  var dateFmt = null;
  try {
    dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  } catch (e) {
    dateFmt = null;
  }

  /** Accepts ISO-8601 strings or epoch seconds / milliseconds. Returns a Date or null. */
  function parseDate(value) {
    if (value === null || value === undefined || value === "") return null;
    var d;
    if (typeof value === "number" || /^\d+(\.\d+)?$/.test(String(value))) {
      var num = Number(value);
      d = new Date(num < 1e12 ? num * 1000 : num);
    } else {
      d = new Date(String(value));
    }
    return isNaN(d.getTime()) ? null : d;
  }

  function formatDate(value) {
    var d = parseDate(value);
    if (!d) return value ? String(value) : "—";
    return dateFmt ? dateFmt.format(d) : d.toLocaleString();
  }

  var pendingAnnouncements = [];

  /**
   * Polite screen-reader announcement (and visible in the status line). Messages announced within the same
   * moment (before the region is updated) are read together, so a later one does not silently replace them.
   */
  function announce(message) {
    var region = document.getElementById("live-status");
    if (!region || !message) return;
    if (pendingAnnouncements.indexOf(message) === -1) pendingAnnouncements.push(message);
    if (pendingAnnouncements.length > 1) return; // already scheduled
    region.textContent = "";
    // Re-setting after a tick makes screen readers announce repeated messages too.
    window.setTimeout(function () {
      region.textContent = pendingAnnouncements.join(" ");
      pendingAnnouncements = [];
    }, 30);
  }

  /**
   * GET /download/{id} and start the download of the presigned URL. The URL carries Content-Disposition:
   * attachment, so navigating this page to it downloads the file and the page stays where it is. A plain link
   * is also shown in fallbackContainer in case the browser did not start the download.
   */
  function downloadFile(id, button, fallbackContainer) {
    if (button) {
      // aria-disabled, not disabled: a disabled button loses keyboard focus. A second click meanwhile is ignored.
      if (button.getAttribute("aria-busy") === "true") return Promise.resolve(null);
      button.setAttribute("aria-disabled", "true");
      button.setAttribute("aria-busy", "true");
    }
    if (fallbackContainer) {
      fallbackContainer.classList.remove("error-text");
      fallbackContainer.textContent = "Preparing download…";
    }
    return apiFetch("GET", "/download/" + encodeURIComponent(id))
      .then(function (res) {
        var given = res.body && res.body.download_url;
        if (!given) throw new Error("The API returned no download_url");
        // Only http(s): a javascript: or data: URL from a hostile or broken API must never be opened.
        var url = safeHttpUrl(given);
        if (!url) throw new Error("The API returned a download link that is not http(s); it was not opened");
        var name = res.body.filename || id;
        if (fallbackContainer) {
          fallbackContainer.textContent = "";
          var a = document.createElement("a");
          a.href = url;
          a.target = "_blank";
          a.rel = "noopener";
          a.setAttribute("data-testid", "download-link");
          a.textContent = "Not started? Open the link";
          fallbackContainer.appendChild(a);
        }
        window.DFD.navigatingToDownload = Date.now();
        window.location.assign(url);
        announce("Download started: " + name);
        return res.body;
      })
      .catch(function (err) {
        var msg =
          err && err.code === "not_ready"
            ? "Not ready yet: the file is still being processed."
            : "Download failed: " + describeError(err);
        if (fallbackContainer) {
          fallbackContainer.textContent = msg;
          fallbackContainer.classList.add("error-text");
        }
        announce(msg);
        return null;
      })
      .finally(function () {
        if (button) {
          button.removeAttribute("aria-disabled");
          button.removeAttribute("aria-busy");
        }
      });
  }

  /** Fills the footer with the API in use and shows config.js problems (in #config-error) on either page. */
  function initConfigInfo() {
    var footer = document.getElementById("api-base-footer");
    if (footer) footer.textContent = config.apiBase === null ? "(invalid in config.js)" : describeBase();
    var box = document.getElementById("config-error");
    if (box && config.errors.length) {
      box.textContent = config.errors.join(". ") + ".";
      box.hidden = false;
    }
  }

  window.DFD = {
    config: config,
    apiBase: apiBase,
    safeHttpUrl: safeHttpUrl,
    apiFetch: apiFetch,
    ApiError: ApiError,
    describeError: describeError,
    formatBytes: formatBytes,
    formatNumber: formatNumber,
    formatPercent: formatPercent,
    formatDate: formatDate,
    parseDate: parseDate,
    announce: announce,
    downloadFile: downloadFile,
    initConfigInfo: initConfigInfo,
  };
})();
