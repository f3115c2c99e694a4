/* dfd web — SHA-256 of a File/Blob, streamed in chunks so memory stays flat for multi-GB files.
 * WebCrypto's digest() needs the whole buffer, so this uses hash-wasm's incremental hasher (vendored).
 *
 * in:  {file: Blob, chunkSize?: number}
 * out: {type: "progress", loaded, total} … then {type: "done", hash: "<64 lowercase hex>"}
 *      or {type: "error", message}
 */
/* global importScripts, hashwasm */
"use strict";

importScripts("../vendor/hash-wasm/sha256.umd.min.js");

var DEFAULT_CHUNK = 4 * 1024 * 1024;
var PROGRESS_INTERVAL_MS = 100;

function readChunk(blob) {
  if (typeof blob.arrayBuffer === "function") return blob.arrayBuffer();
  // Older engines: FileReaderSync is available in workers.
  return Promise.resolve(new FileReaderSync().readAsArrayBuffer(blob));
}

async function hashBlob(file, chunkSize) {
  var hasher = await hashwasm.createSHA256();
  hasher.init();
  var total = file.size;
  var lastPost = 0;
  for (var offset = 0; offset < total; ) {
    var end = Math.min(offset + chunkSize, total);
    var buf = await readChunk(file.slice(offset, end));
    hasher.update(new Uint8Array(buf));
    offset = end;
    var now = Date.now();
    if (now - lastPost >= PROGRESS_INTERVAL_MS) {
      lastPost = now;
      self.postMessage({ type: "progress", loaded: offset, total: total });
    }
  }
  self.postMessage({ type: "progress", loaded: total, total: total });
  return hasher.digest("hex");
}

self.onmessage = function (ev) {
  var file = ev.data && ev.data.file;
  var chunkSize = (ev.data && ev.data.chunkSize) || DEFAULT_CHUNK;
  if (!file) {
    self.postMessage({ type: "error", message: "no file given" });
    return;
  }
  hashBlob(file, chunkSize).then(
    function (hash) {
      self.postMessage({ type: "done", hash: hash });
    },
    function (err) {
      self.postMessage({ type: "error", message: (err && (err.message || err.name)) || String(err) });
    }
  );
};
