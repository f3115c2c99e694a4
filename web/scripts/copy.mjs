// `node scripts/copy.mjs PACKAGE DEST FILE...`: copies FILEs (paths inside the installed npm PACKAGE) into DEST
// (relative to web/), each under its own base name, and prints the package's version. The copies are committed;
// CI copies again and fails on any difference (Makefile: test-js).
import { copyFileSync, mkdirSync } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const web = new URL('..', import.meta.url).pathname
const [name, dest, ...files] = process.argv.slice(2)
if (!name || !dest || files.length === 0) {
  console.error('usage: node scripts/copy.mjs PACKAGE DEST FILE...')
  process.exit(2)
}
const root = dirname(require.resolve(`${name}/package.json`))
const out = resolve(web, dest)
mkdirSync(out, { recursive: true })
for (const file of files) copyFileSync(resolve(root, file), resolve(out, basename(file)))
console.log('vendored', name, require(`${name}/package.json`).version, 'into', dest)
