#!/usr/bin/env node
// Produces BYTES bytes to TOPIC (partition 0) with kafkajs as client id
// CLIENT_ID, one send of 200 KiB at a time (records of 10 KiB), and prints
// "OK kafkajs VERSION bytes=B elapsed_ms=T": the time from the first send
// to the last acknowledgement. A broker that throttles the client id
// (producer_byte_rate) answers with throttle_time_ms, which kafkajs
// honours by waiting before its next request (KIP-219).
//
// Usage: node kafkajs_produce_rate.js BOOTSTRAP TOPIC CLIENT_ID BYTES
'use strict'

const path = require('path')

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

const RECORD = 10 * 1024
const PER_SEND = 20

async function main () {
  const args = process.argv.slice(2)
  if (args.length !== 4) {
    process.stderr.write('usage: node kafkajs_produce_rate.js BOOTSTRAP TOPIC CLIENT_ID BYTES\n')
    process.exit(2)
  }
  const [bootstrap, topic, clientId, bytesArg] = args
  const total = parseInt(bytesArg, 10)
  const kafka = new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.NOTHING, retry: { retries: 0 }, requestTimeout: 60000 })
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  const value = Buffer.alloc(RECORD, 'q')
  const messages = Array.from({ length: PER_SEND }, () => ({ value }))
  let sent = 0
  const start = Date.now()
  while (sent < total) {
    await producer.send({ topic, acks: 1, messages: messages.map(m => ({ ...m, partition: 0 })) })
    sent += RECORD * PER_SEND
  }
  const elapsed = Date.now() - start
  await producer.disconnect()
  process.stdout.write(`OK kafkajs ${version} bytes=${sent} elapsed_ms=${elapsed}\n`)
}

main().catch(e => fail(e.stack || String(e)))
