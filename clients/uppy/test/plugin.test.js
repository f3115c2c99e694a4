// @dfd/uppy with the real @uppy/core against a fake dfd + S3 (test/support/fake-dfd.js).
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, test } from 'node:test'
import Uppy from '@uppy/core'
import DfdUpload from '@dfd/uppy'
import { sha256hex, startFakeDfd } from './support/fake-dfd.js'

const MIB = 1024 * 1024

function newUppy(dfd, options = {}) {
  const uppy = new Uppy({ autoProceed: false })
  uppy.use(DfdUpload, {
    endpoint: dfd.endpoint,
    headers: async () => ({ authorization: `Bearer ${dfd.token}` }),
    retryDelays: [10, 20, 40],
    ...options,
  })
  const events = { success: [], error: [], progress: [] }
  uppy.on('upload-success', (file, response) => events.success.push({ file, response }))
  uppy.on('upload-error', (file, error, response) => events.error.push({ file, error, response }))
  uppy.on('upload-progress', (file, progress) => events.progress.push(progress.bytesUploaded))
  return { uppy, events }
}

function add(uppy, bytes, name = 'f.bin') {
  return uppy.addFile({ name, type: 'application/octet-stream', data: new Blob([bytes]) })
}

let dfd
before(async () => {
  dfd = await startFakeDfd({ partSize: 5 * MIB, threshold: 8 * MIB })
})
after(() => dfd.close())

test('a new small file: hashed, one PUT with the signed checksum, success with dfd answer', async () => {
  const { uppy, events } = newUppy(dfd)
  const bytes = randomBytes(300 * 1024)
  add(uppy, bytes)
  const result = await uppy.upload()
  assert.equal(result.successful.length, 1)
  const body = events.success[0].response.body
  assert.match(body.upload_id, /^[0-9a-f]{32}$/)
  assert.equal(body.upload_url, undefined)
  assert.deepEqual(dfd.objects.get(body.upload_id), bytes)
  const put = dfd.requests.findLast((r) => r.method === 'PUT')
  assert.equal(put.headers['x-amz-checksum-sha256'], Buffer.from(sha256hex(bytes), 'hex').toString('base64'))
  assert.equal(put.headers.authorization, undefined, 'the API token never goes to S3')
  assert.equal(events.progress.at(-1), bytes.length)
})

test('a known file: 409 → upload-success with duplicate true and no byte sent', async () => {
  const bytes = randomBytes(100 * 1024)
  dfd.known.set(sha256hex(bytes), { hash: sha256hex(bytes), size: bytes.length })
  const { uppy, events } = newUppy(dfd)
  const putsBefore = dfd.puts().length
  add(uppy, bytes)
  await uppy.upload()
  assert.equal(events.success.length, 1)
  assert.equal(events.success[0].response.body.duplicate, true)
  assert.equal(dfd.puts().length, putsBefore)
})

test('multipart: parts in parallel with their SHA-256, a damaged part (BadDigest) sent again, 202 completing repeated', async () => {
  dfd.corruptOnce.add(2)
  dfd.completingAnswers = 1
  const { uppy, events } = newUppy(dfd, { limit: 3, waitForStored: true })
  const bytes = randomBytes(17 * MIB + 123)
  add(uppy, bytes, 'big.bin')
  const putsBefore = dfd.puts().length
  const result = await uppy.upload()
  assert.equal(result.failed.length, 0, String(events.error[0]?.error))
  const body = events.success[0].response.body
  assert.equal(body.status, 'stored')
  assert.equal(body.hash, sha256hex(bytes))
  assert.equal(dfd.puts().length - putsBefore, 5, '4 parts + the damaged one again')
  const completes = dfd.requests.filter((r) => r.path.endsWith('/complete'))
  assert.equal(completes.length, 2)
  assert.equal(events.progress.at(-1), bytes.length)
  assert.ok(events.progress.every((b) => b <= bytes.length))
})

test('dfd errors reach upload-error with code and text', async () => {
  dfd.quotaBytes = 1000
  try {
    const { uppy, events } = newUppy(dfd)
    add(uppy, randomBytes(5000))
    await uppy.upload()
    assert.equal(events.error.length, 1)
    const { error, response } = events.error[0]
    assert.equal(error.code, 'quota_exceeded')
    assert.match(error.message, /^quota_exceeded: the tenant's quota/)
    assert.equal(response.status, 403)
    assert.match(uppy.getFiles()[0].error, /quota_exceeded/)
  } finally {
    dfd.quotaBytes = Infinity
  }
})

test('headers may be an object; a 401 is an error with its status', async () => {
  const { uppy, events } = newUppy(dfd, { headers: { authorization: 'Bearer wrong' } })
  add(uppy, randomBytes(10))
  await uppy.upload()
  assert.equal(events.error[0].response.status, 401)
})

test('pause stops the parts, resume sends the rest', async () => {
  dfd.partDelayMs = 150
  try {
    const { uppy, events } = newUppy(dfd, { limit: 1 })
    const bytes = randomBytes(16 * MIB)
    const id = add(uppy, bytes, 'paused.bin')
    const done = uppy.upload()
    while (!events.progress.some((b) => b >= 5 * MIB)) await new Promise((r) => setTimeout(r, 10))
    uppy.pauseResume(id)
    const putsAtPause = dfd.puts().length
    await new Promise((r) => setTimeout(r, 600))
    assert.ok(dfd.puts().length <= putsAtPause + 1, 'at most the part in flight arrives')
    assert.equal(events.success.length, 0)
    uppy.pauseResume(id)
    await done
    assert.equal(events.success.length, 1)
    assert.equal(dfd.objects.get(events.success[0].response.body.upload_id).length, bytes.length)
  } finally {
    dfd.partDelayMs = 0
  }
})

test('removing a file mid-upload cancels it at dfd (DELETE → S3 abort) and reports nothing', async () => {
  dfd.partDelayMs = 150
  try {
    const { uppy, events } = newUppy(dfd, { limit: 1 })
    const id = add(uppy, randomBytes(16 * MIB), 'cancel.bin')
    const done = uppy.upload()
    while (!events.progress.some((b) => b > 0)) await new Promise((r) => setTimeout(r, 10))
    const uploadId = uppy.getFile(id).dfd.uploadId
    const cancelled = new Promise((resolve) => uppy.once('dfd:cancelled', resolve))
    uppy.removeFile(id)
    await done
    await cancelled
    assert.equal(dfd.uploads.get(uploadId).aborted, true)
    assert.equal(events.success.length + events.error.length, 0)
  } finally {
    dfd.partDelayMs = 0
  }
})

test('a restored upload (Golden Retriever state) sends only the parts S3 lacks', async () => {
  const bytes = randomBytes(16 * MIB)
  const first = newUppy(dfd, { limit: 1 })
  const id = add(first.uppy, bytes, 'resume.bin')
  dfd.partDelayMs = 100
  const firstRun = first.uppy.upload()
  while (!first.events.progress.some((b) => b >= 10 * MIB)) await new Promise((r) => setTimeout(r, 5))
  const saved = first.uppy.getFile(id).dfd
  first.uppy.pauseResume(id) // the page goes away: nothing more is sent
  dfd.partDelayMs = 0
  const held = dfd.uploads.get(saved.uploadId).parts.size
  assert.ok(held >= 2 && held < 4)

  const second = newUppy(dfd)
  const restored = add(second.uppy, bytes, 'resume.bin')
  second.uppy.setFileState(restored, { dfd: saved })
  const putsBefore = dfd.puts().length
  const resumed = new Promise((resolve) => second.uppy.once('dfd:resumed', (file, info) => resolve(info)))
  await second.uppy.upload()
  assert.equal((await resumed).partsHeld, held)
  assert.equal(dfd.puts().length - putsBefore, 4 - held)
  assert.deepEqual(dfd.objects.get(saved.uploadId), bytes)
  first.uppy.removeFile(id) // ends the paused run of the first page (its upload is complete: no DELETE)
  await firstRun
  assert.notEqual(dfd.uploads.get(saved.uploadId).status, 'deleted')
})

test('part_size and multipart options go to POST /upload', async () => {
  const { uppy, events } = newUppy(dfd, { multipart: true, partSize: 6 * MIB })
  add(uppy, randomBytes(7 * MIB))
  await uppy.upload()
  assert.equal(events.error.length, 0, String(events.error[0]?.error))
  const upload = dfd.uploads.get(events.success[0].response.body.upload_id)
  assert.equal(upload.partSize, 6 * MIB)
  assert.equal(upload.partCount, 2)
})

test('a retried single PUT cancels its earlier pending upload and sends again', async () => {
  const { uppy, events } = newUppy(dfd, { retryDelays: [] })
  const bytes = randomBytes(4000)
  const id = add(uppy, bytes, 'retried.bin')
  dfd.failPuts = 1
  await uppy.upload()
  assert.equal(events.error.length, 1)
  assert.equal(events.error[0].error.code, 'InternalError')
  const first = uppy.getFile(id).dfd.uploadId
  await uppy.retryUpload(id)
  assert.equal(events.success.length, 1)
  const second = events.success[0].response.body.upload_id
  assert.notEqual(second, first)
  assert.equal(dfd.uploads.get(first).status, 'deleted')
  assert.deepEqual(dfd.objects.get(second), bytes)
})

test('a large file is sent while it is hashed; stored with its hash', async () => {
  const { uppy, events } = newUppy(dfd, { overlapFrom: 8 * MIB, waitForStored: true })
  const bytes = randomBytes(12 * MIB)
  const id = add(uppy, bytes, 'overlap-new.bin')
  await uppy.upload()
  assert.equal(events.error.length, 0, String(events.error[0]?.error))
  const body = events.success[0].response.body
  assert.equal(body.status, 'stored')
  assert.equal(body.hash, sha256hex(bytes))
  assert.equal(uppy.getFile(id).dfd.sha256, sha256hex(bytes))
  const post = dfd.requests.filter((r) => r.path === '/upload').at(-1)
  assert.ok(post, 'one POST /upload')
})

test('a large known file sent while hashed stops, cancels its upload and reports the duplicate', async () => {
  const bytes = randomBytes(24 * MIB)
  dfd.known.set(sha256hex(bytes), { hash: sha256hex(bytes), size: bytes.length })
  dfd.partDelayMs = 200
  try {
    const { uppy, events } = newUppy(dfd, { overlapFrom: 8 * MIB, limit: 1 })
    add(uppy, bytes, 'overlap-known.bin')
    const putsBefore = dfd.puts().length
    await uppy.upload()
    assert.equal(events.error.length, 0, String(events.error[0]?.error))
    assert.equal(events.success[0].response.body.duplicate, true)
    assert.ok(dfd.puts().length - putsBefore < 5, 'the transfer stopped before all 5 parts')
    const cancelled = [...dfd.uploads.values()].filter((u) => u.filename === 'overlap-known.bin' && u.aborted)
    assert.equal(cancelled.length, 1, 'the multipart upload started while hashing is cancelled')
  } finally {
    dfd.partDelayMs = 0
  }
})

test('a large file refused while it is hashed reports dfd error once, and nothing more happens', async () => {
  dfd.quotaBytes = 10 * MIB
  try {
    const { uppy, events } = newUppy(dfd, { overlapFrom: 8 * MIB })
    add(uppy, randomBytes(64 * MIB), 'overlap-refused.bin')
    const before = dfd.requests.length
    await uppy.upload()
    assert.equal(events.error.length, 1)
    assert.equal(events.error[0].error.code, 'quota_exceeded')
    await new Promise((r) => setTimeout(r, 300))
    // the hash may have finished first (then its check of the content went out): never a part, never a retry
    const calls = dfd.requests.slice(before).map((r) => `${r.method} ${r.path}`)
    assert.deepEqual(calls.filter((c) => !c.startsWith('GET /metadata/')), ['POST /upload'])
    assert.ok(calls.length <= 2, calls)
    assert.equal(events.success.length + events.error.length, 1)
  } finally {
    dfd.quotaBytes = Infinity
  }
})
