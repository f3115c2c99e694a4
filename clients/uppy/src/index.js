// @dfd/uppy: an Uppy uploader for dfd. Each file is hashed (SHA-256, in a Web Worker), then `POST /upload`
// asks dfd first: content the tenant holds is answered 409 and never sent; the rest goes to S3 with one
// presigned PUT or in parts (each with its own SHA-256, which S3 verifies), as dfd answers. State worth keeping
// across a reload (the upload id, the hash, the part layout) lives on the Uppy file as `file.dfd`, which Golden
// Retriever persists: a restored upload asks `GET /uploads/{id}/parts` and sends only what S3 lacks.
import { BasePlugin } from '@uppy/core'
import { hashFile, hasPartChecksums, partChecksum } from './hash.js'
import { Aborted, DfdError, apiCall, isAbort, putBytes, retryable } from './http.js'

export { DfdError }

const DEFAULTS = {
  endpoint: '',
  headers: {},
  limit: 4, // PUTs in flight at once, all files together
  fileLimit: 3, // files hashed or sent at once
  retryDelays: [500, 1000, 2000, 4000, 8000, 16000], // ms; each wait is half of it plus up to half at random
  checksums: true, // per-part SHA-256 (S3 refuses damaged parts with BadDigest; the part is sent again)
  partSize: null, // bytes; null: dfd's choice
  multipart: null, // true: multipart from 5 MiB; null: dfd decides (its MultipartThresholdBytes)
  waitForStored: false, // report success only once dfd has stored (or deduplicated) the upload
  storedTimeout: null, // ms to wait for stored; null: 60 s plus 1 s per 32 MiB
  // files of at least this many bytes start sending while they are hashed (multipart); once the hash is known,
  // content the tenant holds stops the transfer and is answered as a duplicate. null: always hash first
  overlapFrom: 64 * 1024 * 1024,
}

/** The transfer of an overlapped upload stopped because the tenant holds the content (its hash said so). */
class Superseded extends Error {}

const FINISHED = new Set(['stored', 'duplicate'])
const FAILED = new Set(['failed', 'expired', 'deleted'])

/** The byte count of part `n` (1-based) of a `size`-byte upload: the last part holds the rest. */
function partLength({ partSize, partCount }, size, n) {
  return n < partCount ? partSize : size - (partCount - 1) * partSize
}

class Semaphore {
  constructor(size) {
    this.free = Math.max(1, size)
    this.queue = []
  }

  acquire() {
    if (this.free > 0) {
      this.free -= 1
      return Promise.resolve()
    }
    return new Promise((resolve) => this.queue.push(resolve))
  }

  release() {
    const next = this.queue.shift()
    if (next) next()
    else this.free += 1
  }
}

/** One file's upload in this page: pause aborts its requests (their bytes are sent again), cancel ends it. */
class Run {
  constructor(paused) {
    this.paused = Boolean(paused)
    this.cancelled = false
    this.controller = new AbortController()
    this.wakers = new Set()
  }

  get signal() {
    return this.controller.signal
  }

  setPaused(paused) {
    if (this.cancelled || paused === this.paused) return
    this.paused = paused
    if (paused) {
      this.controller.abort()
    } else {
      this.controller = new AbortController()
      this.wake()
    }
  }

  /** Stops the requests in flight (they reject AbortError) without pausing: later requests go out again. */
  interrupt() {
    this.controller.abort()
    this.controller = new AbortController()
  }

  cancel() {
    this.cancelled = true
    this.controller.abort()
    this.wake()
  }

  wake() {
    for (const waker of this.wakers) waker()
    this.wakers.clear()
  }

  /** Resolves once not paused; rejects Aborted when cancelled. */
  async unpaused() {
    while (this.paused && !this.cancelled) await new Promise((resolve) => this.wakers.add(resolve))
    if (this.cancelled) throw new Aborted()
  }

  /** Waits `ms` unless cancelled (rejects Aborted) or paused (returns early: the caller waits for resume). */
  sleep(ms) {
    return new Promise((resolve, reject) => {
      const waker = () => {
        clearTimeout(timer)
        if (this.cancelled) reject(new Aborted())
        else resolve()
      }
      const timer = setTimeout(() => {
        this.wakers.delete(waker)
        resolve()
      }, ms)
      this.wakers.add(waker)
      this.signal.addEventListener('abort', waker, { once: true })
    })
  }
}

export default class DfdUpload extends BasePlugin {
  static VERSION = '0.1.0'

  #runs = new Map()

  #transfers

  #files

  constructor(uppy, opts) {
    super(uppy, { ...DEFAULTS, ...opts })
    this.id = this.opts.id || 'DfdUpload'
    this.type = 'uploader'
    if (!this.opts.endpoint && this.opts.endpoint !== '') throw new Error('@dfd/uppy: `endpoint` is required')
    this.#transfers = new Semaphore(this.opts.limit)
    this.#files = new Semaphore(this.opts.fileLimit)
  }

  install() {
    const { capabilities } = this.uppy.getState()
    this.uppy.setState({ capabilities: { ...capabilities, resumableUploads: true } })
    this.uppy.addUploader(this.#upload)
    this.uppy.on('upload-pause', this.#onPause)
    this.uppy.on('pause-all', this.#onPauseAll)
    this.uppy.on('resume-all', this.#onResumeAll)
    this.uppy.on('file-removed', this.#onRemoved)
  }

  uninstall() {
    const { capabilities } = this.uppy.getState()
    this.uppy.setState({ capabilities: { ...capabilities, resumableUploads: false } })
    this.uppy.removeUploader(this.#upload)
    this.uppy.off('upload-pause', this.#onPause)
    this.uppy.off('pause-all', this.#onPauseAll)
    this.uppy.off('resume-all', this.#onResumeAll)
    this.uppy.off('file-removed', this.#onRemoved)
    for (const run of this.#runs.values()) run.cancel()
  }

  // ---------------------------------------------------------------- Uppy events
  #onPause = (file, isPaused) => {
    const run = file && this.#runs.get(file.id)
    if (run) run.setPaused(Boolean(isPaused))
  }

  #onPauseAll = () => {
    for (const run of this.#runs.values()) run.setPaused(true)
  }

  #onResumeAll = () => {
    for (const run of this.#runs.values()) run.setPaused(false)
  }

  /** A removed file stops; its upload, unless it finished, is cancelled at dfd (which aborts it in S3). */
  #onRemoved = (file) => {
    if (!file) return
    const run = this.#runs.get(file.id)
    if (run) run.cancel()
    const state = file.dfd || {}
    if (!state.uploadId || state.sent) return
    apiCall(this.opts, 'DELETE', `/uploads/${encodeURIComponent(state.uploadId)}`).then(
      () => this.uppy.emit('dfd:cancelled', file, { uploadId: state.uploadId }),
      (error) => this.uppy.log(`[DfdUpload] could not cancel upload ${state.uploadId}: ${error.message}`, 'warning'),
    )
  }

  // ---------------------------------------------------------------- the uploader
  #upload = async (fileIDs) => {
    const files = this.uppy.getFilesByIds(fileIDs).filter((file) => !file.progress.uploadComplete)
    this.uppy.emit('upload-start', files)
    await Promise.all(files.map((file) => this.#uploadOne(file.id)))
  }

  async #uploadOne(fileID) {
    await this.#files.acquire()
    const start = this.uppy.getFile(fileID)
    if (!start) {
      this.#files.release()
      return
    }
    const run = new Run(start.isPaused)
    this.#runs.set(fileID, run)
    try {
      if (start.isGhost || !start.data) {
        throw new DfdError(0, 'file_missing', 'the file is no longer readable here: add it again')
      }
      let body = await this.#send(fileID, run)
      if (this.opts.waitForStored && !body.duplicate) body = await this.#waitStored(fileID, run, body.upload_id)
      if (run.cancelled || !this.uppy.getFile(fileID)) return
      this.uppy.emit('upload-success', this.uppy.getFile(fileID), { status: 200, body, uploadURL: undefined })
    } catch (error) {
      if (run.cancelled || !this.uppy.getFile(fileID)) return
      const response = error instanceof DfdError ? { status: error.status, body: error.body } : undefined
      this.uppy.emit('upload-error', this.uppy.getFile(fileID), error, response)
    } finally {
      this.#runs.delete(fileID)
      this.#files.release()
    }
  }

  #state(fileID) {
    const file = this.uppy.getFile(fileID)
    return (file && file.dfd) || {}
  }

  #setState(fileID, patch) {
    const file = this.uppy.getFile(fileID)
    if (file) this.uppy.setFileState(fileID, { dfd: { ...(file.dfd || {}), ...patch } })
  }

  #progress(fileID, bytesUploaded) {
    const file = this.uppy.getFile(fileID)
    if (file) this.uppy.emit('upload-progress', file, { uploader: this, bytesUploaded, bytesTotal: file.size })
  }

  /** `fn(signal)` until it succeeds: paused → waits and runs it again; retryable errors → backoff and again. */
  async #retrying(run, fn) {
    for (let attempt = 0; ; ) {
      await run.unpaused()
      try {
        return await fn(run.signal)
      } catch (error) {
        if (run.cancelled) throw new Aborted()
        if (isAbort(error) && run.paused) continue
        if (!retryable(error) || attempt >= this.opts.retryDelays.length) throw error
        const base = this.opts.retryDelays[attempt++]
        const wait = error.retryAfter ? error.retryAfter * 1000 : base / 2 + (Math.random() * base) / 2
        this.uppy.log(`[DfdUpload] ${error.message}: trying again in ${Math.round(wait)} ms`, 'warning')
        await run.sleep(wait)
      }
    }
  }

  #api(run, method, path, payload) {
    return this.#retrying(run, (signal) => apiCall(this.opts, method, path, payload, signal))
  }

  /** The file's SHA-256; null only when `stopped()` says the caller no longer wants it. */
  async #hash(fileID, run, stopped = () => false) {
    const file = this.uppy.getFile(fileID)
    const emit = (value) => {
      const current = this.uppy.getFile(fileID)
      if (current) {
        this.uppy.emit('preprocess-progress', current, { mode: 'determinate', message: 'Fingerprinting', value })
      }
    }
    emit(0)
    for (;;) {
      await run.unpaused()
      const hex = await hashFile(file.data, {
        signal: run.signal,
        onProgress: (done) => emit(file.size ? done / file.size : 1),
      })
      if (run.cancelled) throw new Aborted()
      if (hex) {
        const current = this.uppy.getFile(fileID)
        if (current) this.uppy.emit('preprocess-complete', current)
        return hex
      }
      if (stopped()) return null
    }
  }

  /** Sends the file as dfd asks; resolves dfd's answer (`upload_id`, ... or the 409's `duplicate: true`). */
  async #send(fileID, run) {
    const file = this.uppy.getFile(fileID)
    let state = this.#state(fileID)
    const overlap = this.opts.overlapFrom != null && file.size >= Math.max(this.opts.overlapFrom, 5 * 1024 * 1024)
    if (!state.sha256 && !state.uploadId && overlap) return this.#sendWhileHashing(fileID, run)
    if (!state.sha256) {
      this.#setState(fileID, { sha256: await this.#hash(fileID, run) })
      state = this.#state(fileID)
    }
    if (state.uploadId && state.multipart) {
      const resumed = await this.#resume(fileID, run, state)
      if (resumed) return resumed
    } else if (state.uploadId && !state.sent) {
      // a single PUT that did not get through is asked for again: its pending upload is cancelled, not left to
      // hold the tenant's quota until it expires
      await apiCall(this.opts, 'DELETE', `/uploads/${encodeURIComponent(state.uploadId)}`).catch(() => {})
      this.#setState(fileID, { uploadId: null })
    }
    const request = {
      filename: file.name || 'file',
      size: file.size,
      content_type: file.type || 'application/octet-stream',
      sha256: state.sha256,
    }
    if (this.opts.multipart && file.size >= 5 * 1024 * 1024) request.multipart = true
    if (this.opts.partSize) request.part_size = this.opts.partSize
    const answer = await this.#api(run, 'POST', '/upload', request)
    if (answer.status === 409) {
      this.#setState(fileID, { uploadId: answer.body.upload_id, sent: true, duplicate: true })
      return answer.body
    }
    const body = answer.body
    if (!body.multipart) {
      this.#setState(fileID, { uploadId: body.upload_id, multipart: false })
      await this.#retrying(run, (signal) =>
        putBytes(body.upload_url, body.headers || {}, file.data, {
          signal,
          onProgress: (sent) => this.#progress(fileID, sent),
        }),
      )
      this.#setState(fileID, { sent: true })
      const { upload_url: _url, headers: _headers, ...rest } = body
      return rest
    }
    this.#setState(fileID, {
      uploadId: body.upload_id,
      multipart: true,
      partSize: body.part_size,
      partCount: body.part_count,
      checksums: Boolean(this.opts.checksums && hasPartChecksums()),
    })
    return this.#multipart(fileID, run, new Map())
  }

  /**
   * A large new file: multipart at once, its parts sent while the worker hashes it. With the hash known, a
   * `GET /metadata/{sha256}` that finds the content at the tenant stops the transfer, cancels this upload and
   * asks `POST /upload` with the hash (the 409: a duplicate, as if hashed first); complete waits for that check.
   */
  async #sendWhileHashing(fileID, run) {
    const file = this.uppy.getFile(fileID)
    const stop = { superseded: false, failed: false }
    const hashing = this.#hash(fileID, run, () => stop.failed).then(async (hex) => {
      if (!hex) return null
      this.#setState(fileID, { sha256: hex }) // kept for a retry
      if (stop.failed) return hex
      try {
        await this.#api(run, 'GET', `/metadata/${hex}`)
      } catch (error) {
        if (error instanceof DfdError && error.status === 404) return hex
        throw error
      }
      stop.superseded = true
      run.interrupt()
      return hex
    })
    hashing.catch(() => {}) // awaited below; an early failure must not be an unhandled rejection meanwhile
    const request = {
      filename: file.name || 'file',
      size: file.size,
      content_type: file.type || 'application/octet-stream',
      multipart: true,
    }
    if (this.opts.partSize) request.part_size = this.opts.partSize
    let body
    try {
      body = (await this.#api(run, 'POST', '/upload', request)).body
      this.#setState(fileID, {
        uploadId: body.upload_id,
        multipart: true,
        partSize: body.part_size,
        partCount: body.part_count,
        checksums: Boolean(this.opts.checksums && hasPartChecksums()),
      })
      return await this.#multipart(fileID, run, new Map(), { stop, beforeComplete: () => hashing })
    } catch (error) {
      if (!stop.superseded || run.cancelled) {
        stop.failed = true // the file failed: its hash is not wanted any more
        if (!run.cancelled) run.interrupt()
        throw error
      }
    }
    // the tenant holds this content: the bytes sent so far are dropped with the cancelled upload
    const sha256 = await hashing
    await apiCall(this.opts, 'DELETE', `/uploads/${encodeURIComponent(body.upload_id)}`).catch(() => {})
    this.#setState(fileID, { uploadId: null, multipart: null })
    const precheck = await this.#api(run, 'POST', '/upload', { ...request, multipart: undefined, sha256 })
    if (precheck.status !== 409) {
      // deleted in between: this new upload is sent the ordinary way
      await apiCall(this.opts, 'DELETE', `/uploads/${encodeURIComponent(precheck.body.upload_id)}`).catch(() => {})
      return this.#send(fileID, run)
    }
    this.#setState(fileID, { uploadId: precheck.body.upload_id, sent: true, duplicate: true })
    this.#progress(fileID, 0)
    return precheck.body
  }

  /** A multipart upload started before (a reload, a retry): what S3 holds is kept. null → start over. */
  async #resume(fileID, run, state) {
    let listing
    try {
      listing = await this.#api(run, 'GET', `/uploads/${encodeURIComponent(state.uploadId)}/parts`)
    } catch (error) {
      if (error instanceof DfdError && [403, 404, 409, 410].includes(error.status)) {
        this.uppy.log(`[DfdUpload] upload ${state.uploadId} cannot continue (${error.message}): starting over`)
        this.#setState(fileID, { uploadId: null, multipart: null, sent: false })
        return null
      }
      throw error
    }
    const body = listing.body
    if (body.status && body.status !== 'pending') {
      if (FAILED.has(body.status)) {
        this.#setState(fileID, { uploadId: null, multipart: null, sent: false })
        return null
      }
      this.#setState(fileID, { sent: true })
      return { upload_id: state.uploadId, status: body.status }
    }
    const held = new Map()
    for (const part of body.parts || []) {
      if (part.size === partLength(state, this.uppy.getFile(fileID).size, part.part_number)) held.set(part.part_number, part)
    }
    this.uppy.emit('dfd:resumed', this.uppy.getFile(fileID), { uploadId: state.uploadId, partsHeld: held.size })
    return this.#multipart(fileID, run, held)
  }

  async #multipart(fileID, run, held, { stop = { superseded: false }, beforeComplete = null } = {}) {
    const file = this.uppy.getFile(fileID)
    const state = this.#state(fileID)
    const id = encodeURIComponent(state.uploadId)
    const etags = new Map([...held].map(([n, part]) => [n, part.etag]))
    const inFlight = new Map()
    let done = [...held.keys()].reduce((sum, n) => sum + partLength(state, file.size, n), 0)
    const report = () => this.#progress(fileID, done + [...inFlight.values()].reduce((a, b) => a + b, 0))
    report()

    const sendPart = async (n) => {
      const start = (n - 1) * state.partSize
      const length = partLength(state, file.size, n)
      const etag = await this.#retrying(run, async (signal) => {
        inFlight.set(n, 0)
        try {
          const blob = file.data.slice(start, start + length)
          const part = { part_number: n }
          if (state.checksums) part.checksum_sha256 = await partChecksum(await blob.arrayBuffer())
          const signed = await apiCall(this.opts, 'POST', `/uploads/${id}/parts`, { parts: [part] }, signal)
          const target = signed.body.parts[0]
          await this.#transfers.acquire()
          try {
            const put = await putBytes(target.url, target.headers || {}, blob, {
              signal,
              onProgress: (sent) => {
                inFlight.set(n, sent)
                report()
              },
            })
            if (!put.etag) {
              throw new DfdError(0, 'etag_hidden', "S3's answer has no ETag: the bucket's CORS must expose ETag")
            }
            return put.etag
          } finally {
            this.#transfers.release()
          }
        } finally {
          inFlight.delete(n)
        }
      })
      etags.set(n, etag)
      done += length
      report()
    }

    for (let round = 0; ; round++) {
      const todo = []
      for (let n = 1; n <= state.partCount; n++) if (!etags.has(n)) todo.push(n)
      const workers = Array.from({ length: Math.min(this.opts.limit, todo.length) }, async () => {
        while (todo.length && !stop.superseded) await sendPart(todo.shift())
      })
      await Promise.all(workers)
      if (beforeComplete) await beforeComplete()
      if (stop.superseded) throw new Superseded('the tenant holds this content')
      try {
        return await this.#complete(fileID, run, etags)
      } catch (error) {
        const details = error.body && error.body.error && error.body.error.details
        if (!(error instanceof DfdError) || error.code !== 'incomplete' || !details || round >= 2) throw error
        for (const n of [...(details.missing || []), ...(details.wrong_size || [])]) {
          if (etags.delete(n)) done -= partLength(state, file.size, n)
        }
      }
    }
  }

  /** POST /uploads/{id}/complete until dfd no longer answers "completing" (it then says when to ask again). */
  async #complete(fileID, run, etags) {
    const state = this.#state(fileID)
    const parts = [...etags].sort((a, b) => a[0] - b[0]).map(([n, etag]) => ({ part_number: n, etag }))
    const path = `/uploads/${encodeURIComponent(state.uploadId)}/complete`
    for (;;) {
      const answer = await this.#api(run, 'POST', path, { parts })
      if (!answer.body || answer.body.status !== 'completing') {
        this.#setState(fileID, { sent: true })
        return answer.body
      }
      const seconds = Number(answer.headers.get('retry-after')) || 1
      await run.sleep(seconds * 1000)
      await run.unpaused()
    }
  }

  /** GET /metadata/{upload_id} until stored or duplicate; failed, expired or deleted → DfdError. */
  async #waitStored(fileID, run, uploadId) {
    const file = this.uppy.getFile(fileID)
    this.uppy.emit('dfd:processing', file, { uploadId })
    const limit = this.opts.storedTimeout ?? 60000 + Math.ceil(file.size / (32 * 1024 * 1024)) * 1000
    const until = Date.now() + limit
    for (let delay = 400; ; delay = Math.min(delay * 1.6, 4000)) {
      const answer = await this.#api(run, 'GET', `/metadata/${encodeURIComponent(uploadId)}`)
      const status = answer.body && answer.body.status
      if (FINISHED.has(status)) return answer.body
      if (FAILED.has(status)) {
        const why = answer.body.failure ? `: ${answer.body.failure}` : ''
        throw new DfdError(0, status, `dfd did not store the upload (${status}${why})`, answer.body)
      }
      if (Date.now() > until) {
        throw new DfdError(0, 'timeout', `still ${status} after ${Math.round(limit / 1000)} s`, answer.body)
      }
      await run.sleep(delay)
      await run.unpaused()
    }
  }
}
