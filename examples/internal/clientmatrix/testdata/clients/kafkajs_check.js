#!/usr/bin/env node
// Checks a broker with kafkajs: metadata, create topic, produce, and consume
// through a consumer group.
//
// Usage: node kafkajs_check.js BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]
//
// MECHANISM is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 for a SASL_PLAINTEXT
// listener, or PLAINTEXT for no SASL (USER and PASSWORD are then ignored).
// With KAFKANET_CHECK_CA set to a PEM CA file the connection is TLS
// (SASL_SSL, or SSL without SASL), trusting that CA.
// kafkajs comes from node/node_modules (npm ci --prefix node). The script
// reads the cluster (describeCluster), creates TOPIC with P partitions
// (admin.createTopics), reads its metadata, produces N records spread over
// them and requires the high watermarks to add up to N (ListOffsets).
// kafkajs consumes only through a consumer group, so only with GROUP does
// it consume: it joins GROUP, consumes the N records, commits and checks
// the committed offsets (OffsetFetch). It prints "OK kafkajs VERSION
// MECHANISM brokers=B ..." on success; any failure exits 1 with "FAIL
// kafkajs: ..." on stderr. Every step has a timeout and kafkajs does not
// retry, so an authentication error fails at once.
'use strict'

const fs = require('fs')
const path = require('path')

const N = 9
const P = 3
const TIMEOUT_MS = 20000

function fail (msg) {
  process.stderr.write('FAIL kafkajs: ' + msg + '\n')
  process.exit(1)
}

let kafkajs
try {
  kafkajs = require(path.join(__dirname, 'node', 'node_modules', 'kafkajs'))
} catch (e) {
  fail('kafkajs is not installed (npm ci --prefix ' + path.join(__dirname, 'node') + '): ' + e.message)
}
const { Kafka, logLevel } = kafkajs
const version = require(path.join(__dirname, 'node', 'node_modules', 'kafkajs', 'package.json')).version

async function main () {
  const args = process.argv.slice(2)
  if (args.length !== 5 && args.length !== 6) {
    process.stderr.write('usage: node kafkajs_check.js BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]\n')
    process.exit(2)
  }
  const [bootstrap, mechanism, username, password, topic, group] = args
  const ca = process.env.KAFKANET_CHECK_CA
  const kafka = new Kafka({
    clientId: 'kafkajs-check',
    brokers: [bootstrap],
    ssl: ca ? { ca: [fs.readFileSync(ca, 'utf-8')] } : undefined,
    sasl: mechanism === 'PLAINTEXT' ? undefined : { mechanism: mechanism.toLowerCase(), username, password },
    connectionTimeout: TIMEOUT_MS,
    authenticationTimeout: TIMEOUT_MS,
    requestTimeout: TIMEOUT_MS,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING
  })
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  const consumer = group && kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 1000, retry: { retries: 5 } })
  let brokers
  let how = 'high watermarks ' + N + ', no consume: kafkajs consumes only through consumer groups'
  try {
    await step('admin connect', admin.connect())
    const cluster = await step('describeCluster', admin.describeCluster())
    brokers = cluster.brokers.length
    if (brokers === 0) fail('describeCluster lists no brokers')
    await step('createTopics', admin.createTopics({ topics: [{ topic, numPartitions: P }], waitForLeaders: true }))
    const meta = await step('fetchTopicMetadata', admin.fetchTopicMetadata({ topics: [topic] }))
    if (meta.topics.length !== 1 || meta.topics[0].partitions.length !== P) {
      fail('unexpected metadata: ' + JSON.stringify(meta))
    }

    await step('producer connect', producer.connect())
    const messages = []
    for (let i = 0; i < N; i++) messages.push({ value: 'value-' + i, partition: i % P })
    await step('send', producer.send({ topic, messages }))

    const offsets = await step('fetchTopicOffsets', admin.fetchTopicOffsets(topic))
    const high = offsets.reduce((sum, o) => sum + Number(o.high), 0)
    if (offsets.length !== P || high !== N) {
      fail('after producing ' + N + ' records the offsets are ' + JSON.stringify(offsets))
    }

    if (group) {
      await step('consumer connect', consumer.connect())
      await step('subscribe', consumer.subscribe({ topics: [topic], fromBeginning: true }))
      const got = []
      const next = {} // partition: the offset to commit
      let done
      const all = new Promise(resolve => { done = resolve })
      await step('run', consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          got.push(message.value.toString())
          next[partition] = String(Number(message.offset) + 1)
          if (got.length === N) done()
        }
      }))
      await step('consume ' + N + ' records', all)
      await step('commitOffsets', consumer.commitOffsets(
        Object.entries(next).map(([partition, offset]) => ({ topic, partition: Number(partition), offset }))))
      const want = messages.map(m => m.value).sort()
      if (JSON.stringify(got.sort()) !== JSON.stringify(want)) fail('consumed ' + JSON.stringify(got))
      const committed = await step('fetchOffsets', admin.fetchOffsets({ groupId: group, topics: [topic] }))
      const sum = committed[0].partitions.reduce((s, p) => s + Number(p.offset), 0)
      if (sum !== N) fail('committed offsets ' + JSON.stringify(committed))
      how = 'consumed ' + N + ' records through group ' + group + ', committed'
    }
  } finally {
    await Promise.allSettled([consumer && consumer.disconnect(), producer.disconnect(), admin.disconnect()])
  }
  process.stdout.write(`OK kafkajs ${version} ${mechanism} brokers=${brokers} produced ${N} records; ${how}\n`)
}

// step runs one call under TIMEOUT_MS and names it in the failure.
async function step (name, promise) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${TIMEOUT_MS} ms`)), TIMEOUT_MS)
  })
  try {
    return await Promise.race([promise, timeout])
  } catch (e) {
    const auth = e.name === 'KafkaJSSASLAuthenticationError' ? 'SASL authentication failed: ' : ''
    fail(`${name}: ${auth}${e.name}: ${e.message}`)
  } finally {
    clearTimeout(timer)
  }
}

main().catch(e => fail(e.stack || String(e)))
