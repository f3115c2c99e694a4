// SHA-256 of a whole file, streamed: in a Web Worker (started from a blob: URL holding the worker's source, so
// it travels inside any bundle) where Workers exist, else in this thread (Node, old runtimes).
import { createSHA256 } from 'hash-wasm'
import { sha256OfBlob } from './hash-core.js'
import workerSource from './worker-source.js'

let workerUrl = null

function canUseWorker() {
  return typeof Worker === 'function' && typeof URL !== 'undefined' && typeof URL.createObjectURL === 'function'
}

/**
 * Resolves the lowercase hex SHA-256 of `blob`, or null when `signal` aborts. `onProgress(bytesHashed)`.
 */
export function hashFile(blob, { onProgress, signal } = {}) {
  if (!canUseWorker()) {
    return sha256OfBlob(createSHA256, blob, onProgress, () => Boolean(signal && signal.aborted))
  }
  return new Promise((resolve, reject) => {
    if (!workerUrl) workerUrl = URL.createObjectURL(new Blob([workerSource], { type: 'text/javascript' }))
    const worker = new Worker(workerUrl)
    const finish = () => {
      worker.terminate()
      if (signal) signal.removeEventListener('abort', onAbort)
    }
    const onAbort = () => {
      finish()
      resolve(null)
    }
    if (signal) {
      if (signal.aborted) return resolve(null)
      signal.addEventListener('abort', onAbort)
    }
    worker.onmessage = (event) => {
      const { progress, hex, error } = event.data
      if (progress !== undefined) {
        if (onProgress) onProgress(progress)
      } else if (hex) {
        finish()
        resolve(hex)
      } else {
        finish()
        reject(new Error(`hashing failed: ${error}`))
      }
    }
    worker.onerror = (event) => {
      finish()
      reject(new Error(`hashing failed: ${event.message || 'the hash worker could not start'}`))
    }
    worker.postMessage({ blob })
  })
}

/** Base64 SHA-256 of a part's bytes (S3's x-amz-checksum-sha256), or null without WebCrypto. */
export async function partChecksum(bytes) {
  const subtle = globalThis.crypto && globalThis.crypto.subtle
  if (!subtle) return null
  const digest = new Uint8Array(await subtle.digest('SHA-256', bytes))
  let binary = ''
  for (const byte of digest) binary += String.fromCharCode(byte)
  return btoa(binary)
}

export function hasPartChecksums() {
  return Boolean(globalThis.crypto && globalThis.crypto.subtle)
}
