/* dfd web — multipart uploads (large files): the resume store (IndexedDB) and the part transfer engine.
 *
 * The server owns the S3 multipart upload (POST /upload answers {"multipart": true, upload_id, part_size,
 * part_count}); this file only talks to the API and to the presigned part URLs:
 *   POST /uploads/{id}/parts    {"parts": [{"part_number", "checksum_sha256"}]} → {"parts": [{url, headers}], expires_in}
 *   PUT  <url>                  the part's exact bytes, exactly the returned headers → ETag response header
 *   GET  /uploads/{id}/parts    what S3 holds: {"parts": [{part_number, etag, size}], part_size, part_count, size}
 *   POST /uploads/{id}/complete {"parts": [{part_number, etag}]} → 202
 *   DELETE /uploads/{id}        abort (cancel)
 *
 * Parts: PARTS_IN_FLIGHT at a time per file. Each part is read with file.slice() when its turn comes, its SHA-256
 * computed with WebCrypto (sent as checksum_sha256 so S3 verifies the part), and the buffer dropped before the PUT,
 * which sends the Blob slice: memory holds at most the parts being hashed. A part that fails with a network error,
 * 5xx, 408, 429 or 403 (an expired URL: presigned again) is retried with exponential backoff and jitter.
 *
 * Resume store: IndexedDB "dfd-uploads", object store "multipart", keyPath "key" = "<user>\n<name>\n<size>\n<lastModified>":
 *   {key, user, upload_id, name, size, lastModified, sha256, part_size, part_count, created_at, updated_at}
 * Every call degrades to "nothing stored" when IndexedDB is unavailable (private mode, disabled storage).
 */
(function () {
  "use strict";

  var D = window.DFD;
  var DB_NAME = "dfd-uploads";
  var STORE = "multipart";
  var PARTS_IN_FLIGHT = 4;
  var MAX_ATTEMPTS = 6; // per part (the first try included) before the file shows an error with Retry
  var BACKOFF_BASE_MS = 500;
  var BACKOFF_MAX_MS = 20000;
  var URL_MARGIN_MS = 30000; // a presigned URL this close to its expiry is presigned again before use
  var STALE_RECORD_MS = 30 * 24 * 3600 * 1000; // resume records older than this are dropped (the server expired them)

  // Headers a page may not set on XMLHttpRequest; the browser sets content-length from the body itself.
  var FORBIDDEN_HEADERS = [
    "accept-charset", "accept-encoding", "access-control-request-headers", "access-control-request-method",
    "connection", "content-length", "cookie", "cookie2", "date", "dnt", "expect", "host", "keep-alive", "origin",
    "referer", "set-cookie", "te", "trailer", "transfer-encoding", "upgrade", "via",
  ];

  function isForbiddenHeader(name) {
    var n = String(name).toLowerCase();
    return FORBIDDEN_HEADERS.indexOf(n) !== -1 || n.indexOf("proxy-") === 0 || n.indexOf("sec-") === 0;
  }

  // ---------------------------------------------------------------- errors

  /**
   * kind: "gone"     the upload is unknown, expired or no longer pending on the server: forget it, start over
   *       "changed"  the file's bytes are not what was hashed (a part's checksum failed): hash again, start over
   *       "failed"   a part or the completion kept failing (retries exhausted), or the storage refused for good
   *       "stopped"  cancelled by the page
   */
  function MultipartError(kind, message, cause) {
    this.name = "MultipartError";
    this.kind = kind;
    this.message = message;
    this.cause = cause || null;
  }
  MultipartError.prototype = Object.create(Error.prototype);
  MultipartError.prototype.constructor = MultipartError;

  function Interrupted() {
    this.name = "Interrupted";
    this.message = "interrupted";
  }
  Interrupted.prototype = Object.create(Error.prototype);

  /** An API answer that means the upload id no longer names a pending multipart upload of this user. */
  function isGone(err) {
    return (
      err instanceof D.ApiError &&
      (err.status === 404 || err.status === 410 || (err.status === 409 && err.code !== "incomplete" &&
        err.code !== "etag_mismatch") || (err.status === 403 && err.code === "not_owner"))
    );
  }

  function isTransient(err) {
    return err instanceof D.ApiError && (err.status === 0 || err.status === 408 || err.status === 429 || err.status >= 500);
  }

  function backoff(attempt) {
    // exponential, capped, with jitter (half fixed, half random) so parallel parts do not retry in lockstep
    var ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * Math.pow(2, Math.max(0, attempt - 1)));
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
  }

  function sleep(ms) {
    return new Promise(function (resolve) {
      window.setTimeout(resolve, ms);
    });
  }

  function base64(buffer) {
    var bytes = new Uint8Array(buffer);
    var s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return window.btoa(s);
  }

  function canChecksum() {
    return !!(window.crypto && window.crypto.subtle && typeof window.crypto.subtle.digest === "function");
  }

  // ---------------------------------------------------------------- resume store (IndexedDB)

  var dbPromise = null;

  function openDb() {
    if (dbPromise) return dbPromise;
    dbPromise = new Promise(function (resolve) {
      var req;
      try {
        req = window.indexedDB.open(DB_NAME, 1);
      } catch (e) {
        resolve(null);
        return;
      }
      req.onupgradeneeded = function () {
        var db = req.result;
        if (!db.objectStoreNames.contains(STORE)) {
          var os = db.createObjectStore(STORE, { keyPath: "key" });
          os.createIndex("user", "user", { unique: false });
        }
      };
      req.onsuccess = function () {
        resolve(req.result);
      };
      req.onerror = function () {
        resolve(null);
      };
      req.onblocked = function () {
        resolve(null);
      };
    });
    return dbPromise;
  }

  /** Runs fn(objectStore) in a transaction; resolves the request's result, or fallback on any failure. */
  function withStore(mode, fn, fallback) {
    return openDb().then(function (db) {
      if (!db) return fallback;
      return new Promise(function (resolve) {
        try {
          var tx = db.transaction(STORE, mode);
          var req = fn(tx.objectStore(STORE));
          tx.oncomplete = function () {
            resolve(req ? req.result : fallback);
          };
          tx.onerror = tx.onabort = function () {
            resolve(fallback);
          };
        } catch (e) {
          resolve(fallback);
        }
      });
    });
  }

  function recordKey(user, file) {
    return [user || "", file.name, file.size, file.lastModified].join("\n");
  }

  var store = {
    key: recordKey,
    get: function (user, file) {
      var key = recordKey(user, file);
      return withStore("readonly", function (os) {
        return os.get(key);
      }, null).then(function (rec) {
        return rec && rec.upload_id && rec.size === file.size && rec.lastModified === file.lastModified ? rec : null;
      });
    },
    put: function (record) {
      record.updated_at = Date.now();
      return withStore("readwrite", function (os) {
        return os.put(record);
      }, null);
    },
    remove: function (key) {
      return withStore("readwrite", function (os) {
        return os.delete(key);
      }, null);
    },
    /** This user's records, newest first; records older than STALE_RECORD_MS are deleted on the way. */
    list: function (user) {
      return withStore("readonly", function (os) {
        return os.index("user").getAll(user || "");
      }, []).then(function (records) {
        var now = Date.now();
        var fresh = [];
        (records || []).forEach(function (rec) {
          if (now - (rec.updated_at || rec.created_at || 0) > STALE_RECORD_MS) store.remove(rec.key);
          else fresh.push(rec);
        });
        return fresh.sort(function (a, b) {
          return (b.updated_at || 0) - (a.updated_at || 0);
        });
      });
    },
  };

  // ---------------------------------------------------------------- API calls

  function path(uploadId, tail) {
    return "/uploads/" + encodeURIComponent(uploadId) + (tail || "");
  }

  /** GET /uploads/{id}/parts: what S3 holds. Rejects with the ApiError (isGone() tells an expired/unknown one). */
  function listParts(uploadId) {
    return D.apiFetch("GET", path(uploadId, "/parts")).then(function (res) {
      return res.body || {};
    });
  }

  /** DELETE /uploads/{id}: resolves "aborted", or "later" when the server has no abort (404/405: it expires it). */
  function abortUpload(uploadId) {
    return D.apiFetch("DELETE", path(uploadId)).then(
      function () {
        return "aborted";
      },
      function (err) {
        if (err instanceof D.ApiError && (err.status === 404 || err.status === 405 || err.status === 409)) return "later";
        throw err;
      }
    );
  }

  /** The expected size of part n (1-based) of a file of `size` bytes cut in `partSize` pieces. */
  function partBytes(size, partSize, partCount, n) {
    return n < partCount ? partSize : size - (partCount - 1) * partSize;
  }

  // ---------------------------------------------------------------- transfer

  /**
   * One multipart upload's parts. opts: {file, uploadId, partSize, partCount, done: [{part_number, etag, size}],
   * onProgress(transfer), onNote(text)}. start() resolves once every part is acknowledged (then complete()), and
   * rejects with a MultipartError. pause() stops the parts in flight (their bytes are sent again on resume());
   * stop() stops everything for good.
   */
  function Transfer(opts) {
    var self = this;
    this.file = opts.file;
    this.uploadId = opts.uploadId;
    this.partSize = opts.partSize;
    this.partCount = opts.partCount;
    this.onProgress = opts.onProgress || function () {};
    this.onNote = opts.onNote || function () {};
    this.paused = false;
    this.stopped = false;
    this.settled = false;
    this.inFlight = 0;
    this.sentBytes = 0; // bytes of parts acknowledged by this page (not counting parts that were already there)
    this.parts = [];
    var known = {};
    (opts.done || []).forEach(function (p) {
      known[p.part_number] = p;
    });
    for (var n = 1; n <= this.partCount; n++) {
      var start = (n - 1) * this.partSize;
      var size = partBytes(this.file.size, this.partSize, this.partCount, n);
      var have = known[n];
      var done = !!(have && have.etag && Number(have.size) === size);
      this.parts.push({
        n: n,
        start: start,
        end: start + size,
        size: size,
        state: done ? "done" : "todo", // todo | active | waiting | done
        etag: done ? have.etag : null,
        checksum: null,
        url: null,
        headers: null,
        urlUntil: 0,
        loaded: 0,
        attempts: 0,
        xhr: null,
      });
    }
    this.promise = new Promise(function (resolve, reject) {
      self.resolve = resolve;
      self.reject = reject;
    });
  }

  Transfer.prototype.doneBytes = function () {
    return this.parts.reduce(function (sum, p) {
      return sum + (p.state === "done" ? p.size : 0);
    }, 0);
  };

  /** Acknowledged bytes plus the bytes of the parts in flight that the browser has sent so far. */
  Transfer.prototype.bytes = function () {
    return this.parts.reduce(function (sum, p) {
      return sum + (p.state === "done" ? p.size : p.state === "active" ? p.loaded : 0);
    }, 0);
  };

  Transfer.prototype.doneCount = function () {
    return this.parts.filter(function (p) {
      return p.state === "done";
    }).length;
  };

  Transfer.prototype.start = function () {
    this.pump();
    return this.promise;
  };

  Transfer.prototype.pump = function () {
    if (this.settled || this.paused || this.stopped) return;
    for (var i = 0; i < this.parts.length && this.inFlight < PARTS_IN_FLIGHT; i++) {
      var part = this.parts[i];
      if (part.state !== "todo") continue;
      this.launch(part);
    }
    if (this.doneCount() === this.partCount && this.inFlight === 0) {
      this.settled = true;
      this.resolve(
        this.parts.map(function (p) {
          return { part_number: p.n, etag: p.etag };
        })
      );
    }
  };

  Transfer.prototype.launch = function (part) {
    var self = this;
    part.state = "active";
    part.loaded = 0;
    this.inFlight++;
    this.sendPart(part).then(
      function (etag) {
        self.inFlight--;
        part.xhr = null;
        part.etag = etag;
        part.state = "done";
        part.loaded = part.size;
        self.sentBytes += part.size;
        self.onProgress(self);
        self.pump();
      },
      function (err) {
        self.inFlight--;
        part.xhr = null;
        part.loaded = 0;
        self.partFailed(part, err);
      }
    );
  };

  Transfer.prototype.partFailed = function (part, err) {
    var self = this;
    this.onProgress(this);
    if (this.settled) return;
    if (err instanceof Interrupted) {
      part.state = "todo"; // paused or stopped: sent again on resume
      this.pump();
      return;
    }
    if (err instanceof MultipartError) {
      this.fail(err);
      return;
    }
    // err = {retry: true, message, presign?}
    part.attempts++;
    if (err.presign) part.url = null;
    if (part.attempts >= MAX_ATTEMPTS) {
      this.fail(new MultipartError("failed", "Part " + part.n + " failed " + part.attempts + " times: " + err.message));
      return;
    }
    var delay = backoff(part.attempts);
    part.state = "waiting";
    this.onNote("Part " + part.n + ": " + err.message + " — retrying in " + (delay / 1000).toFixed(1) + " s");
    window.setTimeout(function () {
      if (part.state !== "waiting") return;
      part.state = "todo";
      self.pump();
    }, delay);
  };

  Transfer.prototype.fail = function (err) {
    if (this.settled) return;
    this.settled = true;
    this.abortInFlight();
    this.reject(err);
  };

  Transfer.prototype.abortInFlight = function () {
    this.parts.forEach(function (p) {
      if (p.xhr) p.xhr.abort();
      if (p.state === "waiting") p.state = "todo";
    });
  };

  Transfer.prototype.pause = function () {
    if (this.settled || this.paused) return;
    this.paused = true;
    this.abortInFlight();
    this.onProgress(this);
  };

  Transfer.prototype.resume = function () {
    if (this.settled || !this.paused) return;
    this.paused = false;
    this.pump();
    this.onProgress(this);
  };

  Transfer.prototype.stop = function () {
    if (this.settled) return;
    this.stopped = true;
    this.fail(new MultipartError("stopped", "Cancelled."));
  };

  Transfer.prototype.checkRunning = function () {
    if (this.paused || this.stopped || this.settled) throw new Interrupted();
  };

  /** Checksum (read + WebCrypto), presign if needed, PUT: resolves the ETag; rejects Interrupted, a
   * MultipartError (give up) or {retry: true, message, presign} (try again after a backoff). */
  Transfer.prototype.sendPart = async function (part) {
    var self = this;
    if (!part.checksum && canChecksum()) {
      var buffer;
      try {
        buffer = await this.file.slice(part.start, part.end).arrayBuffer();
      } catch (e) {
        throw new MultipartError("changed", "Could not read part " + part.n + " of the file: " + (e.message || e.name));
      }
      if (buffer.byteLength !== part.size) {
        throw new MultipartError("changed", "The file changed while it was being uploaded (part " + part.n + ").");
      }
      part.checksum = base64(await window.crypto.subtle.digest("SHA-256", buffer));
      buffer = null; // the PUT sends the Blob slice: nothing of the part stays in memory
    }
    this.checkRunning();
    if (!part.url || Date.now() > part.urlUntil) {
      var entry = { part_number: part.n };
      if (part.checksum) entry.checksum_sha256 = part.checksum;
      var res;
      try {
        res = await D.apiFetch("POST", path(this.uploadId, "/parts"), { parts: [entry] });
      } catch (err) {
        if (isGone(err)) {
          throw new MultipartError(
            "gone",
            "The server no longer knows this upload (expired, aborted, or not yours): " + D.describeError(err),
            err
          );
        }
        if (isTransient(err)) throw { retry: true, message: D.describeError(err) };
        throw new MultipartError("failed", "Could not get an upload URL for part " + part.n + ": " + D.describeError(err), err);
      }
      this.checkRunning();
      var given = ((res.body && res.body.parts) || []).filter(function (p) {
        return Number(p.part_number) === part.n;
      })[0];
      var url = given && D.safeHttpUrl(given.url);
      if (!url) throw new MultipartError("failed", "The API returned no http(s) upload URL for part " + part.n + ".");
      var ttl = Number(res.body.expires_in) > 0 ? Number(res.body.expires_in) * 1000 : 15 * 60 * 1000;
      part.url = url;
      part.method = given.method || "PUT";
      part.headers = given.headers || {};
      part.urlUntil = Date.now() + Math.max(ttl - URL_MARGIN_MS, ttl / 2);
    }
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      part.xhr = xhr;
      try {
        xhr.open(part.method, part.url, true);
        Object.keys(part.headers).forEach(function (name) {
          if (!isForbiddenHeader(name)) xhr.setRequestHeader(name, String(part.headers[name]));
        });
      } catch (e) {
        reject(new MultipartError("failed", "Could not prepare the request for part " + part.n + ": " + (e.message || e)));
        return;
      }
      xhr.upload.onprogress = function (ev) {
        part.loaded = Math.min(ev.loaded, part.size);
        self.onProgress(self);
      };
      xhr.onload = function () {
        var status = xhr.status;
        if (status >= 200 && status < 300) {
          var etag = xhr.getResponseHeader("ETag");
          if (!etag) {
            reject(
              new MultipartError(
                "failed",
                "The storage did not expose the part's ETag header (the bucket's CORS must expose ETag)."
              )
            );
            return;
          }
          resolve(etag);
          return;
        }
        var s3 = parseS3Error(xhr);
        var what = "HTTP " + status + (s3.code ? " " + s3.code : "");
        if (s3.code === "BadDigest" || s3.code === "InvalidDigest" || /checksum/i.test(s3.code + " " + s3.message)) {
          reject(new MultipartError("changed", "Part " + part.n + " does not match its checksum (" + what + "): the file changed."));
        } else if (status === 404 || s3.code === "NoSuchUpload") {
          reject(new MultipartError("gone", "The storage no longer knows this upload (" + what + ")."));
        } else if (status === 403) {
          reject({ retry: true, presign: true, message: "URL refused or expired (" + what + "), presigning again" });
        } else if (status === 408 || status === 429 || status >= 500) {
          reject({ retry: true, message: what });
        } else {
          reject(new MultipartError("failed", "Part " + part.n + " was refused: " + what + (s3.message ? " — " + s3.message : "") + "."));
        }
      };
      xhr.onerror = function () {
        reject({ retry: true, message: "network error" });
      };
      xhr.onabort = function () {
        reject(new Interrupted());
      };
      xhr.send(self.file.slice(part.start, part.end));
    });
  };

  function parseS3Error(xhr) {
    var text = "";
    try {
      text = xhr.responseText || "";
    } catch (e) {
      text = "";
    }
    if (!text || text.indexOf("<") === -1) return { code: "", message: "" };
    try {
      var doc = new DOMParser().parseFromString(text, "application/xml");
      var c = doc.getElementsByTagName("Code")[0];
      var m = doc.getElementsByTagName("Message")[0];
      return { code: c ? c.textContent : "", message: m ? m.textContent : "" };
    } catch (e) {
      return { code: "", message: "" };
    }
  }

  /**
   * POST /uploads/{id}/complete with the parts list. Resolves the body (202), or rejects: a MultipartError "gone",
   * {incomplete: [part numbers]} when the server misses parts (send them again), or a MultipartError "failed".
   */
  async function complete(uploadId, parts, onNote) {
    var body = { parts: parts };
    for (var attempt = 1; ; attempt++) {
      try {
        var res = await D.apiFetch("POST", path(uploadId, "/complete"), body);
        return res.body || {};
      } catch (err) {
        if (err instanceof D.ApiError && err.status === 409 && err.code === "incomplete") {
          var details = (err.body && err.body.error && err.body.error.details) || {};
          var again = [].concat(details.missing || [], details.wrong_size || []).map(Number);
          throw { incomplete: again, message: D.describeError(err) };
        }
        if (err instanceof D.ApiError && err.status === 409 && err.code === "etag_mismatch" && body.parts) {
          body = {}; // the server checks what S3 holds (sizes) without our ETags
          continue;
        }
        if (isGone(err)) throw new MultipartError("gone", D.describeError(err), err);
        if (!isTransient(err) || attempt >= MAX_ATTEMPTS) {
          throw new MultipartError("failed", "Could not complete the upload: " + D.describeError(err), err);
        }
        var delay = backoff(attempt);
        if (onNote) onNote("Completing: " + D.describeError(err) + " — retrying in " + (delay / 1000).toFixed(1) + " s");
        await sleep(delay);
      }
    }
  }

  D.multipart = {
    store: store,
    listParts: listParts,
    abortUpload: abortUpload,
    complete: complete,
    partBytes: partBytes,
    Transfer: Transfer,
    MultipartError: MultipartError,
    isGone: isGone,
    canChecksum: canChecksum,
    PARTS_IN_FLIGHT: PARTS_IN_FLIGHT,
  };
})();
