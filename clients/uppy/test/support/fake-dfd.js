// A dfd API and S3 in one Node HTTP server, faithful to what the plugin relies on (README "API"): the 409
// precheck, single PUTs, multipart parts with per-part SHA-256 (400 BadDigest on a mismatch), the parts listing,
// complete (with an optional 202 "completing" + Retry-After first), DELETE, metadata. Hooks let a test corrupt a
// part, refuse a quota, or see every request.
import { createHash, randomBytes } from 'node:crypto'
import { createServer } from 'node:http'

const MIB = 1024 * 1024

export async function startFakeDfd(options = {}) {
  const dfd = {
    partSize: options.partSize ?? 5 * MIB,
    threshold: options.threshold ?? 8 * MIB,
    known: new Map(), // sha256 -> file view (what the tenant holds)
    uploads: new Map(),
    objects: new Map(), // upload id -> Buffer
    requests: [],
    corruptOnce: new Set(options.corruptParts || []), // part numbers whose first PUT arrives damaged
    completingAnswers: options.completingAnswers ?? 0, // "completing" answers before the real one
    quotaBytes: options.quotaBytes ?? Infinity,
    token: options.token ?? 'token-1',
    partDelayMs: options.partDelayMs ?? 0,
    failPuts: 0, // the next N PUTs answer 500
  }
  const server = createServer(async (req, res) => {
    const chunks = []
    try {
      for await (const chunk of req) chunks.push(chunk)
    } catch {
      return // the client aborted mid-body (a cancelled upload): nobody is left to answer, as with a real server
    }
    const raw = Buffer.concat(chunks)
    const url = new URL(req.url, 'http://x')
    dfd.requests.push({ method: req.method, path: url.pathname, headers: req.headers, size: raw.length })
    const json = (status, body, headers = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers })
      res.end(body === undefined ? '' : JSON.stringify(body))
    }
    const error = (status, code, message, details) => json(status, { error: { code, message, details } })
    const s3Error = (status, code) => {
      res.writeHead(status, { 'content-type': 'application/xml' })
      res.end(`<?xml version="1.0"?><Error><Code>${code}</Code><Message>${code} from the fake S3</Message></Error>`)
    }
    try {
      if (url.pathname.startsWith('/s3/')) {
        const [, , id, part] = url.pathname.split('/')
        const upload = dfd.uploads.get(id)
        if (!upload || upload.aborted) return s3Error(404, 'NoSuchUpload')
        if (dfd.partDelayMs) await new Promise((r) => setTimeout(r, dfd.partDelayMs))
        if (dfd.failPuts > 0) {
          dfd.failPuts -= 1
          return s3Error(500, 'InternalError')
        }
        let body = raw
        const n = Number(part)
        if (part && dfd.corruptOnce.delete(n)) body = Buffer.concat([Buffer.from([body[0] ^ 0xff]), body.subarray(1)])
        const claimed = req.headers['x-amz-checksum-sha256']
        if (claimed && claimed !== createHash('sha256').update(body).digest('base64')) return s3Error(400, 'BadDigest')
        const etag = `"${createHash('md5').update(body).digest('hex')}"`
        if (part) upload.parts.set(n, { etag, body })
        else {
          if (dfd.objects.has(id)) return s3Error(412, 'PreconditionFailed')
          dfd.objects.set(id, body)
          upload.status = 'stored'
        }
        res.writeHead(200, { etag })
        return res.end()
      }
      if (req.headers.authorization !== `Bearer ${dfd.token}`) return json(401, { message: 'Unauthorized' })
      const payload = raw.length ? JSON.parse(raw.toString()) : undefined
      const base = `http://127.0.0.1:${server.address().port}`
      if (req.method === 'POST' && url.pathname === '/upload') {
        const { filename, size, sha256 } = payload
        if (sha256 && dfd.known.has(sha256)) {
          const id = randomBytes(16).toString('hex')
          dfd.uploads.set(id, { id, status: 'duplicate', size, filename, parts: new Map() })
          return json(409, { duplicate: true, upload_id: id, file: dfd.known.get(sha256) })
        }
        if (size > dfd.quotaBytes) {
          return error(403, 'quota_exceeded', `the tenant's quota of ${dfd.quotaBytes} bytes would be exceeded`, {
            limit: dfd.quotaBytes,
            usage: 0,
            kind: 'bytes',
          })
        }
        const id = randomBytes(16).toString('hex')
        const multipart = payload.multipart || size >= dfd.threshold
        const partSize = payload.part_size ?? dfd.partSize
        const upload = { id, status: 'pending', size, filename, sha256, multipart, partSize, parts: new Map() }
        dfd.uploads.set(id, upload)
        if (multipart) {
          upload.partCount = Math.ceil(size / partSize)
          return json(201, { upload_id: id, multipart: true, part_size: partSize, part_count: upload.partCount })
        }
        const headers = { 'content-type': payload.content_type, 'if-none-match': '*' }
        if (sha256) headers['x-amz-checksum-sha256'] = Buffer.from(sha256, 'hex').toString('base64')
        return json(201, { upload_id: id, multipart: false, upload_url: `${base}/s3/${id}`, method: 'PUT', headers })
      }
      const m = /^\/uploads\/([0-9a-f]+)(?:\/(parts|complete))?$/.exec(url.pathname)
      const upload = m && dfd.uploads.get(m[1])
      if (m && !upload) return error(404, 'not_found', 'no such upload')
      if (m && req.method === 'DELETE' && !m[2]) {
        upload.aborted = true
        upload.status = 'deleted'
        return json(204)
      }
      if (m && m[2] === 'parts' && req.method === 'POST') {
        if (upload.status !== 'pending') return error(409, 'not_pending', 'not pending')
        const parts = payload.parts.map(({ part_number: n, checksum_sha256: sum }) => ({
          part_number: n,
          url: `${base}/s3/${upload.id}/${n}`,
          method: 'PUT',
          headers: sum ? { 'x-amz-checksum-sha256': sum } : {},
        }))
        return json(200, { parts, expires_in: 900 })
      }
      if (m && m[2] === 'parts' && req.method === 'GET') {
        const parts = [...upload.parts].map(([n, p]) => ({ part_number: n, etag: p.etag, size: p.body.length }))
        return json(200, {
          parts,
          part_size: upload.partSize,
          part_count: upload.partCount,
          size: upload.size,
          status: upload.status === 'completed' ? 'pending' : upload.status,
        })
      }
      if (m && m[2] === 'complete') {
        const missing = []
        for (let n = 1; n <= upload.partCount; n++) if (!upload.parts.has(n)) missing.push(n)
        if (missing.length) return error(409, 'incomplete', 'parts missing', { missing, wrong_size: [] })
        for (const { part_number: n, etag } of payload.parts) {
          if (upload.parts.get(n).etag !== etag) return error(409, 'etag_mismatch', `part ${n}`)
        }
        if (dfd.completingAnswers > 0) {
          dfd.completingAnswers -= 1
          return json(202, { upload_id: upload.id, status: 'completing' }, { 'retry-after': '1' })
        }
        const bytes = Buffer.concat([...upload.parts].sort((a, b) => a[0] - b[0]).map(([, p]) => p.body))
        dfd.objects.set(upload.id, bytes)
        upload.status = 'stored'
        return json(202, { upload_id: upload.id, status: 'pending' })
      }
      const meta = /^\/metadata\/([0-9a-f]+)$/.exec(url.pathname)
      if (meta && req.method === 'GET' && meta[1].length === 64) {
        const file = dfd.known.get(meta[1])
        return file ? json(200, file) : error(404, 'not_found', 'not found')
      }
      if (meta && req.method === 'GET') {
        const found = dfd.uploads.get(meta[1])
        if (!found) return error(404, 'not_found', 'not found')
        const bytes = dfd.objects.get(found.id)
        const hash = bytes ? createHash('sha256').update(bytes).digest('hex') : undefined
        return json(200, { upload_id: found.id, status: found.status, filename: found.filename, size: found.size, hash })
      }
      return error(404, 'not_found', `no route ${req.method} ${url.pathname}`)
    } catch (err) {
      return error(500, 'internal', String(err))
    }
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  dfd.endpoint = `http://127.0.0.1:${server.address().port}`
  dfd.close = () => new Promise((resolve) => server.close(resolve))
  dfd.puts = () => dfd.requests.filter((r) => r.method === 'PUT')
  return dfd
}

export function sha256hex(bytes) {
  return createHash('sha256').update(bytes).digest('hex')
}
