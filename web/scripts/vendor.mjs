// `npm run vendor`: Uppy (core, Dashboard, Golden Retriever) and @dfd/uppy from node_modules, bundled by esbuild
// into ONE ES module the upload page imports (vendor/uppy/uppy.js, with the hash worker and its wasm inside),
// Uppy's CSS, and the licences. The output is committed; CI rebuilds it and fails on any difference.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import * as esbuild from 'esbuild'

const require = createRequire(import.meta.url)
const web = new URL('..', import.meta.url).pathname
const out = `${web}vendor/uppy/`
mkdirSync(out, { recursive: true })
await esbuild.build({
  stdin: {
    contents: [
      "export { default as Uppy } from '@uppy/core'",
      "export { default as Dashboard } from '@uppy/dashboard'",
      "export { default as GoldenRetriever } from '@uppy/golden-retriever'",
      "export { default as DfdUpload } from '@dfd/uppy'",
    ].join('\n'),
    resolveDir: web,
  },
  bundle: true,
  format: 'esm',
  minify: true,
  target: 'es2020',
  legalComments: 'eof',
  outfile: `${out}uppy.js`,
  logLevel: 'warning',
})
const css = ['@uppy/core/css/style.min.css', '@uppy/dashboard/css/style.min.css']
writeFileSync(`${out}uppy.css`, css.map((name) => readFileSync(require.resolve(name), 'utf8')).join('\n'))
const versions = {}
for (const name of ['@uppy/core', '@uppy/dashboard', '@uppy/golden-retriever', '@dfd/uppy', 'hash-wasm']) {
  const pkg = require(`${name}/package.json`)
  versions[name] = pkg.version
  const licence = require.resolve(`${name}/package.json`).replace(/package\.json$/, 'LICENSE')
  try {
    copyFileSync(licence, `${out}LICENSE.${name.replace('/', '__').replace('@', '')}`)
  } catch {
    // @dfd/uppy is this repository's own (MIT, see its package.json)
  }
}
writeFileSync(`${out}versions.json`, `${JSON.stringify(versions, null, 2)}\n`)
console.log('vendored', versions)
