/*
 * The upload page: Uppy's Dashboard (pick, drop, paste, folders) with @dfd/uppy (hash first, skip stored content,
 * PUT or parts, pause/resume/cancel, retries) and Golden Retriever (an upload interrupted by a reload continues).
 * Both come from vendor/uppy/uppy.js (web/package.json `npm run vendor`). This module adds what is dfd's: the
 * "Files" list below the Dashboard follows every file until dfd has stored it (or found it already stored) and
 * offers its Download; the summary counts bytes actually sent.
 */
import { Dashboard, DfdUpload, GoldenRetriever, Uppy } from "../vendor/uppy/uppy.js";

const D = window.DFD;
const MIB = 1024 * 1024;
const root = document.documentElement;
const rows = new Map(); // Uppy file id -> {li, status, bytes}
const $ = (id) => document.getElementById(id);

// Uppy logs a failed upload with console.error; the page shows it on the file's line, so it is a warning here
const logger = { debug() {}, warn: console.warn.bind(console), error: console.warn.bind(console) };
const uppy = new Uppy({ id: "dfd-upload", autoProceed: true, allowMultipleUploadBatches: true, logger });
uppy.use(Dashboard, {
  inline: true,
  target: "#uploader",
  width: "100%",
  height: 380,
  proudlyDisplayPoweredByUppy: false,
  showProgressDetails: true,
  fileManagerSelectionType: "both",
  note: "Files are fingerprinted (SHA-256) here first: content already stored is not sent again.",
});
// Blobs up to 256 MiB are kept in IndexedDB so a reload resumes by itself; a larger file resumes when it is
// chosen again (Uppy matches it to its restored entry).
uppy.use(GoldenRetriever, { indexedDB: { maxFileSize: 256 * MIB, maxTotalSize: 1024 * MIB } });
uppy.use(DfdUpload, {
  endpoint: D.apiBase(),
  headers: async () => (D.auth && D.auth.enabled() ? { authorization: `Bearer ${await D.auth.accessToken()}` } : {}),
  waitForStored: true,
});
window.dfdUppy = uppy; // for the browser tests and the curious

function tagInputs() {
  // the Dashboard's hidden inputs keep the page's test hooks (file-input, folder-input)
  const inputs = document.querySelectorAll('#uploader input.uppy-Dashboard-input[name="files[]"]');
  inputs.forEach((input) => {
    const folder = input.hasAttribute("webkitdirectory");
    input.setAttribute("data-testid", folder ? "folder-input" : "file-input");
  });
}
new MutationObserver(tagInputs).observe($("uploader"), { childList: true, subtree: true });
tagInputs();

// ------------------------------------------------------------------ the Files list
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(label, testid, onClick, aria) {
  const b = el("button", { type: "button", class: "btn btn-small btn-secondary", "data-testid": testid }, label);
  if (aria) b.setAttribute("aria-label", aria);
  b.addEventListener("click", onClick);
  return b;
}

function rowFor(file) {
  let row = rows.get(file.id);
  if (row) return row;
  const name = (file.meta && file.meta.relativePath) || file.name;
  const li = el("li", { class: "file-row", "data-testid": "file-row", "data-file-name": name });
  const head = el("div", { class: "file-head" });
  head.append(
    el("span", { class: "file-name", title: name }, name),
    el("span", { class: "file-size" }, D.formatBytes(file.size)),
    el("span", { class: "badge", "data-testid": "file-status" }),
  );
  const progress = el("progress", { max: "100", value: "0", "data-testid": "file-progress" });
  progress.setAttribute("aria-label", `Progress of ${name}`);
  const controls = el("div", { class: "file-controls", "data-testid": "file-controls" });
  controls.append(
    button("Pause", "file-pause", () => uppy.pauseResume(file.id), `Pause ${name}`),
    button("Resume", "file-resume", () => uppy.pauseResume(file.id), `Resume ${name}`),
    button("Cancel", "file-cancel", () => uppy.removeFile(file.id), `Cancel ${name}`),
  );
  li.append(head, progress, el("p", { class: "file-detail muted", "data-testid": "file-detail" }), controls);
  li.append(el("div", { class: "file-result", "data-testid": "file-result" }));
  $("file-list").prepend(li);
  row = { li, name, size: file.size, status: "", bytes: 0 };
  rows.set(file.id, row);
  return row;
}

const LABELS = {
  queued: "Queued",
  hashing: "Fingerprinting",
  uploading: "Uploading",
  paused: "Paused",
  processing: "Processing",
  stored: "Stored",
  duplicate: "Duplicate",
  error: "Error",
  cancelled: "Cancelled",
};
const DONE = new Set(["stored", "duplicate"]);

function setStatus(row, status, detail) {
  row.status = status;
  row.li.className = `file-row status-${status}`;
  row.li.setAttribute("data-status", status);
  row.li.querySelector('[data-testid="file-status"]').textContent = LABELS[status] || status;
  if (DONE.has(status)) row.li.querySelector('[data-testid="file-progress"]').value = 100;
  if (detail !== undefined) row.li.querySelector('[data-testid="file-detail"]').textContent = detail;
  const active = ["hashing", "uploading", "paused"].includes(status);
  row.li.querySelector('[data-testid="file-controls"]').hidden = !active;
  row.li.querySelector('[data-testid="file-pause"]').hidden = status === "paused";
  row.li.querySelector('[data-testid="file-resume"]').hidden = status !== "paused";
  summary();
}

function setBytes(row, bytes) {
  row.bytes = bytes;
  row.li.setAttribute("data-uploaded-bytes", String(bytes));
  const progress = row.li.querySelector('[data-testid="file-progress"]');
  progress.value = row.size ? Math.round((bytes / row.size) * 100) : 100;
  summary();
}

function describe(file) {
  const state = file.dfd || {};
  for (const [name, value] of [
    ["data-sha256", state.sha256],
    ["data-upload-id", state.uploadId],
    ["data-multipart", state.multipart ? "true" : null],
    ["data-part-count", state.partCount],
    ["data-part-size", state.partSize],
  ]) {
    if (value) rowFor(file).li.setAttribute(name, String(value));
  }
}

function result(row, body, file) {
  const box = row.li.querySelector('[data-testid="file-result"]');
  box.textContent = "";
  const hash = body.hash || (file.dfd && file.dfd.sha256);
  if (hash) {
    const code = el("code", { class: "hash", "data-testid": "file-hash", title: hash }, hash);
    box.append(el("span", { class: "muted" }, "SHA-256 "), code, " ");
  }
  const status = el("span", { class: "download-fallback", "data-testid": "file-download-status", "aria-live": "polite" });
  const download = button("Download", "file-download", () => D.downloadFile(body.upload_id, download, status));
  download.setAttribute("aria-label", `Download ${row.name}`);
  box.append(download, status);
}

function summary() {
  const all = [...rows.values()];
  const finished = all.filter((r) => DONE.has(r.status)).length;
  const duplicates = all.filter((r) => r.status === "duplicate").length;
  const failed = all.filter((r) => r.status === "error").length;
  const total = all.reduce((sum, r) => sum + r.size, 0);
  const sent = all.reduce((sum, r) => sum + r.bytes, 0);
  // bytes sent, and a finished file's whole size (a known file is done without sending any): hashing moves nothing
  const progressed = all.reduce((sum, r) => sum + (DONE.has(r.status) ? r.size : r.bytes), 0);
  const bar = $("overall-progress");
  bar.value = total ? Math.floor((progressed / total) * 100) : 0;
  bar.setAttribute("data-total", String(all.length));
  bar.setAttribute("data-finished", String(finished));
  bar.setAttribute("data-failed", String(failed));
  bar.setAttribute("data-sent-bytes", String(sent));
  const files = `${all.length} file${all.length === 1 ? "" : "s"}`;
  const extra = [duplicates ? `${duplicates} duplicate${duplicates === 1 ? "" : "s"}` : "", failed ? `${failed} failed` : ""];
  const notes = extra.filter(Boolean).join(", ");
  $("overall-summary").textContent = all.length
    ? `${finished} of ${files} done${notes ? ` (${notes})` : ""} · ${D.formatBytes(sent)} of ${D.formatBytes(total)} sent`
    : "No files yet.";
  $("empty-queue").hidden = all.length > 0;
  $("clear-finished").disabled = !all.some((r) => ["stored", "duplicate", "cancelled", "error"].includes(r.status));
}

uppy.on("file-added", (file) => {
  const row = rowFor(file);
  if (!row.status) setStatus(row, "queued", "Waiting");
});
uppy.on("preprocess-progress", (file, progress) => {
  const row = rowFor(file);
  if (row.status !== "paused") setStatus(row, "hashing", `Fingerprinting (SHA-256) ${Math.round((progress.value || 0) * 100)} %`);
});
uppy.on("upload-progress", (file, progress) => {
  const row = rowFor(file);
  describe(uppy.getFile(file.id) || file);
  if (row.status !== "paused" && row.status !== "uploading") setStatus(row, "uploading", "Sending");
  setBytes(row, progress.bytesUploaded || 0);
});
uppy.on("upload-pause", (file, paused) => {
  if (file) setStatus(rowFor(file), paused ? "paused" : "uploading", paused ? "Paused" : "Sending");
});
uppy.on("pause-all", () => rows.forEach((row) => ["hashing", "uploading"].includes(row.status) && setStatus(row, "paused", "Paused")));
uppy.on("resume-all", () => rows.forEach((row) => row.status === "paused" && setStatus(row, "uploading", "Sending")));
uppy.on("dfd:resumed", (file, info) => {
  const row = rowFor(file);
  row.li.setAttribute("data-resumed", "true");
  D.announce(`${row.name}: continuing, ${info.partsHeld} part(s) already sent`);
});
uppy.on("dfd:processing", (file) => {
  const row = rowFor(file);
  describe(uppy.getFile(file.id) || file);
  setStatus(row, "processing", "Sent; dfd is storing it");
});
uppy.on("upload-success", (file, response) => {
  const row = rowFor(file);
  const body = (response && response.body) || {};
  describe(uppy.getFile(file.id) || file);
  if (body.upload_id) row.li.setAttribute("data-upload-id", body.upload_id);
  if (body.duplicate) {
    row.li.setAttribute("data-precheck", "true");
    setBytes(row, 0);
    setStatus(row, "duplicate", "Already stored — 0 bytes uploaded");
    if (body.file && body.file.hash) row.li.setAttribute("data-sha256", body.file.hash);
  } else if (body.status === "duplicate") {
    setStatus(row, "duplicate", "Stored earlier (by another upload): these bytes were not kept twice");
  } else {
    setStatus(row, "stored", "Stored");
  }
  result(row, body, file);
  D.announce(`${row.name}: ${row.li.querySelector('[data-testid="file-detail"]').textContent}`);
});
uppy.on("upload-error", (file, error) => {
  if (!file) return;
  const row = rowFor(file);
  describe(uppy.getFile(file.id) || file);
  setStatus(row, "error", "Failed");
  row.li.setAttribute("data-error-code", error.code || "");
  const box = row.li.querySelector('[data-testid="file-result"]');
  box.textContent = "";
  box.append(el("p", { class: "error-text", "data-testid": "file-error", role: "alert" }, error.message));
  if ([400, 413, 422].includes(error.status)) {
    // dfd refused the file itself: the same request would get the same answer
    const hint = "dfd refused this file; sending it again would get the same answer.";
    box.append(el("p", { class: "muted", "data-testid": "file-error-hint" }, hint));
    uppy.removeFile(file.id); // out of Uppy's queue (the next batch would send it again); its line stays here
  } else {
    box.append(button("Retry", "file-retry", () => uppy.retryUpload(file.id), `Retry ${row.name}`));
  }
});
uppy.on("file-removed", (file) => {
  const row = rows.get(file.id);
  if (!row) return;
  if (["stored", "duplicate", "error", "cancelled"].includes(row.status)) {
    // removing a finished file from the Dashboard keeps its line here
    return;
  }
  setStatus(row, "cancelled", "Cancelled: its upload is aborted on the server");
});

$("clear-finished").addEventListener("click", () => {
  for (const [id, row] of rows) {
    if (["stored", "duplicate", "cancelled", "error"].includes(row.status)) {
      row.li.remove();
      rows.delete(id);
      if (uppy.getFile(id)) uppy.removeFile(id);
    }
  }
  summary();
});

// ------------------------------------------------------------------ sign-in and restore
let signedIn = false;
let restoredPending = false;

function resumeRestored() {
  if (!restoredPending || !signedIn) return;
  restoredPending = false;
  if (uppy.getFiles().some((file) => !file.progress.uploadComplete && !file.isGhost)) uppy.emit("restore-confirmed");
}

function forgetAll() {
  uppy.cancelAll(); // unfinished uploads stop (each is cancelled at dfd) and the list empties
  rows.forEach((row) => row.li.remove());
  rows.clear();
  summary();
}

uppy.on("restored", () => {
  for (const file of uppy.getFiles()) {
    const row = rowFor(file);
    describe(file);
    if (file.progress && file.progress.uploadComplete) setStatus(row, "stored", "Stored");
    else setStatus(row, "paused", file.isGhost ? "Choose this file again to continue its upload" : "Continuing after the reload");
  }
  restoredPending = true;
  resumeRestored();
});

D.auth.start({
  onSignIn: (who, info) => {
    if (info.userChanged) forgetAll(); // another user: the previous user's files leave the list
    signedIn = true;
    resumeRestored();
  },
  onSignOut: (reason) => {
    signedIn = false;
    // a session that ended (401) keeps the list, so failed files can be retried after signing in again
    if (reason === "signout") forgetAll();
  },
});
summary();
