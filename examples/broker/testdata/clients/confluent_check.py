#!/usr/bin/env python3
"""Produce and consume through a SASL_PLAINTEXT listener with confluent-kafka.

Usage: confluent_check.py BOOTSTRAP MECHANISM USER PASSWORD

confluent-kafka-python (Debian's python3-confluent-kafka, on librdkafka)
creates a topic with the AdminClient, produces N records to it, consumes
them back from partition 0 with an assigned partition (no consumer group:
the broker serves none), and prints "OK confluent-kafka ..." on success. A
SASL authentication error, reported by librdkafka's error callback, fails at
once; any failure exits non-zero with a message on stderr, and every step
has a timeout.
"""
import sys
import time
import uuid

N = 10
TIMEOUT_S = 20


def fail(msg):
    print("FAIL confluent-kafka: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, mechanism, user, password = sys.argv[1:5]
    try:
        import confluent_kafka
        from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError as e:
        fail("confluent-kafka is not installed (apt-get install python3-confluent-kafka): %s" % e)

    def on_error(err):
        # librdkafka reports errors here and retries by itself; an
        # authentication failure will not heal, so stop at once.
        if err.code() == KafkaError._AUTHENTICATION:
            fail("SASL authentication failed: %s" % err.str())

    common = {
        "bootstrap.servers": bootstrap,
        "client.id": "confluent-kafka-check",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": on_error,
        "socket.timeout.ms": TIMEOUT_S * 1000,
    }
    topic = "confluent-" + uuid.uuid4().hex[:8]
    values = [("value-%d" % i).encode() for i in range(N)]

    admin = AdminClient(dict(common))
    try:
        # Ask in short rounds: error_cb runs only from poll(), so that an
        # authentication error ends the script without waiting out TIMEOUT_S.
        deadline = time.monotonic() + TIMEOUT_S
        md = None
        while md is None:
            try:
                md = admin.list_topics(timeout=1)
            except KafkaException:
                admin.poll(0)
                if time.monotonic() > deadline:
                    raise
        if not md.brokers:
            fail("metadata lists no brokers")
        futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)],
                                      request_timeout=TIMEOUT_S)
        futures[topic].result(timeout=TIMEOUT_S)
    except KafkaException as e:
        fail("admin failed: %s" % e)

    producer = Producer(dict(common, **{"message.timeout.ms": TIMEOUT_S * 1000}))
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            fail("delivery failed: %s" % err.str())
        delivered.append(msg.offset())

    for v in values:
        producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
    left = producer.flush(TIMEOUT_S)
    if left or len(delivered) != N:
        fail("%d of %d records not delivered" % (N - len(delivered), N))

    consumer = Consumer(dict(common, **{
        "group.id": "confluent-kafka-check",  # required by the binding; no group is joined
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    }))
    got = []
    try:
        consumer.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                fail("consume failed: %s" % msg.error().str())
            got.append(msg.value())
    finally:
        consumer.close()
    if got != values:
        fail("consumed %d of %d records: %r" % (len(got), N, got))
    print("OK confluent-kafka %s (librdkafka %s) %s produced and consumed %d records as %s" % (
        confluent_kafka.version()[0], confluent_kafka.libversion()[0], mechanism, N, user))


if __name__ == "__main__":
    main()
