/* dfd web — upload page.
 *
 * Per file:  hash (SHA-256 in a Web Worker, streamed in chunks)  →  POST /upload {filename,size,content_type,sha256}
 *   409 duplicate → "already stored — 0 bytes uploaded" (done, nothing sent)
 *   201           → PUT the bytes to the presigned URL with exactly the returned headers (XHR, for progress)
 *                   → poll GET /metadata/{upload_id} until stored | duplicate (backoff, give up after 60 s)
 *   201 multipart → (js/multipart.js) the parts, PARTS_IN_FLIGHT at a time, each with its SHA-256, then
 *                   POST /uploads/{id}/complete, then the same polling. The upload's id and the file's identity are
 *                   kept in IndexedDB until it completes: choosing the same file again (after a reload, a crash, a
 *                   sign-out) continues from GET /uploads/{id}/parts and sends only the missing parts. The row gets
 *                   Pause/Resume and Cancel buttons.
 * At most CONCURRENCY files are hashed/uploaded at the same time; polling does not hold a slot.
 * Row data-status: queued | hashing | uploading | paused | processing | stored | duplicate | cancelled | error
 */
(function () {
  "use strict";

  var D = window.DFD;
  var MP = D.multipart;
  var CONCURRENCY = 3;
  var CHUNK_SIZE = 4 * 1024 * 1024;
  var POLL_TIMEOUT_MS = 60000;
  var POLL_FIRST_DELAY_MS = 400;
  var POLL_MAX_DELAY_MS = 4000;
  var POLL_MS_PER_BYTE = 1000 / (32 * 1024 * 1024); // a multipart object is hashed by the ingest: 1 s more per 32 MiB

  // Headers a page may not set on XMLHttpRequest (Fetch "forbidden request-header" list). The browser sets
  // content-length itself from the body, which is the size the URL was signed for.
  var FORBIDDEN_HEADERS = [
    "accept-charset", "accept-encoding", "access-control-request-headers", "access-control-request-method",
    "connection", "content-length", "cookie", "cookie2", "date", "dnt", "expect", "host", "keep-alive", "origin",
    "referer", "set-cookie", "te", "trailer", "transfer-encoding", "upgrade", "via",
  ];

  var STATUS_LABELS = {
    queued: "Queued",
    hashing: "Hashing",
    uploading: "Uploading",
    paused: "Paused",
    processing: "Processing",
    stored: "Stored",
    duplicate: "Duplicate",
    cancelled: "Cancelled",
    error: "Error",
  };

  var items = [];
  var queue = [];
  var active = 0;
  var nextId = 1;
  var currentUser = ""; // the signed-in user's name ("" without sign-in): resume records are this user's only

  var listEl, emptyEl, overallEl, summaryEl, clearBtn, noticeEl, resumeNoticeEl;

  // ---------------------------------------------------------------- helpers

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) return;
        if (k === "text") node.textContent = v;
        else if (k === "className") node.className = v;
        else node.setAttribute(k, v === true ? "" : String(v));
      });
    }
    (children || []).forEach(function (c) {
      if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function sleep(ms) {
    return new Promise(function (resolve) {
      window.setTimeout(resolve, ms);
    });
  }

  function isForbiddenHeader(name) {
    var n = String(name).toLowerCase();
    return FORBIDDEN_HEADERS.indexOf(n) !== -1 || n.indexOf("proxy-") === 0 || n.indexOf("sec-") === 0;
  }

  function UploadError(message, retryPhase, extra) {
    this.name = "UploadError";
    this.message = message;
    this.retryPhase = retryPhase || "start"; // "start" = re-POST (re-hash if needed), "poll" = poll again
    this.rehash = !!(extra && extra.rehash);
  }
  UploadError.prototype = Object.create(Error.prototype);

  /**
   * The API refused the file itself (400 validation error, e.g. an empty file; 413 too large; 422): the same
   * request would get the same answer, so no Retry is offered. Network errors, 5xx, 429, 408, 409 and expired
   * URLs stay retryable.
   */
  function isPermanent(err) {
    return err instanceof D.ApiError && (err.status === 400 || err.status === 413 || err.status === 422);
  }

  function errorMessage(err) {
    return D.describeError(err);
  }

  // ---------------------------------------------------------------- rendering

  function createRow(item) {
    // A file from a folder shows its relative path, the folder part muted; only the base name is sent to the API.
    var slash = item.path.lastIndexOf("/");
    item.nameEl = el("span", { className: "file-name", title: item.path, tabindex: "-1" }, [
      slash > 0 ? el("span", { className: "file-dir", text: item.path.slice(0, slash + 1) }) : null,
      item.path.slice(slash + 1),
    ]);
    item.badgeEl = el("span", { className: "badge", "data-testid": "file-status", text: STATUS_LABELS.queued });
    item.progressEl = el("progress", {
      max: "100",
      value: "0",
      "data-testid": "file-progress",
      "aria-label": "Progress for " + item.path,
    });
    item.detailEl = el("p", { className: "file-detail muted", "data-testid": "file-detail", text: "Waiting…" });
    item.controlsEl = el("div", { className: "file-controls", "data-testid": "file-controls", hidden: true });
    item.resultEl = el("div", { className: "file-result", "data-testid": "file-result" });
    item.row = el(
      "li",
      {
        className: "file-row",
        "data-testid": "file-row",
        "data-status": "queued",
        "data-file-name": item.path,
        "data-uploaded-bytes": "0",
      },
      [
        el("div", { className: "file-head" }, [
          item.nameEl,
          el("span", { className: "file-size", text: D.formatBytes(item.size) }),
          item.badgeEl,
        ]),
        item.progressEl,
        item.detailEl,
        item.controlsEl,
        item.resultEl,
      ]
    );
    listEl.appendChild(item.row);
  }

  function setStatus(item, status, detail) {
    if (item.cancelled && status !== "cancelled") return; // a cancelled file's pipeline winds down silently
    item.status = status;
    item.row.setAttribute("data-status", status);
    item.row.className = "file-row status-" + status;
    item.badgeEl.textContent = STATUS_LABELS[status] || status;
    if (detail !== undefined) item.detailEl.textContent = detail;
    if (status === "hashing") item.progressEl.setAttribute("aria-label", "Hashing " + item.path);
    if (status === "uploading") item.progressEl.setAttribute("aria-label", "Uploading " + item.path);
    if (status === "paused") item.progressEl.setAttribute("aria-label", "Paused: " + item.path);
    if (status === "cancelled") item.progressEl.setAttribute("aria-label", "Cancelled: " + item.path);
    if (status === "processing" || status === "stored" || status === "duplicate") {
      item.progressEl.setAttribute("aria-label", "Progress for " + item.path);
      item.progressEl.value = 100;
    }
    if (status !== "error") {
      item.fraction = computeFraction(item);
    }
    updateOverall();
  }

  function computeFraction(item) {
    var size = Math.max(item.size, 1);
    switch (item.status) {
      case "hashing":
        return 0.5 * Math.min(item.hashed / size, 1);
      case "uploading":
      case "paused":
        return 0.5 + 0.45 * Math.min(item.uploaded / size, 1);
      case "processing":
        return 0.95;
      case "stored":
      case "duplicate":
        return 1;
      case "error":
        return item.fraction || 0;
      default:
        return 0;
    }
  }

  var renderPending = false;
  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    window.setTimeout(function () {
      renderPending = false;
      items.forEach(function (item) {
        if (!item.dirty) return;
        item.dirty = false;
        renderProgress(item);
      });
      updateOverall();
    }, 100);
  }

  function renderProgress(item) {
    var size = Math.max(item.size, 1);
    if (item.status === "hashing") {
      var hp = Math.min(item.hashed / size, 1) * 100;
      item.progressEl.value = hp;
      item.detailEl.textContent = "Computing SHA-256… " + hp.toFixed(0) + " %";
    } else if ((item.status === "uploading" || item.status === "paused") && !item.completing) {
      var up = Math.min(item.uploaded / size, 1) * 100;
      item.progressEl.value = up;
      var elapsed = (Date.now() - item.putStartedAt) / 1000;
      var sent = item.uploaded - (item.uploadedAtStart || 0);
      var rate = elapsed > 0.5 && item.status === "uploading" ? sent / elapsed : 0;
      var text = (item.status === "paused" ? "Paused at " : "Uploading ") + D.formatBytes(item.uploaded) + " of " +
        D.formatBytes(item.size);
      if (item.mp) {
        text += " · part" + (item.mp.partCount === 1 ? " " : "s ") + item.partsDone + " of " + item.mp.partCount + " done";
        item.row.setAttribute("data-parts-done", String(item.partsDone));
        item.row.setAttribute("data-sent-bytes", String(item.sentBytes || 0));
      }
      if (rate > 0) text += " · " + D.formatBytes(rate) + "/s";
      if (item.note && item.status === "uploading") text += " · " + item.note;
      item.detailEl.textContent = text;
      item.row.setAttribute("data-uploaded-bytes", String(item.uploaded));
    }
    item.fraction = computeFraction(item);
  }

  function updateOverall() {
    var counts = {
      queued: 0, hashing: 0, uploading: 0, paused: 0, processing: 0, stored: 0, duplicate: 0, cancelled: 0, error: 0,
    };
    var total = 0;
    var done = 0;
    var uploadedBytes = 0;
    var savedBytes = 0;
    items.forEach(function (item) {
      counts[item.status] = (counts[item.status] || 0) + 1;
      if (item.status === "cancelled") return; // not part of the overall progress any more
      var w = Math.max(item.size, 1);
      total += w;
      done += w * (item.status === "error" ? item.fraction || 0 : computeFraction(item));
      uploadedBytes += item.uploaded;
      if (item.status === "duplicate") savedBytes += item.size;
    });
    var pct = total > 0 ? (done / total) * 100 : 0;
    overallEl.value = pct;
    overallEl.setAttribute("aria-valuetext", pct.toFixed(0) + " percent");
    var finished = counts.stored + counts.duplicate;
    var counted = items.length - counts.cancelled;
    overallEl.setAttribute("data-total", String(counted));
    overallEl.setAttribute("data-finished", String(finished));
    overallEl.setAttribute("data-failed", String(counts.error));
    var inFlight = counts.queued + counts.hashing + counts.uploading + counts.processing;
    if (items.length === 0) {
      summaryEl.textContent = "No files yet.";
    } else {
      var parts = [
        finished + " of " + counted + " file" + (counted === 1 ? "" : "s") + " done",
        counts.stored + " stored",
        counts.duplicate + " duplicate" + (counts.duplicate === 1 ? "" : "s"),
      ];
      if (counts.error) parts.push(counts.error + " failed");
      if (inFlight) parts.push(inFlight + " in progress");
      if (counts.paused) parts.push(counts.paused + " paused");
      if (counts.cancelled) parts.push(counts.cancelled + " cancelled");
      parts.push(D.formatBytes(uploadedBytes) + " uploaded");
      if (savedBytes) parts.push(D.formatBytes(savedBytes) + " deduplicated");
      summaryEl.textContent = parts.join(" · ");
    }
    emptyEl.hidden = items.length > 0;
    clearBtn.disabled = counts.stored + counts.duplicate + counts.error + counts.cancelled === 0;
  }

  function showResult(item, heading, file) {
    var hash = (file && file.hash) || item.hash || "";
    var size = file && file.size !== undefined ? file.size : item.size;
    var fallback = el("span", { className: "download-fallback", "data-testid": "file-download-status" });
    var btn = el("button", { type: "button", className: "btn btn-small", "data-testid": "file-download" }, [
      "Download",
      el("span", { className: "visually-hidden", text: " " + item.path }),
    ]);
    var downloadId = item.uploadId || hash;
    btn.addEventListener("click", function () {
      D.downloadFile(downloadId, btn, fallback);
    });
    var dl = el("dl", { className: "result-list" }, [
      el("dt", { text: "SHA-256" }),
      el("dd", {}, [el("code", { className: "hash", "data-testid": "file-hash", text: hash })]),
      el("dt", { text: "Size" }),
      el("dd", { text: D.formatBytes(size) + " (" + D.formatNumber(size) + " bytes)" }),
    ]);
    if (file && file.filename && file.filename !== item.file.name) {
      dl.appendChild(el("dt", { text: "Stored as" }));
      dl.appendChild(el("dd", { text: file.filename }));
    }
    if (file && file.upload_count !== undefined) {
      dl.appendChild(el("dt", { text: "Uploads of this content" }));
      dl.appendChild(el("dd", { text: D.formatNumber(file.upload_count) }));
    }
    if (file && file.created_at) {
      dl.appendChild(el("dt", { text: "First stored" }));
      dl.appendChild(el("dd", { text: D.formatDate(file.created_at) }));
    }
    item.resultEl.textContent = "";
    item.resultEl.appendChild(el("p", { className: "result-heading", text: heading }));
    item.resultEl.appendChild(dl);
    item.resultEl.appendChild(el("div", { className: "result-actions" }, [btn, fallback]));
  }

  // ---------------------------------------------------------------- pipeline

  function addFiles(entries) {
    if (!D.auth.isSignedIn()) return; // the pickers are hidden then; a drop anywhere on the page is ignored
    entries.forEach(function (entry) {
      var item = {
        id: nextId++,
        file: entry.file,
        path: entry.path || entry.file.name,
        size: entry.file.size,
        status: "queued",
        hash: null,
        hashed: 0,
        uploaded: 0,
        uploadId: null,
        fraction: 0,
        pollToken: 0,
        dirty: false,
      };
      items.push(item);
      createRow(item);
      queue.push(item);
    });
    updateOverall();
    if (entries.length) {
      D.announce(entries.length + " file" + (entries.length === 1 ? "" : "s") + " added.");
    }
    pump();
  }

  function pump() {
    while (active < CONCURRENCY && queue.length) {
      var item = queue.shift();
      active++;
      run(item).then(release, release);
    }
  }

  function release() {
    active--;
    pump();
  }

  /**
   * Hashing, precheck and PUT (or the parts of a multipart upload, and its completion), holding a concurrency slot;
   * then starts polling (which does not). A file with a resume record continues its multipart upload instead.
   */
  function run(item) {
    return (async function () {
      try {
        for (var round = 1; ; round++) {
          try {
            if (!(await resumeFromRecord(item))) {
              if (item.cancelled) return;
              if (!(await startUpload(item))) return; // done (precheck duplicate) or cancelled
            }
            if (item.cancelled) return;
            if (item.mp) await uploadParts(item);
            break;
          } catch (err) {
            // The server no longer has this multipart upload (expired, aborted elsewhere): start over once.
            if (!(err instanceof MP.MultipartError) || err.kind !== "gone" || round > 1 || item.cancelled) throw err;
            await forgetRecord(item);
            resetUpload(item);
            D.announce(item.path + ": the unfinished upload had expired on the server; starting over.");
          }
        }
      } catch (err) {
        if (item.cancelled) return;
        if (err instanceof MP.MultipartError && (err.kind === "gone" || err.kind === "changed")) {
          await forgetRecord(item); // a Retry starts over (and hashes again if the file changed)
          if (err.kind === "changed") err.rehash = true;
        }
        fail(item, err);
        return;
      }
      if (item.cancelled) return;
      poll(item); // outside the concurrency slot
    })();
  }

  /** Hash (if needed), POST /upload, and the single PUT; a multipart answer sets item.mp for uploadParts().
   * Resolves true when there is more to do (upload the parts, or poll), false when the file is done. */
  async function startUpload(item) {
    if (!item.hash) {
      item.hashed = 0;
      setStatus(item, "hashing", "Computing SHA-256…");
      item.hash = await hashFile(item);
      if (item.cancelled) return false;
    }
    setStatus(item, "uploading", "Checking whether this content is already stored…");
    item.row.setAttribute("data-sha256", item.hash);
    var body = { filename: item.file.name, size: item.size, sha256: item.hash };
    if (item.file.type) body.content_type = item.file.type;
    var res;
    try {
      res = await D.apiFetch("POST", "/upload", body);
    } catch (err) {
      if (item.cancelled) return false;
      if (err instanceof D.ApiError && err.status === 409 && err.body && err.body.duplicate) {
        finishPrecheckDuplicate(item, err.body.file || {});
        return false;
      }
      throw err;
    }
    var up = res.body || {};
    if (up.multipart === true) {
      if (item.cancelled) {
        if (up.upload_id) MP.abortUpload(up.upload_id).catch(function () {}); // created meanwhile: not needed
        return false;
      }
      return startMultipart(item, up);
    }
    if (item.cancelled) return false;
    if (!up.upload_url || !up.upload_id) {
      throw new UploadError("The API returned no upload URL.", "start");
    }
    if (!D.safeHttpUrl(up.upload_url)) {
      throw new UploadError("The API returned an upload URL that is not http(s); nothing was sent.", "start");
    }
    item.uploadId = up.upload_id;
    item.row.setAttribute("data-upload-id", up.upload_id);
    item.expiresAt = up.expires_at ? D.parseDate(up.expires_at) : null;
    var outcome = await putFile(item, up);
    if (item.cancelled) return false;
    setStatus(
      item,
      "processing",
      outcome === "exists"
        ? "Already uploaded (HTTP 412): waiting for processing…"
        : "Uploaded " + D.formatBytes(item.size) + ": waiting for processing…"
    );
    return true;
  }

  /** The part layout of an upload as the server gives it, checked against the file; null if it does not fit. */
  function partLayout(size, partSize, partCount) {
    partSize = Number(partSize);
    partCount = Number(partCount);
    if (!(partSize > 0) || !(partCount >= 1) || Math.floor(partCount) !== partCount) return null;
    if ((partCount - 1) * partSize >= Math.max(size, 1) || partCount * partSize < size) return null;
    return { partSize: partSize, partCount: partCount };
  }

  async function startMultipart(item, up) {
    var layout = partLayout(item.size, up.part_size, up.part_count);
    if (!up.upload_id || !layout) {
      throw new UploadError("The API's multipart answer has no upload id or a part layout that does not fit the file.", "start");
    }
    item.uploadId = up.upload_id;
    item.row.setAttribute("data-upload-id", up.upload_id);
    item.mp = { uploadId: up.upload_id, partSize: layout.partSize, partCount: layout.partCount, done: [] };
    item.resume = {
      key: MP.store.key(currentUser, item.file),
      user: currentUser,
      upload_id: up.upload_id,
      name: item.file.name,
      size: item.size,
      lastModified: item.file.lastModified,
      sha256: item.hash,
      part_size: layout.partSize,
      part_count: layout.partCount,
      expires_at: up.expires_at || null,
      created_at: Date.now(),
    };
    await MP.store.put(item.resume);
    return true;
  }

  /**
   * A resume record for this file (this page's, or IndexedDB's from an earlier visit): ask the server what it
   * holds and set item.mp to continue. Resolves false when there is nothing to resume (an expired or unknown
   * upload is forgotten, and the user told).
   */
  async function resumeFromRecord(item) {
    var rec = item.resume || (await MP.store.get(currentUser, item.file));
    if (!rec || item.cancelled) return false;
    item.resume = rec;
    if (!item.hash && rec.sha256) item.hash = rec.sha256; // the file is the same (name, size, lastModified)
    if (item.hash) item.row.setAttribute("data-sha256", item.hash);
    setStatus(item, "uploading", "Checking the unfinished upload of this file on the server…");
    var info;
    try {
      info = await MP.listParts(rec.upload_id);
    } catch (err) {
      if (!MP.isGone(err)) throw err; // offline, 5xx: the record stays, Retry asks again
      info = null;
    }
    if (item.cancelled) return false;
    var layout = info && partLayout(item.size, info.part_size || rec.part_size, info.part_count || rec.part_count);
    var fits = layout && (info.size === undefined || Number(info.size) === item.size) &&
      (!info.status || info.status === "pending");
    if (!fits) {
      await forgetRecord(item);
      var msg = item.path + ": the earlier unfinished upload of this file is no longer on the server (expired or " +
        "unknown), so it starts over.";
      showNotice(msg, false, true);
      D.announce(msg);
      return false;
    }
    var done = (info.parts || []).filter(function (p) {
      var n = Number(p.part_number);
      return n >= 1 && n <= layout.partCount && Number(p.size) === MP.partBytes(item.size, layout.partSize, layout.partCount, n);
    });
    item.uploadId = rec.upload_id;
    item.row.setAttribute("data-upload-id", rec.upload_id);
    item.row.setAttribute("data-resumed", "true");
    item.mp = { uploadId: rec.upload_id, partSize: layout.partSize, partCount: layout.partCount, done: done };
    D.announce(
      item.path + ": continuing the unfinished upload, " + done.length + " of " + layout.partCount + " parts already uploaded."
    );
    return true;
  }

  function forgetRecord(item) {
    var rec = item.resume;
    item.resume = null;
    return rec ? MP.store.remove(rec.key).then(refreshResumeNotice) : Promise.resolve();
  }

  function resetUpload(item) {
    item.mp = null;
    item.transfer = null;
    item.uploadId = null;
    item.uploaded = 0;
    item.sentBytes = 0;
    item.row.removeAttribute("data-upload-id");
    item.row.removeAttribute("data-resumed");
    item.row.setAttribute("data-uploaded-bytes", "0");
    showControls(item, false);
  }

  /** Sends the parts that are missing, then completes: resolves when the server accepted the completion. */
  async function uploadParts(item) {
    var mp = item.mp;
    item.row.setAttribute("data-multipart", "true");
    item.row.setAttribute("data-part-count", String(mp.partCount));
    item.row.setAttribute("data-part-size", String(mp.partSize));
    item.sentBytes = item.sentBytes || 0;
    showControls(item, true);
    for (var round = 1; ; round++) {
      var sentBefore = item.sentBytes;
      var transfer = new MP.Transfer({
        file: item.file,
        uploadId: mp.uploadId,
        partSize: mp.partSize,
        partCount: mp.partCount,
        done: mp.done,
        onProgress: function (t) {
          if (item.transfer !== t) return;
          item.uploaded = t.bytes();
          item.partsDone = t.doneCount();
          item.sentBytes = sentBefore + t.sentBytes;
          if (t.sentBytes && item.note) item.note = "";
          item.dirty = true;
          scheduleRender();
        },
        onNote: function (text) {
          item.note = text;
          item.dirty = true;
          scheduleRender();
        },
      });
      item.transfer = transfer;
      item.partsDone = transfer.doneCount();
      item.uploaded = transfer.doneBytes();
      item.uploadedAtStart = item.uploaded;
      item.putStartedAt = Date.now();
      item.note = "";
      if (item.paused) transfer.paused = true;
      setStatus(item, item.paused ? "paused" : "uploading", "");
      renderProgress(item);
      var parts = await transfer.start();
      item.transfer = null;
      if (item.cancelled) return;
      item.completing = true;
      showControls(item, false); // completing cannot be paused; it is one short request
      item.progressEl.value = 100;
      setStatus(item, "uploading", "Completing the upload (" + mp.partCount + " parts)…");
      try {
        await MP.complete(mp.uploadId, parts, function (text) {
          item.detailEl.textContent = text;
        });
        break;
      } catch (err) {
        item.completing = false;
        if (!(err && err.incomplete) || round >= 3) {
          throw err && err.incomplete ? new MP.MultipartError("failed", err.message) : err;
        }
        // the server misses some parts (or has them with the wrong size): send those again
        mp.done = transfer.parts
          .filter(function (p) {
            return p.state === "done" && err.incomplete.indexOf(p.n) === -1;
          })
          .map(function (p) {
            return { part_number: p.n, etag: p.etag, size: p.size };
          });
        showControls(item, true);
      }
    }
    item.completing = false;
    await forgetRecord(item);
    item.uploaded = item.size;
    item.row.setAttribute("data-uploaded-bytes", String(item.size));
    item.row.setAttribute("data-parts-done", String(mp.partCount));
    item.row.setAttribute("data-sent-bytes", String(item.sentBytes));
    setStatus(
      item,
      "processing",
      "Uploaded " + D.formatBytes(item.size) + " in " + mp.partCount + " parts" +
        (item.sentBytes < item.size ? " (" + D.formatBytes(item.sentBytes) + " sent now, the rest earlier)" : "") +
        ": waiting for processing…"
    );
  }

  // ---------------------------------------------------------------- pause, resume, cancel (multipart rows)

  function controlButton(label, testid, item, onClick) {
    var btn = el("button", { type: "button", className: "btn btn-small btn-secondary", "data-testid": testid }, [
      label,
      el("span", { className: "visually-hidden", text: " " + item.path }),
    ]);
    btn.addEventListener("click", function () {
      onClick(item);
    });
    return btn;
  }

  function showControls(item, visible) {
    if (!visible) {
      if (item.controlsEl.contains(document.activeElement)) item.nameEl.focus();
      item.controlsEl.hidden = true;
      return;
    }
    if (!item.pauseBtn) {
      item.pauseBtn = controlButton("Pause", "file-pause", item, pauseItem);
      item.resumeBtn = controlButton("Resume", "file-resume", item, resumeItem);
      item.cancelBtn = controlButton("Cancel", "file-cancel", item, cancelItem);
      item.controlsEl.appendChild(item.pauseBtn);
      item.controlsEl.appendChild(item.resumeBtn);
      item.controlsEl.appendChild(item.cancelBtn);
    }
    item.pauseBtn.hidden = !!item.paused;
    item.resumeBtn.hidden = !item.paused;
    item.controlsEl.hidden = false;
  }

  function pauseItem(item) {
    if (item.paused || item.cancelled || item.completing) return;
    var hadFocus = item.pauseBtn === document.activeElement;
    item.paused = true;
    if (item.transfer) {
      item.transfer.pause(); // the parts in flight stop; their bytes are sent again on resume
      item.uploaded = item.transfer.doneBytes();
    }
    showControls(item, true);
    if (hadFocus) item.resumeBtn.focus();
    setStatus(item, "paused", "");
    renderProgress(item);
    D.announce(item.path + ": paused at " + Math.floor((item.uploaded / Math.max(item.size, 1)) * 100) + " percent.");
  }

  function resumeItem(item) {
    if (!item.paused || item.cancelled) return;
    var hadFocus = item.resumeBtn === document.activeElement;
    item.paused = false;
    item.putStartedAt = Date.now();
    item.uploadedAtStart = item.uploaded;
    if (item.transfer) item.transfer.resume();
    showControls(item, true);
    if (hadFocus) item.pauseBtn.focus();
    setStatus(item, "uploading", "");
    renderProgress(item);
    D.announce(item.path + ": resumed.");
  }

  /** Stops the parts in flight, asks the server to abort the upload (DELETE), forgets the resume record. */
  function cancelItem(item) {
    if (item.cancelled) return;
    item.cancelled = true;
    item.pollToken++;
    if (item.transfer) item.transfer.stop();
    if (item.worker) {
      item.worker.terminate();
      item.worker = null;
      if (item.hashReject) item.hashReject(new UploadError("Cancelled.", "start"));
    }
    if (item.xhr) item.xhr.abort();
    showControls(item, false);
    item.nameEl.focus();
    var uploadId = item.uploadId;
    forgetRecord(item);
    setStatus(item, "cancelled", uploadId ? "Cancelled. Removing the partial upload from the server…" : "Cancelled.");
    item.progressEl.value = 0;
    if (!uploadId) {
      D.announce(item.path + ": cancelled.");
      return;
    }
    MP.abortUpload(uploadId).then(
      function (outcome) {
        var text =
          outcome === "aborted"
            ? "Cancelled. The partial upload was removed from the server."
            : "Cancelled. The server removes the partial upload when it expires.";
        item.detailEl.textContent = text;
        D.announce(item.path + ": " + text);
      },
      function (err) {
        var text = "Cancelled. The server could not be told (" + D.describeError(err) + "); it removes the partial " +
          "upload when it expires.";
        item.detailEl.textContent = text;
        D.announce(item.path + ": " + text);
      }
    );
  }

  /** Tells the user which files from an earlier visit can continue (choosing them again resumes them). */
  function refreshResumeNotice() {
    if (!resumeNoticeEl) return Promise.resolve();
    var user = currentUser;
    return MP.store.list(user).then(function (records) {
      if (user !== currentUser) return;
      var active = {};
      items.forEach(function (item) {
        if (item.resume) active[item.resume.key] = true;
      });
      var waiting = records.filter(function (rec) {
        return !active[rec.key];
      });
      resumeNoticeEl.hidden = waiting.length === 0;
      resumeNoticeEl.textContent = waiting.length
        ? "Unfinished upload" + (waiting.length === 1 ? "" : "s") + " from an earlier visit: " +
          waiting
            .map(function (rec) {
              return rec.name + " (" + D.formatBytes(rec.size) + ")";
            })
            .join(", ") +
          ". Choose the same file again to continue where it stopped."
        : "";
    });
  }

  function hashFile(item) {
    return new Promise(function (resolve, reject) {
      var worker;
      try {
        worker = new Worker("js/hash-worker.js");
      } catch (e) {
        reject(new UploadError("Could not start the hashing worker: " + (e.message || e), "start"));
        return;
      }
      item.worker = worker;
      item.hashReject = reject; // a cancelled item's worker is terminated: its promise is settled here
      worker.onmessage = function (ev) {
        var msg = ev.data || {};
        if (msg.type === "progress") {
          item.hashed = msg.loaded;
          item.dirty = true;
          scheduleRender();
        } else if (msg.type === "done") {
          worker.terminate();
          item.worker = null;
          item.hashed = item.size;
          resolve(msg.hash);
        } else if (msg.type === "error") {
          worker.terminate();
          item.worker = null;
          reject(new UploadError("Could not read the file to hash it: " + msg.message, "start", { rehash: true }));
        }
      };
      worker.onerror = function (ev) {
        ev.preventDefault();
        worker.terminate();
        item.worker = null;
        reject(new UploadError("Hashing worker failed: " + (ev.message || "unknown error"), "start", { rehash: true }));
      };
      worker.postMessage({ file: item.file, chunkSize: CHUNK_SIZE });
    });
  }

  function parseS3Error(xhr) {
    var code = "";
    var message = "";
    var text = "";
    try {
      text = xhr.responseText || "";
    } catch (e) {
      text = "";
    }
    if (text && text.indexOf("<") !== -1) {
      try {
        var doc = new DOMParser().parseFromString(text, "application/xml");
        var c = doc.getElementsByTagName("Code")[0];
        var m = doc.getElementsByTagName("Message")[0];
        code = c ? c.textContent : "";
        message = m ? m.textContent : "";
      } catch (e) {
        /* not XML */
      }
    }
    return { code: code, message: message };
  }

  /** PUT the file with exactly the returned headers. Resolves "ok" or "exists" (412); rejects UploadError. */
  function putFile(item, up) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      item.xhr = xhr;
      item.uploaded = 0;
      item.putStartedAt = Date.now();
      setStatus(item, "uploading", "Uploading…");
      try {
        xhr.open(up.method || "PUT", up.upload_url, true);
        var headers = up.headers || {};
        Object.keys(headers).forEach(function (name) {
          if (isForbiddenHeader(name)) return; // e.g. content-length: the browser sets it from the body
          xhr.setRequestHeader(name, String(headers[name]));
        });
      } catch (e) {
        item.xhr = null;
        reject(new UploadError("Could not prepare the upload request: " + (e.message || e), "start"));
        return;
      }
      xhr.upload.onprogress = function (ev) {
        item.uploaded = ev.loaded;
        item.dirty = true;
        scheduleRender();
      };
      xhr.onload = function () {
        item.xhr = null;
        var status = xhr.status;
        if (status >= 200 && status < 300) {
          item.uploaded = item.size;
          item.row.setAttribute("data-uploaded-bytes", String(item.size));
          resolve("ok");
          return;
        }
        if (status === 412) {
          // If-None-Match: * failed: this upload's object already exists (an earlier attempt landed).
          item.uploaded = item.size;
          resolve("exists");
          return;
        }
        var s3 = parseS3Error(xhr);
        var expired =
          /expired/i.test(s3.message) ||
          s3.code === "ExpiredToken" ||
          s3.code === "RequestExpired" ||
          (status === 403 && item.expiresAt && Date.now() > item.expiresAt.getTime());
        if (status === 403 && expired) {
          reject(new UploadError("The upload URL expired before the upload finished. Retry requests a new one.", "start"));
          return;
        }
        if (s3.code === "BadDigest" || /checksum/i.test(s3.code + " " + s3.message)) {
          reject(
            new UploadError(
              "The file changed after it was hashed (checksum mismatch). Retry hashes it again.",
              "start",
              { rehash: true }
            )
          );
          return;
        }
        var detail = s3.code ? s3.code + (s3.message ? ": " + s3.message : "") : xhr.statusText || "";
        reject(new UploadError("Upload failed: HTTP " + status + (detail ? " — " + detail : "") + ".", "start"));
      };
      xhr.onerror = function () {
        item.xhr = null;
        reject(
          new UploadError(
            "Upload failed: network error, or the storage endpoint refused the request (check its CORS settings).",
            "start"
          )
        );
      };
      xhr.onabort = function () {
        item.xhr = null;
        reject(new UploadError("Upload cancelled.", "start"));
      };
      xhr.send(item.file);
    });
  }

  async function poll(item) {
    var token = ++item.pollToken;
    var timeoutMs = POLL_TIMEOUT_MS + (item.mp ? Math.round(item.size * POLL_MS_PER_BYTE) : 0);
    var deadline = Date.now() + timeoutMs;
    var delay = POLL_FIRST_DELAY_MS;
    var lastErr = null;
    var started = Date.now();
    for (;;) {
      if (token !== item.pollToken) return;
      try {
        var res = await D.apiFetch("GET", "/metadata/" + encodeURIComponent(item.uploadId));
        if (token !== item.pollToken) return;
        var m = res.body || {};
        lastErr = null;
        if (m.status === "stored" || m.status === "duplicate") {
          finishProcessed(item, m);
          return;
        }
        if (m.status === "expired" || m.status === "failed") {
          fail(
            item,
            new UploadError(
              m.status === "expired"
                ? "The upload expired before the file arrived. Retry uploads it again."
                : "Processing failed on the server. Retry uploads it again.",
              "start"
            )
          );
          return;
        }
        item.detailEl.textContent =
          "Waiting for processing… (" + Math.round((Date.now() - started) / 1000) + " s, status: " +
          (m.status || "unknown") + ")";
      } catch (err) {
        if (token !== item.pollToken) return;
        var transient = err.status === 0 || err.status === 404 || err.status === 408 || err.status === 429 ||
          err.status >= 500;
        if (!transient) {
          fail(item, new UploadError("Could not check the upload status: " + errorMessage(err), "poll"));
          return;
        }
        lastErr = err;
        item.detailEl.textContent = "Waiting for processing… (retrying: " + errorMessage(err) + ")";
      }
      if (Date.now() + delay > deadline) {
        fail(
          item,
          new UploadError(
            "Still not processed after " + Math.round(timeoutMs / 1000) + " s" +
              (lastErr ? " (last error: " + errorMessage(lastErr) + ")" : "") +
              ". The bytes were uploaded; Retry checks the status again.",
            "poll"
          )
        );
        return;
      }
      await sleep(delay);
      delay = Math.min(Math.round(delay * 1.6), POLL_MAX_DELAY_MS);
    }
  }

  function finishPrecheckDuplicate(item, file) {
    if (item.cancelled) return;
    item.uploaded = 0;
    item.row.setAttribute("data-uploaded-bytes", "0");
    item.row.setAttribute("data-precheck", "true");
    if (file.hash) item.hash = file.hash;
    setStatus(item, "duplicate", "");
    item.progressEl.value = 100;
    showResult(item, "Already stored — 0 bytes uploaded", file);
    D.announce(item.path + ": already stored — 0 bytes uploaded.");
  }

  function finishProcessed(item, m) {
    if (item.cancelled) return;
    var file = m.file || {};
    if (!file.hash && m.hash) file.hash = m.hash;
    if (file.hash) item.hash = file.hash;
    item.row.setAttribute("data-uploaded-bytes", String(item.uploaded));
    if (m.status === "stored") {
      setStatus(item, "stored", "");
      showResult(item, "Stored", file);
      D.announce(item.path + ": stored.");
    } else {
      setStatus(item, "duplicate", "");
      showResult(item, "Duplicate — same content was already stored; this copy was discarded", file);
      D.announce(item.path + ": duplicate of stored content.");
    }
  }

  function fail(item, err) {
    if (item.cancelled) return;
    var message = errorMessage(err);
    var permanent = isPermanent(err);
    item.fraction = computeFraction(item);
    item.retryPhase = err && err.retryPhase === "poll" && item.uploadId ? "poll" : "start";
    if (err && err.rehash) item.hash = null;
    if (item.worker) {
      item.worker.terminate();
      item.worker = null;
    }
    item.transfer = null;
    item.completing = false;
    item.paused = false;
    showControls(item, false);
    setStatus(item, "error", "");
    item.resultEl.textContent = "";
    item.resultEl.appendChild(el("p", { className: "error-text", "data-testid": "file-error", text: message }));
    if (permanent) {
      item.resultEl.appendChild(
        el("p", {
          className: "muted small",
          "data-testid": "file-error-hint",
          text: "The service refuses this file as it is, so trying again would not help.",
        })
      );
      D.announce(item.path + ": error — " + message + ". Cannot be uploaded.");
      return;
    }
    var retry = el("button", { type: "button", className: "btn btn-small", "data-testid": "file-retry" }, [
      "Retry",
      el("span", { className: "visually-hidden", text: " " + item.path }),
    ]);
    retry.addEventListener("click", function () {
      retryItem(item);
    });
    item.resultEl.appendChild(el("div", { className: "result-actions" }, [retry]));
    D.announce(item.path + ": error — " + message);
  }

  function retryItem(item) {
    if (item.status !== "error") return;
    item.resultEl.textContent = "";
    item.nameEl.focus();
    if (item.retryPhase === "poll") {
      setStatus(item, "processing", "Checking the upload status again…");
      poll(item);
      return;
    }
    item.uploadId = null;
    item.uploaded = 0;
    item.mp = null; // a multipart upload continues from item.resume (kept unless the server lost it)
    item.row.removeAttribute("data-upload-id");
    item.row.setAttribute("data-uploaded-bytes", "0");
    item.progressEl.value = 0;
    setStatus(item, "queued", "Waiting…");
    queue.push(item);
    pump();
  }

  /** Drops every file from the list, stopping its hashing, upload and polling (sign-out, another user). A multipart
   * upload keeps its resume record: choosing the file again after signing in continues it. */
  function cancelAll() {
    var unfinished = 0;
    queue = [];
    items.forEach(function (item) {
      if (item.status !== "stored" && item.status !== "duplicate" && item.status !== "error") unfinished++;
      item.cancelled = true;
      item.pollToken++;
      if (item.transfer) item.transfer.stop();
      if (item.worker) {
        item.worker.terminate();
        item.worker = null;
        if (item.hashReject) item.hashReject(new UploadError("Cancelled.", "start"));
      }
      if (item.xhr) item.xhr.abort();
      item.row.remove();
    });
    items = [];
    showNotice("", false, true);
    updateOverall();
    return unfinished;
  }

  function clearFinished() {
    items = items.filter(function (item) {
      var finished =
        item.status === "stored" || item.status === "duplicate" || item.status === "error" || item.status === "cancelled";
      if (finished) {
        item.pollToken++;
        item.row.remove();
      }
      return !finished;
    });
    updateOverall();
    D.announce("Finished files cleared from the list.");
  }

  // ---------------------------------------------------------------- picking and dropping

  function fromFileList(list) {
    return Array.prototype.map.call(list || [], function (f) {
      return { file: f, path: f.webkitRelativePath || f.name };
    });
  }

  function readEntryFile(entry) {
    return new Promise(function (resolve, reject) {
      entry.file(resolve, reject);
    });
  }

  function readDirBatch(reader) {
    return new Promise(function (resolve, reject) {
      reader.readEntries(resolve, reject);
    });
  }

  async function walkEntry(entry, out, problems) {
    try {
      if (entry.isFile) {
        var f = await readEntryFile(entry);
        out.push({ file: f, path: (entry.fullPath || f.name).replace(/^\/+/, "") });
      } else if (entry.isDirectory) {
        var reader = entry.createReader();
        for (;;) {
          var batch = await readDirBatch(reader); // returns at most ~100 entries per call
          if (!batch.length) break;
          for (var i = 0; i < batch.length; i++) await walkEntry(batch[i], out, problems);
        }
      }
    } catch (e) {
      problems.push((entry.fullPath || entry.name) + ": " + (e && e.message ? e.message : e));
    }
  }

  async function collectDropped(dt) {
    var out = [];
    var problems = [];
    var items = dt.items;
    if (items && items.length && typeof items[0].webkitGetAsEntry === "function") {
      // Entries must be taken synchronously, while the drop event is being dispatched.
      var entries = [];
      for (var i = 0; i < items.length; i++) {
        if (items[i].kind !== "file") continue;
        var entry = items[i].webkitGetAsEntry();
        if (entry) entries.push(entry);
        else {
          var f = items[i].getAsFile();
          if (f) out.push({ file: f, path: f.name });
        }
      }
      for (var j = 0; j < entries.length; j++) await walkEntry(entries[j], out, problems);
    } else {
      out = fromFileList(dt.files);
    }
    return { files: out, problems: problems };
  }

  function showNotice(text, isError, quiet) {
    noticeEl.textContent = text;
    noticeEl.hidden = !text;
    noticeEl.classList.toggle("error-text", !!isError);
    if (text && !quiet) D.announce(text);
  }

  function initDropZone(zone, fileInput) {
    var depth = 0;
    zone.addEventListener("click", function () {
      fileInput.click();
    });
    zone.addEventListener("keydown", function (ev) {
      if (ev.key === "Enter" || ev.key === " " || ev.key === "Spacebar") {
        ev.preventDefault();
        fileInput.click();
      }
    });
    // Accept drops anywhere on the page; highlight the zone while dragging.
    document.addEventListener("dragenter", function (ev) {
      if (!ev.dataTransfer || Array.prototype.indexOf.call(ev.dataTransfer.types || [], "Files") === -1) return;
      depth++;
      zone.classList.add("dragging");
    });
    document.addEventListener("dragleave", function () {
      depth = Math.max(0, depth - 1);
      if (depth === 0) zone.classList.remove("dragging");
    });
    document.addEventListener("dragover", function (ev) {
      ev.preventDefault();
      if (ev.dataTransfer) ev.dataTransfer.dropEffect = "copy";
    });
    document.addEventListener("drop", function (ev) {
      ev.preventDefault();
      depth = 0;
      zone.classList.remove("dragging");
      if (!ev.dataTransfer || !D.auth.isSignedIn()) return;
      showNotice("Reading dropped files…", false, true);
      collectDropped(ev.dataTransfer).then(
        function (result) {
          showNotice(
            result.problems.length ? "Some dropped items could not be read: " + result.problems.join("; ") : "",
            result.problems.length > 0
          );
          if (!result.files.length && !result.problems.length) showNotice("Nothing to upload in what was dropped.", false);
          addFiles(result.files);
        },
        function (err) {
          showNotice("Could not read the dropped files: " + (err && err.message ? err.message : err), true);
        }
      );
    });
  }

  function init() {
    listEl = document.getElementById("file-list");
    emptyEl = document.getElementById("empty-queue");
    overallEl = document.getElementById("overall-progress");
    summaryEl = document.getElementById("overall-summary");
    clearBtn = document.getElementById("clear-finished");
    noticeEl = document.createElement("p");
    noticeEl.className = "notice";
    noticeEl.hidden = true;
    noticeEl.setAttribute("data-testid", "drop-notice");
    var zone = document.getElementById("drop-zone");
    zone.parentNode.insertBefore(noticeEl, zone.nextSibling);
    resumeNoticeEl = document.getElementById("resume-notice");

    var fileInput = document.getElementById("file-input");
    var folderInput = document.getElementById("folder-input");
    [fileInput, folderInput].forEach(function (input) {
      input.addEventListener("change", function () {
        var picked = fromFileList(input.files);
        input.value = ""; // picking the same file again fires change again
        showNotice(
          !picked.length && input === folderInput
            ? "The chosen folder has no files in it (empty sub-folders are skipped): nothing to upload."
            : "",
          false
        );
        addFiles(picked);
      });
    });
    initDropZone(zone, fileInput);
    clearBtn.addEventListener("click", clearFinished);

    window.addEventListener("beforeunload", function (ev) {
      if (D.navigatingToDownload && Date.now() - D.navigatingToDownload < 3000) return;
      var busy = items.some(function (item) {
        return item.status === "queued" || item.status === "hashing" || item.status === "uploading";
      });
      if (busy) {
        ev.preventDefault();
        ev.returnValue = "";
      }
    });

    updateOverall();
    D.auth.start({
      onSignIn: function (who, info) {
        if (info.userChanged) cancelAll(); // another user: the previous user's files leave the list
        currentUser = who && who.username ? who.username : "";
        refreshResumeNotice();
      },
      onSignOut: function (reason) {
        // Signed out: the list is cleared and unfinished uploads stop. A session that ended (401) keeps the list,
        // so failed files can be retried after signing in again.
        if (reason !== "signout") return;
        if (resumeNoticeEl) resumeNoticeEl.hidden = true;
        var stopped = cancelAll();
        if (stopped) D.announce(stopped + " unfinished upload" + (stopped === 1 ? " was" : "s were") + " stopped.");
      },
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
