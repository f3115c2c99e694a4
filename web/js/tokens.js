/*
 * "Git LFS tokens": the signed-in user's personal access tokens (POST/GET/DELETE /me/tokens), for git's
 * credential helper (README "Use dfd as your Git LFS server"). A new token's secret is shown once, with the
 * git config lines that use it; the list never has secrets. Needs only the #lfs-tokens markup block of
 * index.html and js/common.js (window.DFD.apiFetch); loads when the page signs in (<html data-auth>).
 */
(function () {
  "use strict";
  var D = window.DFD;

  function $(id) {
    return document.getElementById(id);
  }

  function message(text) {
    var p = $("lfs-tokens-message");
    p.textContent = text || "";
    p.hidden = !text;
  }

  function row(token) {
    var li = document.createElement("li");
    li.className = "token-row";
    li.setAttribute("data-testid", "lfs-token");
    li.setAttribute("data-token-id", token.id);
    var text = document.createElement("span");
    text.textContent = token.name + " — expires " + D.formatDate(token.expires_at);
    li.appendChild(text);
    var btn = document.createElement("button");
    btn.type = "button";
    btn.className = "btn btn-small btn-secondary";
    btn.textContent = "Revoke";
    btn.setAttribute("aria-label", "Revoke " + token.name);
    btn.setAttribute("data-testid", "lfs-token-revoke");
    btn.addEventListener("click", function () {
      if (!window.confirm("Revoke " + token.name + "? git stops accepting it at once.")) return;
      btn.disabled = true;
      D.apiFetch("DELETE", "/me/tokens/" + encodeURIComponent(token.id))
        .then(function () {
          D.announce(token.name + " revoked.");
          return load();
        })
        .catch(function (err) {
          btn.disabled = false;
          message("Could not revoke " + token.name + ": " + err.message);
        });
    });
    li.appendChild(btn);
    return li;
  }

  function load() {
    if (!D.auth || !D.auth.isSignedIn()) return Promise.resolve();
    return D.apiFetch("GET", "/me/tokens")
      .then(function (res) {
        var list = $("lfs-tokens-list");
        list.textContent = "";
        var tokens = (res.body && res.body.tokens) || [];
        tokens.forEach(function (token) {
          list.appendChild(row(token));
        });
        $("lfs-tokens-empty").hidden = tokens.length > 0;
      })
      .catch(function (err) {
        message("Could not list your tokens: " + err.message);
      });
  }

  function showSecret(created) {
    var api = D.apiBase() || window.location.origin;
    $("lfs-token-secret").textContent = created.token;
    $("lfs-token-config").textContent =
      "git config lfs.url " + api + "/lfs/<repo>\n" +
      "printf 'url=%s\\nusername=git\\npassword=%s\\n\\n' " + api + " " + created.token + " | git credential approve";
    $("lfs-token-new").hidden = false;
  }

  function create(event) {
    event.preventDefault();
    var name = $("lfs-token-name").value.trim();
    var days = parseInt($("lfs-token-days").value, 10);
    if (!name) {
      message("Give the token a name (where it is used: laptop, CI...).");
      return;
    }
    var submit = $("lfs-token-create");
    submit.disabled = true;
    D.apiFetch("POST", "/me/tokens", { name: name, expires_in_days: days })
      .then(function (res) {
        message("");
        showSecret(res.body);
        $("lfs-token-name").value = "";
        return load();
      })
      .catch(function (err) {
        message("Could not create the token: " + err.message);
      })
      .finally(function () {
        submit.disabled = false;
      });
  }

  function init() {
    if (!$("lfs-tokens")) return;
    $("lfs-token-form").addEventListener("submit", create);
    var root = document.documentElement;
    new MutationObserver(function () {
      if (root.getAttribute("data-auth") === "signed-in") load();
      else $("lfs-token-new").hidden = true; // a secret never outlives the session that made it
    }).observe(root, { attributes: true, attributeFilter: ["data-auth"] });
    if (root.getAttribute("data-auth") === "signed-in") load();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
