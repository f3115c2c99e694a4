// How the package travels: the worker's source is current, an esbuild bundle carries worker and wasm inline
// (one file, nothing fetched by URL) and uploads, and @uppy/core 5 drives the plugin as 6 does.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import Uppy5 from 'uppy-core-5'
import * as esbuild from 'esbuild'
import { startFakeDfd } from './support/fake-dfd.js'

const root = fileURLToPath(new URL('..', import.meta.url))
let dfd
before(async () => {
  dfd = await startFakeDfd()
})
after(() => dfd.close())

test('src/worker-source.js is what scripts/build-worker.js makes (npm run build)', () => {
  const made = execFileSync(process.execPath, ['scripts/build-worker.js', '--print'], { cwd: root, encoding: 'utf8' })
  assert.equal(readFileSync(join(root, 'src/worker-source.js'), 'utf8'), made)
})

test('bundled by esbuild into one file: worker and wasm inline, and it uploads', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dfd-uppy-'))
  const entry = join(dir, 'entry.js')
  writeFileSync(entry, "export { default as Uppy } from '@uppy/core'\nexport { default as DfdUpload } from '@dfd/uppy'\n")
  const outfile = join(dir, 'bundle.mjs')
  await esbuild.build({ entryPoints: [entry], bundle: true, format: 'esm', outfile, nodePaths: [join(root, 'node_modules')], alias: { '@dfd/uppy': root }, logLevel: 'silent' })
  const text = readFileSync(outfile, 'utf8')
  assert.match(text, /hashwasm/, 'hash-wasm travels inside')
  assert.doesNotMatch(text, /new URL\([^)]*import\.meta\.url/, 'nothing is fetched relative to the bundle')
  const { Uppy, DfdUpload } = await import(outfile)
  const uppy = new Uppy().use(DfdUpload, { endpoint: dfd.endpoint, headers: { authorization: `Bearer ${dfd.token}` } })
  uppy.addFile({ name: 'b.bin', data: new Blob([randomBytes(1000)]) })
  const result = await uppy.upload()
  assert.equal(result.successful.length, 1)
})

test('@uppy/core 5 drives it too', async () => {
  const { default: DfdUpload } = await import('@dfd/uppy')
  const uppy = new Uppy5().use(DfdUpload, { endpoint: dfd.endpoint, headers: { authorization: `Bearer ${dfd.token}` } })
  uppy.addFile({ name: 'c.bin', data: new Blob([randomBytes(2000)]) })
  const result = await uppy.upload()
  assert.equal(result.successful.length, 1)
  assert.match(result.successful[0].response.body.upload_id, /^[0-9a-f]{32}$/)
})
