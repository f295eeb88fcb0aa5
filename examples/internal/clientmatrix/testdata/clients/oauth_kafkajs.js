#!/usr/bin/env node
// Checks SASL/OAUTHBEARER with kafkajs: metadata, produce.
//
// Usage: node oauth_kafkajs.js BOOTSTRAP TOKEN TOPIC
//
// kafkajs (from node/node_modules) gets TOKEN from its oauthBearerProvider.
// On a SASL_PLAINTEXT listener the script reads the cluster
// (describeCluster) and produces N records to partition 0 of TOPIC, which
// must exist. It prints "OK kafkajs VERSION OAUTHBEARER brokers=B ..." on
// success; any failure exits 1 with "FAIL kafkajs: ..." on stderr (a
// refused token: "SASL authentication failed: ..."). Nothing is retried and
// every step has a timeout.
'use strict'

const path = require('path')

const N = 3
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

// describe names an error and its causes; a SASL authentication error,
// however deep, is called one. kafkajs takes the broker's error challenge
// ({"status":"invalid_token"}) for success, though, and its next request
// is refused with ILLEGAL_SASL_STATE, as Apache Kafka refuses it: for a
// Metadata request that is an answer with no brokers, which kafkajs
// reports as "No brokers in the broker pool".
function describe (e) {
  const parts = []
  let auth = false
  for (let cur = e; cur; cur = cur.originalError || cur.cause) {
    parts.push(`${cur.name}: ${cur.message}`)
    if (cur.name === 'KafkaJSSASLAuthenticationError' || cur.type === 'ILLEGAL_SASL_STATE') auth = true
    if (parts.length > 5) break
  }
  return (auth ? 'SASL authentication failed: ' : '') + parts.join(' <- ')
}

async function main () {
  const args = process.argv.slice(2)
  if (args.length !== 3) {
    process.stderr.write('usage: node oauth_kafkajs.js BOOTSTRAP TOKEN TOPIC\n')
    process.exit(2)
  }
  const [bootstrap, token, topic] = args
  const kafka = new Kafka({
    clientId: 'kafkajs-oauth',
    brokers: [bootstrap],
    sasl: { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: token }) },
    connectionTimeout: TIMEOUT_MS,
    authenticationTimeout: TIMEOUT_MS,
    requestTimeout: TIMEOUT_MS,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING
  })
  const admin = kafka.admin()
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  let brokers
  try {
    await step('admin connect', admin.connect())
    brokers = (await step('describeCluster', admin.describeCluster())).brokers.length
    await step('producer connect', producer.connect())
    const messages = []
    for (let i = 0; i < N; i++) messages.push({ value: 'oauth-' + i, partition: 0 })
    await step('send', producer.send({ topic, messages }))
  } finally {
    await Promise.allSettled([producer.disconnect(), admin.disconnect()])
  }
  process.stdout.write(`OK kafkajs ${version} OAUTHBEARER brokers=${brokers} produced ${N} records\n`)
}

main().catch(e => fail(e.stack || String(e)))
