// The two kinds of request the plugin makes: JSON calls to dfd's API (with the page's headers) and PUTs of bytes
// to presigned S3 URLs (only the headers dfd signed; XMLHttpRequest where it exists, for upload progress).

/** An error of dfd's API (`{"error": {"code", "message"}}`) or of S3 (`<Error><Code>`), or a network failure. */
export class DfdError extends Error {
  constructor(status, code, message, body = null, retryAfter = null) {
    super(code ? `${code}: ${message}` : message)
    this.name = 'DfdError'
    this.status = status
    this.code = code
    this.text = message
    this.body = body
    this.retryAfter = retryAfter
  }
}

export class Aborted extends Error {
  constructor() {
    super('aborted')
    this.name = 'AbortError'
  }
}

function s3Error(status, text) {
  const code = /<Code>([^<]*)<\/Code>/.exec(text || '')
  const message = /<Message>([^<]*)<\/Message>/.exec(text || '')
  return new DfdError(
    status,
    code ? code[1] : `http_${status}`,
    message ? message[1] : `S3 answered HTTP ${status}`,
    text || null,
  )
}

/** Whether trying the same request again later may succeed. */
export function retryable(error) {
  if (!(error instanceof DfdError)) return false
  const { status, code, text } = error
  if (status === 0 || status === 408 || status === 429 || status >= 500) return true
  // S3: bytes damaged on the way (the part is read and hashed again), a slow body, an expired URL
  if (code === 'BadDigest' || code === 'RequestTimeout' || code === 'XAmzContentSHA256Mismatch') return true
  return status === 403 && /expired/i.test(text || '')
}

export function isAbort(error) {
  return error instanceof Aborted || (error && error.name === 'AbortError')
}

export async function resolveHeaders(headers) {
  const value = typeof headers === 'function' ? await headers() : headers
  return { ...(value || {}) }
}

function joinUrl(endpoint, path) {
  return `${String(endpoint).replace(/\/+$/, '')}${path}`
}

/** One call to dfd's API: resolves {status, body, headers} for 2xx and 409, rejects with DfdError otherwise. */
export async function apiCall(opts, method, path, payload, signal) {
  const headers = { accept: 'application/json', ...(await resolveHeaders(opts.headers)) }
  const init = { method, headers, signal }
  if (payload !== undefined) {
    headers['content-type'] = 'application/json'
    init.body = JSON.stringify(payload)
  }
  let response
  try {
    response = await fetch(joinUrl(opts.endpoint, path), init)
  } catch (error) {
    if (isAbort(error) || (signal && signal.aborted)) throw new Aborted()
    throw new DfdError(0, 'network', `could not reach ${opts.endpoint} (${error.message})`)
  }
  const text = await response.text()
  let body = null
  try {
    body = text ? JSON.parse(text) : null
  } catch {
    body = null
  }
  if (response.ok || (response.status === 409 && body && body.duplicate === true)) {
    return { status: response.status, body, headers: response.headers }
  }
  const err = body && body.error ? body.error : null
  const retryAfter = Number(response.headers.get('retry-after')) || null
  throw new DfdError(
    response.status,
    err && err.code ? err.code : (body && body.message ? 'unauthorized' : `http_${response.status}`),
    err && err.message ? err.message : (body && body.message) || `HTTP ${response.status}`,
    body,
    retryAfter,
  )
}

/**
 * PUT `blob` to a presigned URL with exactly `headers` (never the API's Authorization). Resolves {status, etag};
 * a 412 (the object exists: an earlier attempt got through) resolves too. `onProgress(bytesSent)`.
 */
export function putBytes(url, headers, blob, { onProgress, signal } = {}) {
  const sendable = { ...headers }
  delete sendable['content-length'] // the browser sets it from the body; it is the size the URL was signed for
  delete sendable['Content-Length']
  if (typeof XMLHttpRequest === 'function') return xhrPut(url, sendable, blob, onProgress, signal)
  return fetchPut(url, sendable, blob, onProgress, signal)
}

function xhrPut(url, headers, blob, onProgress, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(new Aborted())
    const xhr = new XMLHttpRequest()
    const onAbort = () => xhr.abort()
    if (signal) signal.addEventListener('abort', onAbort)
    const done = () => signal && signal.removeEventListener('abort', onAbort)
    xhr.open('PUT', url, true)
    for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value)
    xhr.upload.onprogress = (event) => onProgress && onProgress(event.loaded)
    xhr.onload = () => {
      done()
      if ((xhr.status >= 200 && xhr.status < 300) || xhr.status === 412) {
        resolve({ status: xhr.status, etag: xhr.getResponseHeader('etag') })
      } else {
        reject(s3Error(xhr.status, xhr.responseText))
      }
    }
    xhr.onerror = () => {
      done()
      reject(new DfdError(0, 'network', 'the upload to S3 failed (network error, or CORS refused the answer)'))
    }
    xhr.onabort = () => {
      done()
      reject(new Aborted())
    }
    xhr.send(blob)
  })
}

async function fetchPut(url, headers, blob, onProgress, signal) {
  let response
  try {
    response = await fetch(url, { method: 'PUT', headers, body: blob, signal, duplex: 'half' })
  } catch (error) {
    if (isAbort(error) || (signal && signal.aborted)) throw new Aborted()
    throw new DfdError(0, 'network', `the upload to S3 failed (${error.message})`)
  }
  const text = await response.text()
  if (response.ok || response.status === 412) {
    if (onProgress) onProgress(blob.size)
    return { status: response.status, etag: response.headers.get('etag') }
  }
  throw s3Error(response.status, text)
}
