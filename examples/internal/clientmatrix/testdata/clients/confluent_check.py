#!/usr/bin/env python3
"""Check a broker with confluent-kafka: metadata, create topic, produce, consume.

Usage: confluent_check.py BOOTSTRAP MECHANISM USER PASSWORD TOPIC [GROUP]

MECHANISM is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 for a SASL_PLAINTEXT
listener, or PLAINTEXT for no SASL (USER and PASSWORD are then ignored).
With KAFKANET_CHECK_CA set to a PEM CA file the connection is TLS
(SASL_SSL, or SSL without SASL), trusting that CA.
confluent-kafka-python (Debian's python3-confluent-kafka, on librdkafka)
reads the cluster's metadata and creates TOPIC with P partitions with the
AdminClient, produces N records spread over them, and consumes them back:
without GROUP from assigned partitions, with GROUP through that consumer
group (subscribe, consume, commit, close). It prints "OK confluent-kafka
VERSION MECHANISM brokers=B ..." on success. A SASL authentication error,
reported by librdkafka's error callback, fails at once; any failure exits 1
with "FAIL confluent-kafka: ..." on stderr, and every step has a timeout.
"""
import os
import sys
import time

N = 9
P = 3
TIMEOUT_S = 20


def fail(msg):
    print("FAIL confluent-kafka: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) not in (6, 7):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bootstrap, mechanism, user, password, topic = sys.argv[1:6]
    group = sys.argv[6] if len(sys.argv) == 7 else None
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
        "error_cb": on_error,
        "socket.timeout.ms": TIMEOUT_S * 1000,
    }
    ca = os.environ.get("KAFKANET_CHECK_CA", "")
    sasl = mechanism != "PLAINTEXT"
    common["security.protocol"] = ("SASL_" if sasl else "") + ("SSL" if ca else "PLAINTEXT")
    if ca:
        common["ssl.ca.location"] = ca
    if sasl:
        common.update({
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        })
    values = sorted(("value-%d" % i).encode() for i in range(N))

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
        futures = admin.create_topics([NewTopic(topic, num_partitions=P, replication_factor=1)],
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

    for i, v in enumerate(values):
        producer.produce(topic, value=v, partition=i % P, on_delivery=on_delivery)
    left = producer.flush(TIMEOUT_S)
    if left or len(delivered) != N:
        fail("%d of %d records not delivered" % (N - len(delivered), N))

    consumer = Consumer(dict(common, **{
        # The binding requires a group.id; without GROUP none is joined.
        "group.id": group or "confluent-kafka-check",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
    }))
    got = []
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(P)])
        else:
            consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                fail("consume failed: %s" % msg.error().str())
            got.append(msg.value())
        if group is not None and len(got) == N:
            consumer.commit(asynchronous=False)
    except KafkaException as e:
        fail("consume failed: %s" % e)
    finally:
        consumer.close()
    if sorted(got) != values:
        fail("consumed %d of %d records: %r" % (len(got), N, got))
    how = "through group %s, committed" % group if group else "from assigned partitions"
    print("OK confluent-kafka %s (librdkafka %s) %s brokers=%d produced and consumed %d records %s" % (
        confluent_kafka.version()[0], confluent_kafka.libversion()[0], mechanism, len(md.brokers), N, how))


if __name__ == "__main__":
    main()
