// The streaming SHA-256 both the Web Worker and the in-thread fallback run: 4 MiB slices of the Blob through
// hash-wasm's incremental SHA-256, so memory stays flat whatever the file's size. `createSHA256` is hash-wasm's.
export const CHUNK = 4 * 1024 * 1024

export async function sha256OfBlob(createSHA256, blob, onProgress, isCancelled) {
  const hasher = await createSHA256()
  hasher.init()
  for (let offset = 0; offset < blob.size; offset += CHUNK) {
    if (isCancelled && isCancelled()) return null
    const chunk = new Uint8Array(await blob.slice(offset, offset + CHUNK).arrayBuffer())
    hasher.update(chunk)
    if (onProgress) onProgress(Math.min(offset + CHUNK, blob.size))
  }
  return hasher.digest('hex')
}
