/*
 * "My uploads": the signed-in user's uploads, newest first (GET /uploads, paged with its opaque
 * token), each with a Delete button (DELETE /uploads/{id}, after a confirmation). Deleted uploads stay listed as
 * "deleted". The list loads when the page signs in (the <html data-auth> attribute js/auth.js sets), on
 * "Refresh", and again shortly after an upload in the Files list changes state.
 */
(function () {
  "use strict";
  var D = window.DFD;
  var PAGE = 20;
  var state = { token: null, loading: false, rows: 0 };

  function $(id) {
    return document.getElementById(id);
  }

  function cell(text, cls, label) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (label) td.setAttribute("data-label", label); // the column's name on a narrow screen (one card per row)
    return td;
  }

  function row(item) {
    var tr = document.createElement("tr");
    tr.setAttribute("data-testid", "my-upload");
    tr.setAttribute("data-upload-id", item.upload_id);
    tr.setAttribute("data-status", item.status || "");
    tr.appendChild(cell(item.filename || item.upload_id, "col-name"));
    tr.appendChild(cell(typeof item.size === "number" ? D.formatBytes(item.size) : "—", "num", "Size"));
    // a rejected upload (an object written with S3 credentials, refused) says why: too_large, quota_exceeded
    var status = (item.status || "") + (item.reason ? " (" + item.reason + ")" : "");
    tr.appendChild(cell(status, "status-" + (item.status || ""), "Status"));
    tr.appendChild(cell(D.formatDate(item.created_at), "col-date", "Uploaded"));
    var actions = document.createElement("td");
    actions.className = "col-actions";
    var name = item.filename || item.upload_id;
    if (item.status === "stored" || item.status === "duplicate") {
      var fallback = document.createElement("span");
      fallback.className = "download-fallback";
      fallback.setAttribute("data-testid", "my-upload-download-status");
      var get = document.createElement("button");
      get.type = "button";
      get.className = "btn btn-small";
      get.textContent = "Download";
      get.setAttribute("data-testid", "my-upload-download");
      get.setAttribute("aria-label", "Download " + name);
      get.addEventListener("click", function () {
        D.downloadFile(item.upload_id, get, fallback);
      });
      actions.appendChild(get);
      actions.appendChild(fallback);
    }
    if (item.status !== "deleted") {
      var btn = document.createElement("button");
      btn.type = "button";
      btn.className = "btn btn-small btn-secondary";
      btn.textContent = "Delete";
      btn.setAttribute("data-testid", "delete-upload");
      btn.setAttribute("aria-label", "Delete " + name);
      btn.addEventListener("click", function () {
        remove(item, btn);
      });
      actions.appendChild(btn);
    }
    tr.appendChild(actions);
    return tr;
  }

  function message(text) {
    var p = $("my-uploads-message");
    p.textContent = text || "";
    p.hidden = !text;
  }

  function load(more) {
    if (state.loading || !D.auth || !D.auth.isSignedIn()) return Promise.resolve();
    state.loading = true;
    var path = "/uploads?limit=" + PAGE;
    if (more && state.token) path += "&last_evaluated_key=" + encodeURIComponent(state.token);
    return D.apiFetch("GET", path)
      .then(function (res) {
        var body = res.body || {};
        var list = $("my-uploads-list");
        if (!more) {
          list.textContent = "";
          state.rows = 0;
        }
        (body.items || []).forEach(function (item) {
          list.appendChild(row(item));
          state.rows += 1;
        });
        state.token = body.last_evaluated_key || null;
        $("my-uploads-more").hidden = !state.token;
        $("my-uploads-empty").hidden = state.rows > 0;
        message("");
      })
      .catch(function (err) {
        message("Could not list your uploads: " + err.message);
      })
      .finally(function () {
        state.loading = false;
      });
  }

  function remove(item, btn) {
    var name = item.filename || item.upload_id;
    if (!window.confirm("Delete " + name + "? Its file can no longer be downloaded through this upload.")) return;
    btn.disabled = true;
    D.apiFetch("DELETE", "/uploads/" + encodeURIComponent(item.upload_id))
      .then(function () {
        D.announce(name + " deleted.");
        return load(false);
      })
      .catch(function (err) {
        btn.disabled = false;
        message("Could not delete " + name + ": " + err.message);
      });
  }

  function init() {
    if (!$("my-uploads")) return;
    $("my-uploads-refresh").addEventListener("click", function () {
      load(false);
    });
    $("my-uploads-more").addEventListener("click", function () {
      load(true);
    });
    var root = document.documentElement;
    new MutationObserver(function () {
      if (root.getAttribute("data-auth") === "signed-in") load(false);
    }).observe(root, { attributes: true, attributeFilter: ["data-auth"] });
    if (root.getAttribute("data-auth") === "signed-in") load(false);
    var files = $("file-list");
    var timer = null;
    if (files) {
      new MutationObserver(function () {
        window.clearTimeout(timer);
        timer = window.setTimeout(function () {
          load(false);
        }, 1500);
      }).observe(files, { subtree: true, attributes: true, attributeFilter: ["data-status"] });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
