#!/usr/bin/env node
// Checks a broker with @platformatic/kafka: metadata, create topic, produce,
// consume.
//
// Usage: node platformatic_check.mjs BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]
//
// MECHANISM is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 for a SASL_PLAINTEXT
// listener, or PLAINTEXT for no SASL (USER and PASSWORD are then ignored).
// With KAFKANET_CHECK_CA set to a PEM CA file the connection is TLS
// (SASL_SSL, or SSL without SASL), trusting that CA.
// @platformatic/kafka comes from node/node_modules (npm ci --prefix node).
// The script creates TOPIC with P partitions (Admin.createTopics), reads
// the cluster's metadata, produces N records spread over the partitions,
// and consumes them back: without GROUP with plain Fetch requests to each
// partition's leader (Consumer.fetch, by topic id), with GROUP through that
// consumer group (join, consume, commit, leave), checking the committed
// offsets. It prints "OK platformatic-kafka VERSION MECHANISM brokers=B ..."
// on success; any failure exits 1 with "FAIL platformatic-kafka: ..." on
// stderr. Every step has a timeout and nothing is retried, so an
// authentication error fails at once.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const N = 9
const P = 3
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
const { Admin, Consumer, Producer, MessagesStreamModes, stringSerializers, stringDeserializers } = kafka

// step runs one call under TIMEOUT_MS and names it in the failure.
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

// describe names an error and its causes; an authentication error, however
// deep, is called one.
function describe (e) {
  const parts = []
  let auth = false
  for (let cur = e; cur; cur = cur.cause || (cur.errors && cur.errors[0])) {
    parts.push(`${cur.name}: ${cur.message}`)
    if (cur.name === 'AuthenticationError' || cur.code === 'PLT_KFK_AUTHENTICATION') auth = true
    if (parts.length > 5) break
  }
  return (auth ? 'SASL authentication failed: ' : '') + parts.join(' <- ')
}

const args = process.argv.slice(2)
if (args.length !== 5 && args.length !== 6) {
  process.stderr.write('usage: node platformatic_check.mjs BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]\n')
  process.exit(2)
}
const [bootstrap, mechanism, username, password, topic, group] = args
const common = {
  clientId: 'platformatic-check',
  bootstrapBrokers: [bootstrap],
  connectTimeout: TIMEOUT_MS,
  requestTimeout: TIMEOUT_MS,
  retries: 0
}
if (mechanism !== 'PLAINTEXT') common.sasl = { mechanism, username, password }
if (process.env.KAFKANET_CHECK_CA) common.tls = { ca: [readFileSync(process.env.KAFKANET_CHECK_CA, 'utf-8')] }

const want = []
for (let i = 0; i < N; i++) want.push('value-' + i)

const admin = new Admin(common)
const producer = new Producer({ ...common, serializers: stringSerializers })
const consumer = new Consumer({
  ...common,
  groupId: group || 'platformatic-check',
  deserializers: stringDeserializers,
  sessionTimeout: 10000,
  heartbeatInterval: 1000,
  retries: group ? 5 : 0 // joining may be told to rejoin
})
let brokers
let how
try {
  await step('createTopics', admin.createTopics({ topics: [topic], partitions: P, replicas: 1 }))
  const md = await step('metadata', admin.metadata({ topics: [topic] }))
  brokers = md.brokers.size
  const tm = md.topics.get(topic)
  if (!tm || tm.partitionsCount !== P) fail('unexpected metadata for ' + topic + ': ' + JSON.stringify(tm, (k, v) => typeof v === 'bigint' ? String(v) : v))

  await step('send', producer.send({ messages: want.map((value, i) => ({ topic, value, partition: i % P })) }))

  const got = []
  if (!group) {
    for (let p = 0; p < P; p++) {
      const resp = await step('fetch partition ' + p, consumer.fetch({
        node: tm.partitions[p].leader,
        maxWaitTime: 1000,
        topics: [{ topicId: tm.id, partitions: [{ partition: p, fetchOffset: 0n, currentLeaderEpoch: -1, lastFetchedEpoch: -1, partitionMaxBytes: 1 << 20 }] }]
      }))
      for (const rt of resp.responses) {
        for (const rp of rt.partitions) {
          if (rp.errorCode !== 0) fail(`fetch partition ${p}: error code ${rp.errorCode}`)
          for (const batch of rp.records || []) {
            for (const r of batch.records) got.push(r.value.toString())
          }
        }
      }
    }
    how = 'from each partition leader'
  } else {
    const stream = await step('consume', consumer.consume({ topics: [topic], mode: MessagesStreamModes.EARLIEST, autocommit: false }))
    await step('consume ' + N + ' records', (async () => {
      for await (const message of stream) {
        got.push(message.value)
        await message.commit()
        if (got.length === N) break
      }
    })())
    const committed = await step('listCommittedOffsets', consumer.listCommittedOffsets({ topics: [{ topic, partitions: [0, 1, 2] }] }))
    const sum = (committed.get(topic) || []).reduce((s, o) => s + Number(o), 0)
    if (sum !== N) fail('committed offsets ' + JSON.stringify([...committed].map(([k, v]) => [k, v.map(String)])))
    await step('close stream', stream.close())
    how = 'through group ' + group + ', committed'
  }
  got.sort()
  if (JSON.stringify(got) !== JSON.stringify(want)) fail('consumed ' + JSON.stringify(got))
} finally {
  await Promise.allSettled([consumer.close(true), producer.close(), admin.close()])
}
process.stdout.write(`OK platformatic-kafka ${version} ${mechanism} brokers=${brokers} produced and consumed ${N} records ${how}\n`)
process.exit(0)
