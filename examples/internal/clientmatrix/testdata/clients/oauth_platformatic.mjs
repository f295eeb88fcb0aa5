#!/usr/bin/env node
// Checks SASL/OAUTHBEARER with @platformatic/kafka: metadata, produce.
//
// Usage: node oauth_platformatic.mjs BOOTSTRAP TOKEN TOPIC
//
// @platformatic/kafka (from node/node_modules) sends TOKEN (sasl.token). On a
// SASL_PLAINTEXT listener the script reads the metadata of TOPIC, which must
// exist, and produces N records to its partition 0. It prints "OK
// platformatic-kafka VERSION OAUTHBEARER brokers=B ..." on success; any
// failure exits 1 with "FAIL platformatic-kafka: ..." on stderr (a refused
// token: "SASL authentication failed: ..."). Nothing is retried and every
// step has a timeout.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const N = 3
const TIMEOUT_MS = 20000

function fail (msg) {
  process.stderr.write('FAIL platformatic-kafka: ' + msg + '\n')
  process.exit(1)
}

const nodeDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'node')
let kafka, version
try {
  const require = createRequire(path.join(nodeDir, 'package.json'))
  kafka = await import(require.resolve('@platformatic/kafka'))
  version = JSON.parse(readFileSync(path.join(nodeDir, 'node_modules', '@platformatic', 'kafka', 'package.json'))).version
} catch (e) {
  fail('@platformatic/kafka is not installed (npm ci --prefix ' + nodeDir + '): ' + e.message)
}
const { Admin, Producer, stringSerializers } = kafka

async function step (name, promise) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${TIMEOUT_MS} ms`)), TIMEOUT_MS)
  })
  try {
    return await Promise.race([promise, timeout])
  } catch (e) {
    fail(`${name}: ${describe(e)}`)
  } finally {
    clearTimeout(timer)
  }
}

// describe names an error and its causes. A refused token is an
// authentication error, however deep, or, since @platformatic/kafka takes
// the broker's error challenge ({"status":"invalid_token"}) for success,
// an ILLEGAL_SASL_STATE (34) answer to its next request, as Apache Kafka
// answers it too.
function describe (e) {
  const parts = []
  let auth = false
  for (let cur = e; cur; cur = cur.cause || (cur.errors && cur.errors[0])) {
    parts.push(`${cur.name}: ${cur.message}`)
    if (cur.name === 'AuthenticationError' || cur.code === 'PLT_KFK_AUTHENTICATION' || cur.apiCode === 34) auth = true
    if (parts.length > 5) break
  }
  return (auth ? 'SASL authentication failed: ' : '') + parts.join(' <- ')
}

const args = process.argv.slice(2)
if (args.length !== 3) {
  process.stderr.write('usage: node oauth_platformatic.mjs BOOTSTRAP TOKEN TOPIC\n')
  process.exit(2)
}
const [bootstrap, token, topic] = args
const common = {
  clientId: 'platformatic-oauth',
  bootstrapBrokers: [bootstrap],
  connectTimeout: TIMEOUT_MS,
  requestTimeout: TIMEOUT_MS,
  retries: 0,
  sasl: { mechanism: 'OAUTHBEARER', token }
}
const admin = new Admin(common)
const producer = new Producer({ ...common, serializers: stringSerializers })
let brokers
try {
  const md = await step('metadata', admin.metadata({ topics: [topic] }))
  brokers = md.brokers.size
  if (!md.topics.get(topic)) fail('no metadata for ' + topic)
  const messages = []
  for (let i = 0; i < N; i++) messages.push({ topic, value: 'oauth-' + i, partition: 0 })
  await step('send', producer.send({ messages }))
} finally {
  await Promise.allSettled([producer.close(), admin.close()])
}
process.stdout.write(`OK platformatic-kafka ${version} OAUTHBEARER brokers=${brokers} produced ${N} records\n`)
process.exit(0)
