#!/usr/bin/env node
// Produces through a SASL_PLAINTEXT listener with kafkajs, and checks the
// result with admin calls.
//
// Usage: node kafkajs_check.js BOOTSTRAP MECHANISM USER PASSWORD
//
// MECHANISM is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. kafkajs comes from
// node/node_modules (npm ci --prefix node). kafkajs consumes only through
// a consumer group (FindCoordinator, JoinGroup, SyncGroup...), which the
// example broker does not serve, so instead of consuming the script checks
// the records arrived with ListOffsets: it creates a topic
// (admin.createTopics), reads its metadata, produces N records and requires
// the partition's high watermark to be N. It prints "OK kafkajs ..." on
// success; any failure exits non-zero with a message on stderr. Every step
// has a timeout and kafkajs does not retry, so an authentication error
// fails at once.
'use strict'

const path = require('path')

const N = 10
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
  if (args.length !== 4) {
    process.stderr.write('usage: node kafkajs_check.js BOOTSTRAP MECHANISM USER PASSWORD\n')
    process.exit(2)
  }
  const [bootstrap, mechanism, username, password] = args
  const kafka = new Kafka({
    clientId: 'kafkajs-check',
    brokers: [bootstrap],
    sasl: { mechanism: mechanism.toLowerCase(), username, password },
    connectionTimeout: TIMEOUT_MS,
    authenticationTimeout: TIMEOUT_MS,
    requestTimeout: TIMEOUT_MS,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING
  })
  const topic = 'kafkajs-' + Math.random().toString(16).slice(2, 10)
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  try {
    await step('admin connect', admin.connect())
    const cluster = await step('describeCluster', admin.describeCluster())
    if (cluster.brokers.length === 0) fail('describeCluster lists no brokers')
    await step('createTopics', admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }))
    const meta = await step('fetchTopicMetadata', admin.fetchTopicMetadata({ topics: [topic] }))
    if (meta.topics.length !== 1 || meta.topics[0].partitions.length !== 1) {
      fail('unexpected metadata: ' + JSON.stringify(meta))
    }

    await step('producer connect', producer.connect())
    const messages = []
    for (let i = 0; i < N; i++) messages.push({ value: 'value-' + i, partition: 0 })
    await step('send', producer.send({ topic, messages }))

    const offsets = await step('fetchTopicOffsets', admin.fetchTopicOffsets(topic))
    const p0 = offsets.find(o => o.partition === 0)
    if (!p0 || p0.high !== String(N) || p0.low !== '0') {
      fail('after producing ' + N + ' records the offsets are ' + JSON.stringify(offsets))
    }
  } finally {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()])
  }
  process.stdout.write(`OK kafkajs ${version} ${mechanism} produced ${N} records as ${username} (high watermark ${N}; no consume: kafkajs needs consumer groups)\n`)
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
